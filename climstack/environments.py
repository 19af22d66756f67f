"""Find the project's Spack environments, tell which site each uses, and check them.

An environment is a directory with a spack.yaml under environments/ (one per site) or
containers/ (one per container target). It picks its site by including ../../site/<name>.
"""

import tempfile
import time
from pathlib import Path

import yaml

from climstack import spack
from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT

SITES_DIR = PROJECT_ROOT / "site"
ENVIRONMENT_ROOTS = (PROJECT_ROOT / "environments", PROJECT_ROOT / "containers")
#: scopes that other site scopes include, not sites of their own
SHARED_SCOPES = {"cray-ex"}


def known_sites() -> list[str]:
    return sorted(p.name for p in SITES_DIR.iterdir() if p.is_dir() and p.name not in SHARED_SCOPES)


def find_environments() -> dict[str, Path]:
    """Name -> directory; container environments are named container-<target>."""
    found = {}
    for root in ENVIRONMENT_ROOTS:
        for manifest in sorted(root.glob("*/spack.yaml")):
            prefix = "container-" if root.name == "containers" else ""
            found[prefix + manifest.parent.name] = manifest.parent
    return found


def resolve(name_or_path: str) -> Path:
    """An environment by name (archer2, container-gaea) or by directory."""
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


def includes(env_dir: Path) -> list[str]:
    manifest = env_dir / "spack.yaml"
    try:
        data = yaml.safe_load(manifest.read_text()) or {}
    except yaml.YAMLError as err:
        raise ClimstackError(f"{manifest} is not valid YAML: {err}", fix="correct the YAML") from err
    entries = (data.get("spack") or {}).get("include") or []
    return [entry if isinstance(entry, str) else entry.get("path", "") for entry in entries]


def site_of(env_dir: Path) -> str:
    """The site named by the environment's `include: ../../site/<name>`; checked to exist."""
    manifest = env_dir / "spack.yaml"
    sites = [Path(entry) for entry in includes(env_dir) if Path(entry).parent.name == "site"]
    if len(sites) != 1:
        raise ClimstackError(
            f"{manifest} must include exactly one site scope (../../site/<name>), found "
            f"{[str(s) for s in sites] or 'none'}",
            fix=f"add `- ../../site/<name>` to its include: list; sites: {', '.join(known_sites())}",
        )
    name = sites[0].name
    if not (env_dir / sites[0]).resolve().is_dir():
        raise ClimstackError(
            f"{manifest} names site '{name}' ({sites[0]}), which does not exist",
            fix=f"use one of the site scopes in {SITES_DIR}: {', '.join(known_sites())}, "
            f"or create site/{name}/ modelled on site/local/",
        )
    return name


def check(env_dir: Path) -> str:
    """Check the environment's site exists and let Spack validate every scope it loads."""
    site = site_of(env_dir)
    sections = "concretizer config definitions include mirrors modules packages repos".split()
    probe = f"[__import__('spack.config').config.get(s) for s in {sections!r}]"
    proc = spack.run("python", "-c", probe, env=env_dir, check=False)
    if proc.returncode != 0:
        raise ClimstackError(
            f"environment {env_dir} (site {site}) has invalid configuration: "
            f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.stdout}",
            fix="correct the key named above in that file (Spack's config schema decides "
            "what is allowed: `spack config get <section>` shows the merged result)",
        )
    return site


def concretize(env_dir: Path) -> float:
    """Fresh, offline concretization of an environment; returns the wall time in seconds."""
    check(env_dir)
    start = time.monotonic()
    spack.run("concretize", "--fresh", "--force", env=env_dir)
    return time.monotonic() - start


def create_named(name: str, env_dir: Path) -> None:
    """`spack env create NAME` from a project environment, its includes made absolute
    (Spack 1.1 copies the manifest verbatim, so relative includes would break)."""
    site_of(env_dir)
    manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())
    manifest["spack"]["include"] = [str((env_dir / entry).resolve()) for entry in includes(env_dir)]
    with tempfile.TemporaryDirectory() as tmp:
        absolute = Path(tmp) / "spack.yaml"
        absolute.write_text(yaml.safe_dump(manifest, sort_keys=False))
        spack.run("env", "create", name, str(absolute))


def register(commands) -> None:
    def run_check(args):
        for name in args.environments or find_environments():
            print(f"{name}: ok (site {check(resolve(name))})")

    def run_concretize(args):
        for name in args.environments or find_environments():
            print(f"{name}: concretized --fresh in {concretize(resolve(name)):.1f} s")

    def run_named(args):
        create_named(args.name, resolve(args.environment or args.name))
        print(f"created: spack env activate {args.name} && spack install")

    sub = commands.add_parser("named-env", help="create a named Spack environment from one "
                              "of ours (e.g. archer2), usable as `spack env activate archer2`")
    sub.add_argument("name")
    sub.add_argument("environment", nargs="?", help="default: the environment called NAME")
    sub.set_defaults(run=run_named)

    for command, run, text in (("check", run_check, "check environments' site and scopes"),
                               ("concretize", run_concretize, "concretize environments --fresh")):
        sub = commands.add_parser(command, help=text)
        sub.add_argument("environments", nargs="*", help="names or directories (default: all)")
        sub.set_defaults(run=run)
