"""Run the local environment's benchmarks on this machine: every benchmark in every mode,
repeat after repeat (A B A B ...), each run's raw output kept with a header line saying
what it was (climstack.bench.collect reads them back). A model's case runs in a run
directory of its own per mode and repeat, compared bit for bit with native's of the same
repeat (BITWISE)."""

import json
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from climstack.bench import bitwise, cases
from climstack.bench.collect import HEADER
from climstack.bench.modes import Mode
from climstack.bench.records import BITWISE, IDENTICAL
from climstack.common import atomic, process
from climstack.errors import ClimstackError


@dataclass(frozen=True)
class Benchmark:
    name: str  # file name stem
    package: str
    argv: tuple[str, ...]  # program relative to the package prefix, then its arguments
    workdir: str | None = None  # a subdirectory the program needs in its working directory
    netcdf: bool = False  # uses NetCDF: also runs in the modes that bind the host's
    case: str | None = None  # a model's case (cases/<name>), run in a fresh run directory
    settings: tuple[str, ...] = ()  # the case's overrides, KEY=VALUE

    @property
    def family(self) -> str:
        """The output format's name (collect.formats), which the report groups by."""
        if self.case:
            return "fms-clocks"
        return "osu" if self.name.startswith("osu_") else self.name


OSU = "libexec/osu-micro-benchmarks/mpi"
SIZES = "1:65536"
LOCAL = (
    Benchmark("osu_latency", "osu-micro-benchmarks", (f"{OSU}/pt2pt/osu_latency", "-m", SIZES)),
    Benchmark("osu_bw", "osu-micro-benchmarks", (f"{OSU}/pt2pt/osu_bw", "-m", SIZES)),
    Benchmark("osu_bibw", "osu-micro-benchmarks", (f"{OSU}/pt2pt/osu_bibw", "-m", SIZES)),
    *(
        Benchmark(f"osu_{op}", "osu-micro-benchmarks", (f"{OSU}/collective/osu_{op}", "-m", SIZES))
        for op in ("allgather", "bcast", "allreduce", "alltoall")
    ),
    Benchmark(
        "mpibench", "mpibench", ("bin/mpiBench", "-e", "64K", "Bcast", "Allreduce", "Alltoall")
    ),
    Benchmark(
        "netcdf-bench",
        "netcdf-bench",
        ("bin/benchtool", "-n=1", "-p={ranks}", "-w", "-r", "-d=8:128:128:32", "-f=bench.nc"),
        netcdf=True,
    ),
    Benchmark("benchio", "benchio", ("bin/benchio.x",), workdir="benchio_files", netcdf=True),
    # GFDL's MOM6, ocean-only benchmark case, 180x90 cells, 12 steps (DAYMAX=0.125)
    Benchmark(
        "mom6", "mom6", ("bin/MOM6",), netcdf=True, case="mom6-benchmark",
        settings=("DAYMAX=0.125",),
    ),  # fmt: skip
)


def run_all(
    benchmarks: list[Benchmark],
    modes: list[Mode],
    out: Path,
    repeats: int,
    ranks: int,
    site: str = "local",
    timeout: int = 600,
) -> list[Path]:
    """Run each benchmark in each mode `repeats` times, alternating; returns the raw files."""
    raw, written = out / "raw", []
    raw.mkdir(parents=True, exist_ok=True)
    runs = [(b, [m for m in modes if b.netcdf or not m.netcdf_only]) for b in benchmarks]
    total, done = repeats * sum(len(of) for _, of in runs), 0
    for repeat in range(1, repeats + 1):
        for benchmark, its_modes in runs:
            for mode in its_modes:  # modes alternate within a repeat: A B A B
                done += 1
                path = raw / f"{benchmark.name}.{mode.name}.r{repeat}.out"
                header = (
                    f"{HEADER} benchmark={benchmark.family} mode={mode.name} ranks={ranks} "
                    f"nodes=1 runtime={mode.runtime} site={site} repeat={repeat}"
                )
                print(
                    f"[{done}/{total}] {benchmark.name} {mode.name} repeat {repeat}",
                    file=sys.stderr,
                    flush=True,
                )
                work = work_root(out) / benchmark.name
                if benchmark.case:  # a fresh run directory per run
                    work = work / f"{mode.name}.r{repeat}"
                text = _run_one(benchmark, mode, work, ranks, timeout)
                path.write_text(text if text.startswith(HEADER) else f"{header}\n{text}")
                written.append(path)
    compare_models(benchmarks, out)
    return written


def compare_models(benchmarks: list[Benchmark], out: Path) -> dict:
    """Each model run against native's of the same repeat, bit for bit, into BITWISE:
    {benchmark: {mode: {repeat: "bit-identical" or the differences}}}."""
    found = {}
    for benchmark in (b for b in benchmarks if b.case):
        runs = work_root(out) / benchmark.name
        for run in sorted(runs.glob("*.r*")):
            mode, repeat = run.name.rsplit(".r", 1)
            native = runs / f"native.r{repeat}"
            if mode == "native" or not (run / cases.RECORD).is_file():
                continue
            if not (native / cases.RECORD).is_file():
                outcome = "no native run to compare with"
            else:
                comparison = bitwise.compare(native, run)
                outcome = (
                    IDENTICAL
                    if comparison.identical
                    else "; ".join(str(d) for d in comparison.differences[:3])
                )
            found.setdefault(benchmark.family, {}).setdefault(mode, {})[repeat] = outcome
    atomic.write_text(out / BITWISE, json.dumps(found, indent=2) + "\n")
    return found


def work_root(out: Path) -> Path:
    """Where each benchmark runs, in its own directory (the files it writes)."""
    return out / "work"


def _run_one(benchmark, mode, work, ranks, timeout) -> str:
    failed = f"{HEADER} failed benchmark={benchmark.family} mode={mode.name} reason="
    if mode.unavailable:
        return failed + shlex.quote(mode.unavailable) + "\n"
    try:
        program = [mode.locate(benchmark)]
    except LookupError as why:
        return failed + shlex.quote(str(why)) + "\n"
    program += [arg.format(ranks=ranks) for arg in benchmark.argv[1:]]
    if benchmark.case:
        return _run_case(benchmark, mode, program[0], work, timeout, failed)
    (work / (benchmark.workdir or "")).mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        what = f"{benchmark.name} ({mode.name})"
        proc = process.run(
            mode.wrap(program, cwd=str(work)),
            what,
            cwd=work,
            timeout=timeout,
            env=mode.env,
            check=False,
        )
    except ClimstackError as err:  # not found, or no result within the timeout
        return failed + shlex.quote(err.message[:300]) + "\n"
    if proc.returncode:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        reason = f"exit {proc.returncode} after {time.monotonic() - start:.1f} s: {last[:300]}"
        return failed + shlex.quote(reason) + "\n"
    return proc.stdout


def _run_case(benchmark, mode, program, work, timeout, failed) -> str:
    """A model's case in a fresh run directory (`work`); its output, or the failure line."""
    case = cases.get(benchmark.case)
    settings = cases.parse_settings(list(benchmark.settings))
    shutil.rmtree(work, ignore_errors=True)  # a run directory of an earlier `bench local`
    try:
        cases.run(
            case, work, program, lambda argv: mode.wrap(argv, cwd=str(work.resolve())),
            settings, env=mode.env, timeout=timeout,
        )  # fmt: skip
    except ClimstackError as err:
        return failed + shlex.quote(err.message.strip().splitlines()[0][:300]) + "\n"
    return (work / cases.STDOUT).read_text()
