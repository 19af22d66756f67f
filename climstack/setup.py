"""Install the pinned Spack and builtin repository into the user-level cache, offline-capably.

Each clone goes to a temporary directory beside its final place and is moved in only after
its commit (and, for Spack, its reported version) has been checked, so an interrupted or
failed setup never leaves a half-written cache behind. A second run finds the clones and
touches no network.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from climstack import pins
from climstack.errors import ClimstackError

CLONE_TIMEOUT_S = 900


def _git(*args: str, cwd: Path | None = None, timeout: int = 120) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true")
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, args, proc.stdout, proc.stderr)
    return proc.stdout.strip()


def _clone_url(url: str) -> str:
    """A plain local path is turned into file:// so that --depth is honoured."""
    if "://" not in url and not url.startswith("git@") and Path(url).exists():
        return Path(url).resolve().as_uri()
    return url


def _check_clone(pin: pins.GitPin, path: Path) -> None:
    """Raise unless `path` is a checkout of the pinned commit."""
    try:
        head = _git("rev-parse", "HEAD", cwd=path)
    except (subprocess.CalledProcessError, OSError) as err:
        raise ClimstackError(
            f"{path} is not a git checkout of {pin.name} {pin.tag}.",
            fix=f"remove it (rm -rf '{path}') and run bin/setup again",
        ) from err
    if head != pin.commit:
        raise ClimstackError(
            f"{path} holds {pin.name} at commit {head}, but this project pins {pin.tag} "
            f"({pin.commit}).",
            fix=f"remove it (rm -rf '{path}') and run bin/setup again",
        )
    if pin is pins.SPACK:
        reported = spack_version(path)
        if reported != pins.SPACK_VERSION:
            raise ClimstackError(
                f"Spack in {path} reports version {reported}, expected {pins.SPACK_VERSION}.",
                fix=f"remove it (rm -rf '{path}') and run bin/setup again",
            )


def spack_version(root: Path) -> str:
    """The version a Spack checkout reports, read without running Spack."""
    init = root / "lib" / "spack" / "spack" / "__init__.py"
    for line in init.read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "unknown"


def ensure_clone(pin: pins.GitPin) -> Path:
    """Return the cached checkout of `pin`, cloning it atomically if it is missing."""
    final = pins.cache_dir() / pin.cache_name
    if final.exists():
        _check_clone(pin, final)
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{pin.cache_name}.", dir=final.parent))
    try:
        url = _clone_url(pin.url)
        print(f"setup: cloning {pin.name} {pin.tag} from {pin.url}", file=sys.stderr)
        try:
            _git("clone", "--quiet", "--depth", "1", "--branch", pin.tag, url, str(tmp / "co"),
                 timeout=CLONE_TIMEOUT_S)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            detail = (getattr(err, "stderr", "") or str(err)).strip().splitlines()
            raise ClimstackError(
                f"cannot clone {pin.name} {pin.tag} from {pin.url} "
                f"(set by {pin.url_variable} or the default): {detail[-1] if detail else err}",
                fix=f"check network access, or set {pin.url_variable} to a reachable git "
                f"mirror or local path that carries tag {pin.tag}",
            ) from err
        _check_clone(pin, tmp / "co")
        os.replace(tmp / "co", final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _write_yaml_atomically(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as stream:
        stream.write("# Written by climstack bin/setup; rerun it rather than editing.\n")
        yaml.safe_dump(data, stream, default_flow_style=False, sort_keys=False)
    os.replace(tmp, path)


def configure_spack(spack_root: Path) -> None:
    """Spack's own (site) scope: builtin repo from the cache, never a binary bootstrap."""
    scope = spack_root / "etc" / "spack"
    _write_yaml_atomically(scope / "repos.yaml", {"repos": {"builtin": str(pins.builtin_repo_root())}})
    _write_yaml_atomically(scope / "bootstrap.yaml", {"bootstrap": {"enable": False}})


#: OS build tools the local site takes from the host instead of building them
LOCAL_BUILD_TOOLS = ("gmake", "cmake", "perl", "pkgconf", "autoconf", "automake", "libtool",
                     "m4", "gawk", "diffutils", "findutils", "tar", "xz", "bzip2", "gzip",
                     "git", "bison", "flex")


def find_local_externals() -> None:
    """Detect the host's build tools once (`spack external find`) into their own scope,
    which only site/local includes, so Cray concretizations never see them."""
    scope = pins.local_externals()
    if (scope / "packages.yaml").exists():
        return
    tmp = Path(tempfile.mkdtemp(prefix=".local-externals.", dir=scope.parent))
    try:
        proc = subprocess.run(
            [str(pins.PROJECT_ROOT / "bin" / "spack"), "external", "find", "--scope", "user",
             *LOCAL_BUILD_TOOLS],
            env={**{k: v for k, v in os.environ.items() if k != "SPACK_DISABLE_LOCAL_CONFIG"},
                 "SPACK_USER_CONFIG_PATH": str(tmp)},  # the user scope is where it writes
            capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise ClimstackError(f"`spack external find` failed: {proc.stderr.strip()}",
                                 fix="install the tools listed in bin/setup, then rerun it")
        (tmp / "packages.yaml").touch()  # an empty scope if nothing was found
        os.replace(tmp, scope)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    try:
        spack_root = ensure_clone(pins.SPACK)
        ensure_clone(pins.SPACK_PACKAGES)
        configure_spack(spack_root)
        find_local_externals()
    except ClimstackError as err:
        print(f"setup: error: {err}", file=sys.stderr)
        return 2
    print(f"setup: Spack {pins.SPACK_VERSION} at {spack_root}", file=sys.stderr)
    print(f"setup: builtin packages {pins.SPACK_PACKAGES.tag} at {pins.builtin_repo_root()}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
