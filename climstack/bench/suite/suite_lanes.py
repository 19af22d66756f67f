"""What one lane of MPICH's test suite runs: a host MPI of this machine and a route, as
(the suite's install, the host's launcher, the environment, each rank's command).

Two ABIs, two builds, each run natively (the baseline) and in the image of that ABI
through the bind plan `climstack bind local --abi KIND --prefix HOST_MPI [--wrapper]` writes
for the host MPI, once verify confirmed it with the image's own ld.so (the gate, on the
image's mpi-probe: the suite's programs are bound in, not the image's):
- the MPICH ABI (`native`, `bind`: the ARCHER2-style image): the suite built against each
  MPICH; Intel MPI, which has that ABI, runs MPICH 3.4.3's build with its own libmpi.so.12
  first on the library path;
- the MPI-5 standard ABI (`native-abi`, `bind-abi`: containers/mpi-abi): one build by MPICH
  5.0.2's mpicc_abi, run on each host's libmpi_abi.so.1, its own (MPICH 5, Intel MPI
  2021.19, Open MPI 6 in its Debian sid root filesystem) or mpi_abi_wrapper's over an MPI
  without that ABI.
"""

import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from climstack.bench.abi import abi, abi_hosts
from climstack.bench.suite import suite_builds
from climstack.bench.suite.judged import NATIVE_OF
from climstack.check import gate
from climstack.errors import ClimstackError
from climstack.launch import runtimes

ROUTES = ("native", "bind", "native-abi", "bind-abi")
#: route -> the ABI the suite's programs are built for, and the image of that ABI
ABI = {"native": "mpich", "bind": "mpich", "native-abi": "standard", "bind-abi": "standard"}
#: host MPI -> the suite's MPICH-ABI build it runs (Intel MPI has no build of its own)
MPICH_ABI_HOSTS = {
    "debian-mpich": "debian-mpich",
    "mpich-3.4.3": "mpich-3.4.3",
    "mpich-4.1": "mpich-4.1",
    "intel-2021.19": "mpich-3.4.3",
}
#: the host MPIs of the standard ABI (abi_hosts: their own, or through mpi_abi_wrapper)
STANDARD_ABI_HOSTS = ("mpich", "intel-2021.19", "openmpi", *abi_hosts.WRAPPED)
HOSTS = tuple(dict.fromkeys([*MPICH_ABI_HOSTS, *STANDARD_ABI_HOSTS]))
#: the image's libraries, last on its LD_LIBRARY_PATH (the recipes' %environment)
IMAGE_LIBRARIES = f"{abi.VIEW}/lib"


@dataclass(frozen=True)
class Lane:
    """How runtests runs one host MPI's lane."""

    host: str
    route: str
    title: str
    suite: Path  # the suite's install (runtests, testlists, programs)
    mpiexec: str  # the launcher's command, runtests adds `-n N` (it runs through a shell)
    env: dict = field(default_factory=dict)  # for the launcher and its ranks
    wrapper: str = ""  # each rank's command (MPITEST_PROGRAM_WRAPPER); "": natively


def hosts_of(route: str, tests: str = "smoke") -> tuple[str, ...]:
    """The hosts with a lane on `route` for the slice `tests`: the MPICH ABI's Fortran slice
    runs where the suite's build has the MPI's own Fortran side (suite_builds.FORTRAN), the
    standard ABI's (mpif's) on every host of that ABI."""
    if ABI[route] != "mpich":  # its Fortran is mpif's, the same on every host
        return STANDARD_ABI_HOSTS
    if tests == "fortran":
        return tuple(h for h, build in MPICH_ABI_HOSTS.items() if build in suite_builds.FORTRAN)
    return tuple(MPICH_ABI_HOSTS)


def launcher(host: abi_hosts.Host) -> str:
    """The host's launcher for runtests: its own command line, less the rank count."""
    argv = host.launch(1)
    at = next(i for i in range(len(argv) - 1) if argv[i : i + 2] == ["-n", "1"])
    argv = argv[:at] + argv[at + 2 :]
    if not host.wrap:
        return shlex.join(argv)
    # in the host's own root filesystem (ch-run, which starts in /): started in the test's
    # directory, $PWD when runtests' shell runs the line
    root = argv.index(str(host.root))
    return f'{shlex.join(argv[:root])} "--cd=$PWD" {shlex.join(argv[root:])}'


def lane(host_name: str, route: str, tests: str, out: Path, image: Path | None,
         model_only: bool = False) -> Lane:  # fmt: skip
    """The lane of `host_name` on `route` (`image`: the image of the route's ABI)."""
    if route not in ROUTES:
        raise ClimstackError(f"route {route!r}: unknown", fix=",".join(ROUTES))
    if host_name not in hosts_of(route, tests):
        fortran = " of the Fortran tests" if tests == "fortran" else ""
        raise ClimstackError(
            f"host MPI {host_name} has no {ABI[route]} ABI lane{fortran} ({route})",
            fix=f"for {route}: {','.join(hosts_of(route, tests)) or 'none'}",
        )
    host = abi_hosts.host(host_name, visible=(out, *([image] if image else [])))
    if ABI[route] == "mpich":
        suite = suite_builds.prefixes(tests, [MPICH_ABI_HOSTS[host_name]])
        suite = suite[MPICH_ABI_HOSTS[host_name]]
    else:
        suite = suite_builds.standard_prefix(tests)
    env = dict(host.env)
    if route in NATIVE_OF:  # in the image, through the host's bind plan for that ABI
        made = abi.host_plan(host, out / "plans", image, kind=ABI[route])
        gate.require(made, image, [abi.PROBE], model_only, "bench suite", fix="climstack verify")
        # and the image's view after the plan's links, as the image's %environment puts it
        # under Apptainer (ch-run does not read it): a program built outside the image (the
        # Fortran tests of the standard ABI) takes the image's libmpif.so.1 from there
        in_image = replace(made, library_path=[*made.library_path, IMAGE_LIBRARIES])
        wrapper = runtimes.get(abi.RUNTIME).job_lines(in_image, str(image), [], here=True)[1]
        return Lane(host_name, route, host.title, suite, launcher(host), env, wrapper)
    env["LD_LIBRARY_PATH"] = str(native_libraries(host, route, out))
    if host.wrapper:
        env["MPI_ABI_WRAPPER_LIB"] = f"{host.wrapper}/lib/libmpiwrapper.so"
    return Lane(host_name, route, host.title, suite, launcher(host), env)


def native_libraries(host: abi_hosts.Host, route: str, out: Path) -> Path:
    """The directory whose MPI library the suite's programs load natively, before their
    RUNPATH (the MPI they were built against): the host's own lib/ for the MPICH ABI, the
    standard ABI's library otherwise (abi_hosts.abi_libraries: its own, or the wrapper's)."""
    if route == "native":
        return Path(host.prefix) / "lib"
    return abi_hosts.abi_libraries(host, out)
