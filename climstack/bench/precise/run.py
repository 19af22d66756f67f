"""The precise profile's runs: the machine quiet, the shims built, one discarded warm-up
run per benchmark and mode, then repeat after repeat, each benchmark's modes back to back
in an order rotated per repeat (so drift of the machine hits a mode and native alike), the
load and each rank's CPUs recorded in each run's header; a benchmark stops by the
stopping rule (climstack.bench.precise.stopping) on its own headline after each repeat."""

import functools
import sys
from dataclasses import replace
from pathlib import Path

from climstack.bench.precise import profile, quiet, shims, startup, stopping
from climstack.bench.report import headline
from climstack.bench.results import collect
from climstack.bench.results.headers import HEADER, header
from climstack.bench.run import matrix, runner
from climstack.bench.run.modes import Mode

#: how long to wait for a quiet machine: before the first run, and before each
WAIT_START_S, WAIT_RUN_S = 600, 120


def _one(benchmark, mode, out: Path, ranks, libraries, fields, raw: Path) -> dict:
    """Run it once into `raw`, the load and pinning in its header; the header's fields."""
    log = runner.work_root(out) / "affinity" / raw.stem
    log.mkdir(parents=True, exist_ok=True)
    load = quiet.wait_until_quiet(WAIT_RUN_S)
    work = runner.work_dir(out, benchmark, mode.name, fields["repeat"])
    fields = {**fields, **load.fields(), "start": runner.now()}
    shimmed = shims.shimmed(mode, libraries, log, profile.clock_share(mode.name))
    text = runner.run_one(benchmark, shimmed, work, ranks, 900, fields)
    cpus = shims.read_affinity(log)
    fields["cpus"] = ";".join(f"{r}:{c}" for r, c in sorted(cpus.items())) or "unknown"
    fields["pinned"] = "yes" if shims.pinned(cpus, ranks) else "no"
    if text.startswith(HEADER):  # a failure: its header line, the pinning added
        first, rest = text.split(" reason=", 1)
        text = f"{header(fields, 'failed')} reason={rest}"
    else:
        text = f"{header(fields)}\n{text}"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(text)
    return fields


def _rows(out: Path, benchmark) -> list[headline.Row]:
    found = collect.read_paths(sorted((out / "raw").glob(f"{benchmark.name}.*.r*.out")))
    return headline.rows(found[0], found[1])


def finished(out: Path, benchmarks, repeat: int, rule: stopping.Rule) -> list:
    """The `benchmarks` that stop after `repeat` repeats: the stopping rule on the headline
    of each one's runs so far in out/raw."""
    return [b for b in benchmarks if stopping.stop(_rows(out, b), repeat, rule)]


def run(benchmarks, modes: list[Mode], out: Path, ranks: int, rule: stopping.Rule) -> dict:
    """The profile into `out` (raw/, warmup/, work/): {benchmark: repeats it ran}."""
    quiet.wait_until_quiet(WAIT_START_S, before_start=True)
    libraries = shims.build(runner.work_root(out) / "shims")
    batch = runner.Batch.here(out)
    names = [m.name for m in modes]
    # each program verified once per mode (`verify`, the image's ld.so), not before each run
    mode_of = {m.name: replace(m, locate=functools.cache(m.locate)) for m in modes}
    of = {b.name: [n for n in names if b.runs_in(n)] for b in benchmarks}
    base = {"ranks": ranks, "nodes": 1, "site": batch.site, "host": batch.host, "job": batch.job}

    def one(benchmark, name, repeat, order, raw):
        fields = {**base, "benchmark": benchmark.family, "mode": name, "repeat": repeat,
                  "order": order, "runtime": mode_of[name].runtime}  # fmt: skip
        return _one(benchmark, mode_of[name], out, ranks, libraries, fields, raw)

    total = sum(len(of[b.name]) for b in benchmarks)
    for benchmark in benchmarks:
        for warm in range(1, profile.WARMUPS + 1):
            for name in of[benchmark.name]:
                _say(f"warm-up: {benchmark.name} {name}")
                one(benchmark, name, warm, 0, out / "warmup" / f"{benchmark.name}.{name}.out")
    startup.measure(mode_of, out, ranks, libraries, repeat=0)  # its warm-up
    left, repeats = list(benchmarks), {}
    for repeat in range(1, rule.cap + 1):
        _say(f"repeat {repeat} (cap {rule.cap}): {len(left)} benchmark(s), {total} runs at most")
        startup.measure(mode_of, out, ranks, libraries, repeat)
        for benchmark in left:
            order = matrix.rotated(of[benchmark.name], repeat)
            for place, name in enumerate(order, start=1):
                run_ = matrix.Run(benchmark.name, name, repeat, place)
                one(benchmark, name, repeat, place, runner.raw_path(out, run_))
            repeats[benchmark.name] = repeat
        done = finished(out, left, repeat, rule)
        for b in done:
            _say(f"{b.name}: stops after {repeat} repeats")
        left = [b for b in left if b not in done]
        if not left:
            break
    runner.compare_models(list(benchmarks), out, batch)
    return repeats


def _say(line: str) -> None:
    print(f"climstack bench --precise: {line}", file=sys.stderr, flush=True)
