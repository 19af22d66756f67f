"""mpi_abi_wrapper (repo/packages/mpi-abi-wrapper) built by Spack against each stand-in host
MPI of this machine that lacks the MPI-5 standard ABI, as a centre builds it against its
Cray MPICH: the MPI a non-buildable external, the recipe from our repository, its source
through the offline route (the archive assembled into the local source mirror,
climstack.stack.sources.git_archives), the compilers and build tools bin/setup detected for
the local site. Each install's libmpiwrapper.so is linked to that MPI's library
(HostMpi.library) with a RUNPATH to its directory.

Built as climstack.bench.host_builds builds a package against each host MPI. A fresh
build is four Spack solves (~30 CPU-s each here: a solve's floor with Spack 1.1, whatever
the spec) and four builds (~20 s each, mostly the generated wrappers.c): about 230 CPU-s in
all; a warm call takes about 10 ms.
"""

from pathlib import Path

from climstack import pins
from climstack.bench import host_builds
from climstack.bench.host_builds import DEBIAN_PREFIX, HOSTS  # noqa: F401 (this module's API)
from climstack.common import atomic
from climstack.spack import DEFAULT, Spack
from climstack.stack.sources import git_archives, git_sources

PACKAGE = "mpi-abi-wrapper"
RECIPE = pins.PROJECT_ROOT / "repo" / "packages" / PACKAGE / "package.py"
FRONT, BACK = "libmpi_abi.so", "libmpiwrapper.so"
#: the host MPIs without the standard ABI of their own: the wrapper gives it to them
WRAPPED = tuple(name for name, host in HOSTS.items() if host.library != "libmpi_abi.so.1")


def directory() -> Path:
    """The Spack environment of the wrappers, with its install tree (installs/)."""
    return pins.cache_dir() / "abi-hosts" / "wrappers"


def _assemble_source(env: Path) -> None:
    mirror = git_sources.local_mirror()
    with atomic.locked(mirror):  # one filler of the shared mirror at a time
        git_archives.assemble(PACKAGE, mirror)


def builds() -> host_builds.HostBuilds:
    return host_builds.HostBuilds(
        PACKAGE,
        RECIPE,
        directory(),
        complete=lambda prefix: all((prefix / "lib" / name).is_file() for name in (FRONT, BACK)),
        hosts=WRAPPED,
        fill_sources=_assemble_source,
    )


def prefixes(names=WRAPPED, spack: Spack = DEFAULT) -> dict[str, Path]:
    """name -> the mpi_abi_wrapper install prefix built by Spack against that host MPI of
    WRAPPED (lib/libmpi_abi.so, lib/libmpiwrapper.so, include/mpi.h, bin/mpicc). All of
    WRAPPED are built together, once per set of inputs."""
    return builds().prefixes(names, spack)
