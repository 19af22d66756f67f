"""MPICH's test suite (repo/packages/mpich-testsuite) built by Spack against host MPIs of
this machine (climstack.bench.host_builds): the MPICH release's source from Debian through
the source mirror, RUNPATH, in the user cache beside the images (never into them: bound in
at run time, so no image key changes). `tests=smoke` is the 33-test slice `make test`
runs; `tests=all` every C test the package builds."""

from pathlib import Path

from climstack import pins
from climstack.bench import host_builds
from climstack.stack.sources import bench_sources, git_sources

PACKAGE = "mpich-testsuite"
RECIPE = pins.PROJECT_ROOT / "repo" / "packages" / PACKAGE / "package.py"
SLICES = ("smoke", "all")
#: the host MPIs it is built against: Debian's MPICH 4.0.2 (the local site's host MPI) and
#: MPICH 3.4.3 (the ARCHER2-style image's MPICH: Cray MPICH 8.1's base)
HOSTS = ("debian-mpich", "mpich-3.4.3")


def _installed(prefix: Path) -> bool:
    return all((prefix / name).is_file() for name in ("runtests", "testlist"))


def builds(tests: str, host: str) -> host_builds.HostBuilds:
    """The slice `tests` against `host`: an environment of its own, so a run on one host
    MPI (make test's) builds that one alone."""
    return host_builds.HostBuilds(
        f"{PACKAGE} tests={tests}",
        RECIPE,
        pins.cache_dir() / "mpich-testsuite" / tests / host,
        complete=_installed,
        hosts=(host,),
        fill_sources=lambda env: bench_sources.fill(env, git_sources.local_mirror()),
    )


def prefixes(tests: str = "smoke", names=HOSTS) -> dict[str, Path]:
    """host name -> the suite's install prefix built against that host MPI."""
    return {name: builds(tests, name).prefixes()[name] for name in names}
