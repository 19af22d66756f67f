# Source this file (bash/zsh) to use the project's pinned Spack with shell integration:
#   source share/activate.sh && spack env activate -d environments/archer2
_climstack_root=$(cd "$(dirname "${BASH_SOURCE[0]:-${(%):-%x}}")/.." && pwd)
if [ ! -x "$_climstack_root/.venv/bin/python" ]; then
  echo "share/activate.sh: run $_climstack_root/bin/setup first" >&2
else
  export SPACK_PYTHON="$_climstack_root/.venv/bin/python"
  eval "$("$SPACK_PYTHON" -c 'from climstack import pins
print(f"export SPACK_USER_CACHE_PATH={pins.spack_user_cache()}")
print(f". {pins.spack_root()}/share/spack/setup-env.sh")')"
  export PATH="$_climstack_root/bin:$PATH"
fi
unset _climstack_root
