"""What the precise profile runs: the headline benchmarks, long enough to be measured; the
modes, including its two controls; and its stopping rule's numbers."""

from dataclasses import replace

from climstack.bench.run import catalogue
from climstack.bench.run.runner import LOCAL, OSU, Benchmark
from climstack.errors import ClimstackError

#: the modes: native, the three container models, and the two controls (catalogue rows)
MODES = ("native", "bind", "hybrid", "fabric", catalogue.CONTROL, catalogue.AA)
CONTROL, AA = catalogue.CONTROL, catalogue.AA
#: the control's known effect: every clock its ranks read runs this much fast (slowdown.c)
SLOWDOWN = catalogue.SLOWDOWN


def clock_share(mode: str) -> float:
    """How fast the clocks of `mode`'s ranks run: the control's SLOWDOWN, else 0."""
    return SLOWDOWN if mode == CONTROL else 0.0


#: the stopping rule: after MIN_REPEATS, a benchmark stops once every one of its headline
#: cells' 95% interval is narrower than TARGET (high / low - 1), or at CAP repeats
TARGET = 0.04
MIN_REPEATS = 5
CAP = 15
WARMUPS = 1  # discarded runs per benchmark and mode before the first repeat

_OSU_LONG = ("-i", "20000", "-x", "2000")  # iterations per size: ~1-3 s a run here
_BY_NAME = {b.name: b for b in LOCAL}


def _longer(name: str, *extra: str, settings: tuple[str, ...] = ()) -> Benchmark:
    benchmark = _BY_NAME[name]
    return replace(benchmark, argv=benchmark.argv + extra, settings=settings or benchmark.settings)


#: the headline's benchmarks (the issue's list): OSU latency, bandwidth, allreduce and
#: allgather with 20000 iterations per size, mpiBench, NetCDF-Bench, benchio, and MOM6 over
#: a quarter day (24 steps) so that its main loop is most of its run
BENCHMARKS = (
    _longer("osu_latency", *_OSU_LONG),
    _longer("osu_bw", "-i", "1000", "-x", "100"),
    _longer("osu_allreduce", *_OSU_LONG),
    _longer("osu_allgather", *_OSU_LONG),
    _longer("mpibench", "-i", "5000"),
    _BY_NAME["netcdf-bench"],
    _BY_NAME["benchio"],
    _longer("mom6", settings=("DAYMAX=0.25",)),
)


def chosen(names: str | None) -> tuple[Benchmark, ...]:
    """The benchmarks `names` (--benchmarks: comma-separated; None: all), checked."""
    if not names:
        return BENCHMARKS
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = [b.name for b in BENCHMARKS]
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        raise ClimstackError(
            f"--benchmarks {names!r}: " + (f"unknown {', '.join(unknown)}" if unknown else "none"),
            fix=f"comma-separated, from {','.join(known)}",
        )
    return tuple(b for b in BENCHMARKS if b.name in wanted)


__all__ = ["BENCHMARKS", "MODES", "OSU", "chosen"]
