"""The one catalogue of run modes: every consumer (the records' order, the report's legend,
local runs, emitted job scripts, each `--modes` choice, the plots' colours) reads this
table, so adding a mode is one row.

A mode says what runs (the host's build, or the image's, as built or without libxpmem),
on which bind plan (`climstack bind`'s: bind, hybrid or fabric; none for native), which
host library families it binds over the image's (and their PrgEnv flavour at a centre),
and where it runs: locally (`bench local`), at a centre (`bench SITE --emit`), or both.
"""

from dataclasses import dataclass

from climstack.errors import ClimstackError

HOST, VIEW, NOXPMEM = "host", "view", "noxpmem"  # which binary a mode runs
HOST_CCE = "host-cce"  # the host's CCE build (here: Debian's clang, environments/local-cce)
HOST_NETCDF = ("netcdf", "hdf5")  # the families the host-NetCDF modes bind


@dataclass(frozen=True)
class ModeRow:
    name: str
    runs: str  # what runs, for the report's legend
    published: str  # the name the field's publications give it
    plan: str | None = None  # the bind plan's mode; None: native, no container
    families: tuple[str, ...] = ()  # host library families bound over the image's
    flavour: str | None = None  # the PrgEnv flavour of those families at a centre
    binary: str = VIEW  # HOST, HOST_CCE, VIEW (the image's view), NOXPMEM (without xpmem)
    runtime: str | None = None  # a runtime of its own (default: the comparison's --runtime)
    local: bool = True  # `bench local` runs it
    centre: bool = True  # `bench SITE --emit` writes it
    # the only benchmarks it runs locally (runner.LOCAL names): the CCE stand-in builds the
    # C side only, so its modes run NetCDF-Bench; a centre's PrgEnv-cray builds have Fortran
    only: tuple[str, ...] = ()

    @property
    def container(self) -> bool:
        return self.plan is not None

    @property
    def io_only(self) -> bool:
        """Binds host I/O libraries: only for the benchmarks that use NetCDF."""
        return bool(self.families)

    @property
    def plan_key(self) -> tuple:
        """The plan this mode needs: modes with one key share one plan."""
        return (self.plan, self.families, self.flavour)


ROWS = [
    ModeRow("native", "the host's build on the host MPI", "native", binary=HOST),
    ModeRow(
        "native-cce",
        "the host's CCE build on the host MPI (here Debian's clang 14 builds NetCDF-C and "
        "NetCDF-Bench on the host's HDF5: C only)",
        "native CCE",
        binary=HOST_CCE,
        centre=False,
        only=("netcdf-bench",),
    ),
    ModeRow("bind", "the image's build, the host MPI bound in", "container (bind model)", "bind"),
    ModeRow(
        "bind-noxpmem",
        "bind, the executable without libxpmem.so.0",
        "container without xpmem",
        "bind",
        binary=NOXPMEM,
    ),
    ModeRow(
        "bind-host-netcdf",
        "bind, plus the host's NetCDF and HDF5 bound over the image's",
        "container + host NetCDF",
        "bind",
        HOST_NETCDF,
        centre=False,
    ),
    ModeRow(
        "bind-host-netcdf-gnu",
        "bind, plus the host's PrgEnv-gnu NetCDF and HDF5 bound over the image's",
        "container + host GNU NetCDF",
        "bind",
        HOST_NETCDF,
        "gnu",
        local=False,
    ),
    ModeRow(
        "bind-host-netcdf-cray",
        "bind, plus the host's PrgEnv-cray (CCE) NetCDF and HDF5 bound over the image's",
        "container + host CCE NetCDF",
        "bind",
        HOST_NETCDF,
        "cray",
        only=("netcdf-bench",),
    ),
    ModeRow("hybrid", "the image's build on the image's own MPI", "hybrid model", "hybrid"),
    ModeRow(
        "fabric",
        "the image's MPI over the host's libfabric",
        "CSCS Container Engine's default",
        "fabric",
    ),
    ModeRow(
        "bind-cdi",
        "bind, the plan applied by podman as a CDI spec (one container per node, its ranks "
        "joined by podman exec; the host's IPC and PID namespaces)",
        "podman + CDI",
        "bind",
        runtime="podman",
        centre=False,
        only=("osu_latency", "osu_allreduce", "mom6"),
    ),
    # the precise profile's controls (climstack.bench.precise): `bench local --precise` only
    ModeRow(
        "bind-slow5",
        "bind, with every clock its ranks read running 5% fast: a known 5% slowdown (the "
        "precise profile's control)",
        "-",
        "bind",
        local=False,
        centre=False,
    ),
    ModeRow(
        "native-again",
        "native again, paired with native: no effect by construction (the precise "
        "profile's A/A control)",
        "-",
        binary=HOST,
        local=False,
        centre=False,
    ),
]
BASELINE = "native"
#: the precise profile's controls: bind with every clock 5% fast, judged against bind
#: (the verdicts' gate, climstack.bench.report.verdicts), and native again (A/A)
CONTROL, CONTROL_OF, SLOWDOWN, AA = "bind-slow5", "bind", 0.05, "native-again"


def names(local: bool | None = None, centre: bool | None = None) -> list[str]:
    """The modes in catalogue order; `local`/`centre`: only those that run there."""
    return [
        row.name
        for row in ROWS
        if (local is None or row.local == local) and (centre is None or row.centre == centre)
    ]


def get(name: str) -> ModeRow:
    for row in ROWS:
        if row.name == name:
            return row
    raise ClimstackError(f"no mode {name!r}", fix=f"one of {', '.join(names())}")


def known(name: str) -> bool:
    return any(row.name == name for row in ROWS)


def ordered(present) -> list[str]:
    """The mode names `present`, in catalogue order, then any other (published outputs may
    name their own) sorted."""
    present = set(present)
    return [n for n in names() if n in present] + sorted(present - set(names()))


def chosen(given: str | None, allowed: list[str], option: str = "--modes") -> list[str]:
    """A comma-separated choice of modes, checked against `allowed` before anything runs;
    none given: all of them. In `allowed`'s order."""
    wanted = [m.strip() for m in given.split(",") if m.strip()] if given else list(allowed)
    unknown = [m for m in wanted if m not in allowed]
    if unknown or not wanted:
        raise ClimstackError(
            f"{option} {given!r}: "
            + (f"unknown mode(s) {', '.join(unknown)}" if unknown else "no mode named"),
            fix=f"comma-separated, from {','.join(allowed)}",
        )
    return [m for m in allowed if m in wanted]


def legend(present) -> list[list[str]]:
    """The report's legend rows: mode, what runs, the publications' name."""
    rows = []
    for name in ordered(present):
        row = get(name) if known(name) else None
        rows.append([name, row.runs if row else "-", row.published if row else "-"])
    return rows
