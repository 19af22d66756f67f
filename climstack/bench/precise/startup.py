"""Where the time goes before a benchmark starts, per mode, measured apart from it: the
wall time of launching /bin/true on the ranks through the mode (the launcher, and the
container's start-up where there is one), and MPI_Init's time as osu_init prints it. Each
repeat measures every mode once, in the repeat's rotated order, into
raw/startup.<mode>.r<repeat>.out (the report reads them as the `startup` format)."""

import time
from pathlib import Path

from climstack.bench.precise import profile, quiet, shims
from climstack.bench.results.headers import header
from climstack.bench.run import matrix, runner
from climstack.common import process
from climstack.errors import ClimstackError

OSU_INIT = runner.Benchmark(
    "osu_init", "osu-micro-benchmarks", (f"{runner.OSU}/startup/osu_init",)
)
BANNER = "# climstack start-up"


def _timed(mode, argv, what) -> tuple[float, str]:
    start = time.monotonic()
    proc = process.run(mode.wrap(argv), what, env=mode.env, timeout=120)
    return time.monotonic() - start, proc.stdout


def init_ms(text: str) -> str | None:
    """osu_init's average MPI_Init time, as printed ("nprocs: 2, ..., avg: 39 ms")."""
    for line in text.splitlines():
        if line.startswith("nprocs:") and "avg:" in line:
            return line.split("avg:")[1].split()[0]
    return None


def measure(mode_of: dict, out: Path, ranks: int, libraries: dict, repeat: int) -> None:
    """Every mode's start-up, once (repeat 0: a warm-up, into warmup/)."""
    batch = runner.Batch.here(out)
    for order, name in enumerate(matrix.rotated(list(mode_of), max(repeat, 1)), start=1):
        mode, log = mode_of[name], runner.work_root(out) / "affinity" / f"startup.{name}"
        log.mkdir(parents=True, exist_ok=True)
        shimmed = shims.shimmed(mode, libraries, log, profile.clock_share(name))
        fields = {
            "benchmark": "startup", "mode": name, "ranks": ranks, "nodes": 1,
            "runtime": mode.runtime, "site": batch.site, "host": batch.host, "job": batch.job,
            "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "repeat": repeat,
            "order": order, **quiet.wait_until_quiet(120).fields(),
        }  # fmt: skip
        try:
            launch, _ = _timed(shimmed, ["/bin/true"], f"/bin/true ({name})")
            text = _timed(shimmed, [mode.locate(OSU_INIT)], f"osu_init ({name})")[1]
            body = [BANNER, f"launch {launch:.3f} s"]
            body += [f"MPI_Init {ms} ms"] if (ms := init_ms(text)) else []
            text = header(fields) + "\n" + "\n".join(body) + "\n"
        except (ClimstackError, LookupError) as err:
            why = " ".join(getattr(err, "message", str(err)).split())[:300]  # with its stderr
            text = header({**fields, "reason": why}, "failed") + "\n"
        where = out / "warmup" if repeat == 0 else out / "raw"
        where.mkdir(parents=True, exist_ok=True)
        (where / f"startup.{name}.r{repeat}.out").write_text(text)
