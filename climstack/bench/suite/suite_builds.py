"""MPICH's test suite (repo/packages/mpich-testsuite) built by Spack against host MPIs of
this machine (climstack.bench.host_builds): the MPICH release's source from Debian through
the source mirror, RUNPATH, in the user cache beside the images (never into them: bound in
at run time). `tests=smoke` is the 33-test slice `make test` runs (10 Fortran tests more
where the MPI has Fortran: FORTRAN); `tests=all` every test the package builds;
`tests=fortran` every Fortran test (f77, f90) alone. For the MPICH ABI, one build per
MPICH; for the MPI-5 standard ABI, one by MPICH 5.0.2's mpicc_abi (`abi=standard`), which
every MPI of that ABI runs."""

from pathlib import Path

import yaml

from climstack import pins
from climstack.bench import host_builds
from climstack.inputs.sites import SITES_DIR
from climstack.stack.sources import bench_sources, git_sources

PACKAGE = "mpich-testsuite"
RECIPE = pins.PROJECT_ROOT / "repo" / "packages" / PACKAGE / "package.py"
SLICES = ("smoke", "all", "fortran")
#: the host MPIs it is built against for the MPICH ABI: Debian's MPICH 4.0.2 (the local
#: site's host MPI), MPICH 3.4.3 (the ARCHER2-style image's MPICH: Cray MPICH 8.1's base)
#: and 4.1.3 (Cray MPICH 9.0's base is 4.1.2)
HOSTS = ("debian-mpich", "mpich-3.4.3", "mpich-4.1")
#: the host MPIs with a Fortran side (mpif77, mpifort, libmpifort): the Fortran tests too
#: (`+fortran`); PyPI's MPICH wheels have none
FORTRAN = ("debian-mpich",)
#: the MPI whose mpicc_abi builds the standard-ABI suite
STANDARD = "mpich-5"
#: the standard ABI's Fortran is mpif's: the overlay recipes of the MPI-5 image
ABI_REPO = SITES_DIR / "container-mpi-abi" / "repo"


def _installed(prefix: Path) -> bool:
    return all((prefix / name).is_file() for name in ("runtests", "testlist"))


def builds(tests: str, host: str) -> host_builds.HostBuilds:
    """The slice `tests` against `host` (STANDARD: for the standard ABI): an environment of
    its own, so a run on one host MPI (make test's) builds that one alone."""
    abi = " abi=standard" if host == STANDARD else ""
    fortran = " +fortran" if host in FORTRAN else ""
    settings = {}
    if host == STANDARD and tests == "fortran":  # Fortran over the standard ABI: mpif
        fortran, settings = " +fortran ^mpif", _standard_fortran()
    return host_builds.HostBuilds(
        f"{PACKAGE} tests={tests}{abi}{fortran}",
        RECIPE,
        pins.cache_dir() / "mpich-testsuite" / tests / host,
        complete=_installed,
        hosts=(host,),
        fill_sources=lambda env: bench_sources.fill(env, git_sources.local_mirror()),
        **settings,
    )


def _standard_fortran() -> dict:
    """The settings of the standard ABI's Fortran build: mpif's mpifort over MPICH 5.0.2's
    libmpi_abi (its overlay's `+abi`), as the MPI-5 image builds its Fortran programs, by
    the host's gfortran: in the image, the image's libmpif.so.1 serves them."""
    image = yaml.safe_load((ABI_REPO.parent / "packages.yaml").read_text())["packages"]
    abi = image["mpich"]["externals"][0]["spec"]  # the image's MPICH, declared once
    prefix = str(host_builds.HOSTS[STANDARD].prefix())
    return {
        "repos": {"climstack_mpi_abi": str(ABI_REPO)},
        "packages": {
            "mpi": {"require": ["mpif"]},
            "mpich": {"externals": [{"spec": abi, "prefix": prefix}], "buildable": False},
        },
    }


def prefixes(tests: str = "smoke", names=HOSTS) -> dict[str, Path]:
    """host name -> the suite's install prefix built against that host MPI."""
    return {name: builds(tests, name).prefixes()[name] for name in names}


def standard_prefix(tests: str = "smoke") -> Path:
    """The suite's install for the MPI-5 standard ABI (its programs link libmpi_abi.so.1)."""
    return builds(tests, STANDARD).prefixes()[STANDARD]
