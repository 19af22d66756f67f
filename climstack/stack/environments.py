"""Find the project's Spack environments, tell which site each uses, check and concretize
them, and read the stack's definitions (environments/stack.yaml).

An environment is a directory with a spack.yaml under environments/ (one per site) or
containers/ (one per container target). It picks its site by including ../../site/<name>.
"""

import time
from pathlib import Path


from climstack import inputs, spack
from climstack.errors import ClimstackError
from climstack.inputs.sites import SITES_DIR, known_sites
from climstack.pins import PROJECT_ROOT
from climstack.stack import lock_cache

STACK = PROJECT_ROOT / "environments" / "stack.yaml"
ENVIRONMENT_ROOTS = (PROJECT_ROOT / "environments", PROJECT_ROOT / "containers")
MANIFEST_FIX = "compare with environments/local/spack.yaml; Spack's schema decides the keys"


def find_environments() -> dict[str, Path]:
    """Name -> directory; container environments are named container-<target>."""
    found = {}
    for root in ENVIRONMENT_ROOTS:
        for manifest in sorted(root.glob("*/spack.yaml")):
            prefix = "container-" if root.name == "containers" else ""
            found[prefix + manifest.parent.name] = manifest.parent
    return found


def resolve(name_or_path: str) -> Path:
    """An environment by name (archer2, container-gaea-c6) or by directory."""
    path = Path(name_or_path)
    if (path / "spack.yaml").is_file():
        return path.resolve()
    environments = find_environments()
    if name_or_path in environments:
        return environments[name_or_path]
    raise ClimstackError(
        f"no environment '{name_or_path}' (no {path / 'spack.yaml'} either)",
        fix=f"use one of: {', '.join(environments)}, or a directory holding a spack.yaml",
    )


def manifest(env_dir: Path) -> dict:
    """The environment's spack.yaml, checked to be a mapping with a `spack:` mapping."""
    path = env_dir / "spack.yaml"
    data = inputs.parse_yaml(path, MANIFEST_FIX)
    if not isinstance(data, dict) or not isinstance(data.get("spack"), dict):
        raise ClimstackError(
            f"{path}: key spack: missing or not a mapping "
            f"({'empty file' if data is None else type(data).__name__})",
            fix=MANIFEST_FIX,
        )
    return data


def includes(env_dir: Path) -> list[str]:
    entries = manifest(env_dir)["spack"].get("include") or []
    if not isinstance(entries, list):
        raise ClimstackError(
            f"{env_dir / 'spack.yaml'}: key spack.include: expected a list "
            f"of paths, found {type(entries).__name__}",
            fix=MANIFEST_FIX,
        )
    return [
        entry if isinstance(entry, str) else str((entry or {}).get("path", ""))
        for entry in entries
    ]


def label(env_dir: Path) -> str:
    """The environment's directory, relative to the project when inside it."""
    return str(
        env_dir.relative_to(PROJECT_ROOT) if env_dir.is_relative_to(PROJECT_ROOT) else env_dir
    )


def site_of(env_dir: Path) -> str:
    """The site named by the environment's `include: ../../site/<name>`; checked to exist."""
    path = env_dir / "spack.yaml"
    found = [Path(entry) for entry in includes(env_dir) if Path(entry).parent.name == "site"]
    if len(found) != 1:
        raise ClimstackError(
            f"{path} must include exactly one site scope (../../site/<name>), found "
            f"{[str(s) for s in found] or 'none'}",
            fix="add `- ../../site/<name>` to its include: list; sites: "
            + ", ".join(known_sites()),
        )
    name = found[0].name
    if not (env_dir / found[0]).resolve().is_dir():
        raise ClimstackError(
            f"{path} names site '{name}' ({found[0]}), which does not exist",
            fix=f"use one of the site scopes in {SITES_DIR}: {', '.join(known_sites())}, "
            f"or create site/{name}/ modelled on site/local/",
        )
    return name


SCOPE_FIX = "correct it, or delete the file (a scope needs no file for a section it leaves alone)"


def _scope_files(path: Path, seen: set[Path]) -> list[Path]:
    """The YAML files of an included scope (a file, or a directory of section files and
    the scopes its include.yaml names), each once."""
    if path in seen or not path.exists():
        return []
    seen.add(path)
    if path.suffix in (".yaml", ".yml"):
        inputs.read_text(path, SCOPE_FIX)  # a directory in the place of a file is named
        return [path]
    if not path.is_dir():
        return [path]
    files = sorted(path.glob("*.yaml"))
    include = path / "include.yaml"
    if include.is_file():
        entries = (inputs.parse_yaml(include, SCOPE_FIX) or {}).get("include") or []
        for entry in entries:
            entry = entry if isinstance(entry, str) else str((entry or {}).get("path", ""))
            if "$" not in entry:
                files += _scope_files((path / entry).resolve(), seen)
    return files


def check_scope_files(env_dir: Path) -> list[Path]:
    """Every YAML file the environment includes parses to a mapping of config sections:
    bad YAML, an empty file or a directory in a file's place is named before Spack runs."""
    seen: set[Path] = set()
    files = []
    for entry in includes(env_dir):
        if "$" not in entry:
            files += _scope_files((env_dir / entry).resolve(), seen)
    for path in files:
        data = inputs.parse_yaml(path, SCOPE_FIX)
        if not isinstance(data, dict) or not data:
            found = "it is empty" if data is None else f"found {type(data).__name__}"
            raise ClimstackError(
                f"{path}: expected a mapping of Spack config sections, {found}", fix=SCOPE_FIX
            )
    return files


def solver_inputs(env_dir: Path) -> dict:
    """Check the environment's site exists and let Spack validate every scope it loads;
    returns what its concretization depends on, as Spack reports it (lock_cache.report)."""
    site = site_of(env_dir)
    check_scope_files(env_dir)
    try:
        return lock_cache.report(env_dir)
    except spack.ScriptFailed as err:
        detail = " ".join(err.output.split())[-800:]
        raise ClimstackError(
            f"environment {env_dir} (site {site}) has invalid configuration: {detail}",
            fix="correct the key named above in that file (Spack's config schema decides "
            "what is allowed: `spack config get <section>` shows the merged result)",
        ) from err


def check(env_dir: Path) -> str:
    """The environment's site, once its scopes are checked (solver_inputs)."""
    solver_inputs(env_dir)
    return site_of(env_dir)


def concretize(env_dir: Path, reuse: bool = True) -> float:
    """Fresh, offline concretization of an environment; returns the wall time in seconds.
    The lockfile of an earlier concretization with the same inputs is reused
    (climstack.stack.lock_cache) unless `reuse` is False."""
    start = time.monotonic()
    lock_cache.concretize(env_dir, reuse=reuse, reported=solver_inputs(env_dir))
    return time.monotonic() - start


def definition(name: str) -> list[str]:
    """The specs of a `definitions:` entry of environments/stack.yaml (e.g. probes)."""
    for entry in (inputs.parse_yaml(STACK, "restore it from git") or {}).get("definitions", []):
        if name in entry:
            return list(entry[name])
    raise ClimstackError(f"{STACK} defines no `{name}`", fix="restore it from git")


def absolute_manifest(env_dir: Path) -> dict:
    """The environment's manifest with its includes made absolute, to be written elsewhere."""
    site_of(env_dir)
    data = manifest(env_dir)
    data["spack"]["include"] = [str((env_dir / entry).resolve()) for entry in includes(env_dir)]
    return data
