"""Run the local environment's benchmarks on this machine: the run matrix
(climstack.bench.run.matrix: every benchmark in every mode, repeat after repeat, the mode order
rotated per repeat), each run's raw output kept after a header line saying what it was and
where and when it ran (climstack.bench.results.collect writes and reads it). A model's case runs in
a run directory of its own per mode and repeat, and each is compared bit for bit with
native's of the same repeat; the comparisons go to raw/<model>.bitwise.out as `bitwise`
header lines, which the report reads as it reads a centre job's."""

import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from climstack.bench.model import bitwise, cases
from climstack.bench.run import catalogue, matrix
from climstack.bench.results.headers import BITWISE, FAILED, HEADER, header
from climstack.bench.run.modes import Mode
from climstack.bench.results.records import DIFFERS, IDENTICAL
from climstack.bench.results.records import FAILED as CHECK_FAILED
from climstack.common import process
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
    output: str | None = None  # its output format, when not its name (formats.FORMATS)
    modes: tuple[str, ...] = ()  # the only modes it runs in (none named: every mode)
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written where it starts
    hung_after: int | None = None  # seconds before a run counts as hung (None: the batch's)

    @property
    def family(self) -> str:
        """What the report groups it by: the output format's name (collect.formats), a
        model's own name (its rows are named by the model)."""
        return self.output or ("osu" if self.name.startswith("osu_") else self.name)

    def runs_in(self, mode: str) -> bool:
        """Whether it runs in the catalogue's `mode`: one binding host I/O libraries only
        if it uses NetCDF, and only the modes it names, if it names any."""
        row = catalogue.get(mode)
        if self.modes and mode not in self.modes:
            return False
        if row.only:
            return self.name in row.only
        return self.netcdf or not row.io_only


#: the array each rank writes in the comparison of I/O layers (doubles): 16 MiB
IO_LAYERS_ARRAY = ("128", "128", "128")
#: its runs: ADIOS2's engine (adios2.xml) and benchio's layers; MPI-IO and HDF5 once
IO_LAYERS_RUNS = (("BP4", ("mpiio", "hdf5", "adios")), ("BP5", ("adios",)), ("HDF5", ("adios",)))


def adios2_xml(engine: str) -> str:
    """The adios2.xml that makes benchio's ADIOS2 layer (its IO "Output") write with
    `engine`."""
    return (
        '<?xml version="1.0"?>\n<adios-config>\n  <io name="Output">\n'
        f'    <engine type="{engine}"/>\n  </io>\n</adios-config>\n'
    )


OSU = "libexec/osu-micro-benchmarks/mpi"
SIZES = "1:65536"
#: an OSU run takes seconds; Debian's MPICH 4.0.2 on UCX with UCX_TLS=^cma (rendezvous
#: over TCP: ranks in podman containers of their own) hung in MPI_Finalize in 6 runs of 60
#: after printing every result (docs/bind-runtime.md); bind-cdi's joined ranks in none
OSU_HUNG_AFTER = 60
#: attempts of a run that hangs, in all
HANG_ATTEMPTS = 3
LOCAL = (
    *(
        Benchmark(
            f"osu_{name}",
            "osu-micro-benchmarks",
            (f"{OSU}/{kind}/osu_{name}", "-m", SIZES),
            hung_after=OSU_HUNG_AFTER,
        )
        for kind, names in (
            ("pt2pt", ("latency", "bw", "bibw")),
            ("collective", ("allgather", "bcast", "allreduce", "alltoall")),
        )
        for name in names
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
    # the comparison of I/O layers: one array per rank through MPI-IO and HDF5, then
    # through ADIOS2's BP4, BP5 and HDF5 engines (adios2.xml), in the image only: the host
    # has no ADIOS2 build (environments/local)
    *(
        Benchmark(
            f"benchio-adios2-{engine.lower()}",
            "benchio-adios2",
            ("bin/benchio", *IO_LAYERS_ARRAY, "local", *layers, "striped"),
            workdir="striped",
            output="benchio-adios2",
            modes=("bind", "hybrid"),
            files=(("adios2.xml", adios2_xml(engine)),),
        )
        for engine, layers in IO_LAYERS_RUNS
    ),
    # GFDL's MOM6, ocean-only benchmark case, 180x90 cells, 12 steps (DAYMAX=0.125)
    Benchmark(
        "mom6", "mom6", ("bin/MOM6",), netcdf=True, case="mom6-benchmark",
        settings=("DAYMAX=0.125",),
    ),  # fmt: skip
)


@dataclass(frozen=True)
class Batch:
    """Where and as what the runs ran: every header says it (the report pairs within it)."""

    site: str
    host: str
    job: str  # this `bench local`'s id: its output directory's name

    @classmethod
    def here(cls, out: Path, site: str = "local") -> "Batch":
        return cls(site, socket.gethostname(), Path(out).resolve().name)


def plan(benchmarks: list[Benchmark], modes: list[str], repeats: int) -> list[matrix.Run]:
    """The runs of `benchmarks` in the catalogue's `modes` (those each runs in)."""
    comparisons = [(b.name, [m for m in modes if b.runs_in(m)]) for b in benchmarks]
    return matrix.runs([c for c in comparisons if c[1]], repeats)


def raw_path(out: Path, run: matrix.Run) -> Path:
    return out / "raw" / f"{run.benchmark}.{run.mode}.r{run.repeat}.out"


def run_all(
    benchmarks: list[Benchmark],
    modes: list[Mode],
    out: Path,
    repeats: int,
    ranks: int,
    site: str = "local",
    timeout: int = 600,
    resume: bool = False,
) -> list[Path]:
    """Run the matrix of `benchmarks` x `modes` x `repeats`; returns the raw files.
    `resume`: keep the runs an earlier call left in `out` and run the rest."""
    (out / "raw").mkdir(parents=True, exist_ok=True)
    batch, by_name = Batch.here(out, site), {b.name: b for b in benchmarks}
    mode_of = {m.name: m for m in modes}
    runs, written = plan(benchmarks, list(mode_of), repeats), []
    for done, run in enumerate(runs, start=1):
        path, benchmark = raw_path(out, run), by_name[run.benchmark]
        written.append(path)
        if resume and path.is_file():
            continue
        print(
            f"[{done}/{len(runs)}] {run.benchmark} {run.mode} repeat {run.repeat}"
            f" (place {run.order})",
            file=sys.stderr,
            flush=True,
        )
        fields = {
            "benchmark": benchmark.family, "mode": run.mode, "ranks": ranks, "nodes": 1,
            "runtime": mode_of[run.mode].runtime, "site": batch.site, "host": batch.host,
            "job": batch.job, "start": now(),
            "repeat": run.repeat, "order": run.order,
        }  # fmt: skip
        work = work_dir(out, benchmark, run.mode, run.repeat)
        limit = min(timeout, benchmark.hung_after or timeout)
        text = run_one(benchmark, mode_of[run.mode], work, ranks, limit, fields)
        path.write_text(text if text.startswith(HEADER) else f"{header(fields)}\n{text}")
    written += compare_models(benchmarks, out, batch)
    return written


def compare_models(benchmarks: list[Benchmark], out: Path, batch: Batch) -> list[Path]:
    """Each model run (each raw/<model>.<mode>.r<repeat>.out) against native's of the same
    repeat, bit for bit, as `bitwise` header lines in raw/<model>.bitwise.out (what differs,
    or why it could not compare, below): a run that wrote no outputs is not compared."""
    written = []
    for benchmark in (b for b in benchmarks if b.case):
        runs, lines = work_root(out) / benchmark.name, []
        for raw in sorted((out / "raw").glob(f"{benchmark.name}.*.r*.out")):
            mode, repeat = raw.name.removeprefix(f"{benchmark.name}.")[:-4].rsplit(".r", 1)
            if mode == "native" or not repeat.isdigit():
                continue
            verdict, detail = check(runs / f"native.r{repeat}", runs / f"{mode}.r{repeat}")
            fields = {
                "benchmark": benchmark.family, "mode": mode, "site": batch.site,
                "host": batch.host, "job": batch.job, "repeat": repeat, "verdict": verdict,
            }  # fmt: skip
            lines += [header(fields, BITWISE), *detail]
        if lines:
            path = out / "raw" / f"{benchmark.name}.bitwise.out"
            path.write_text("\n".join(lines) + "\n")
            written.append(path)
    return written


def check(native: Path, run: Path) -> tuple[str, list[str]]:
    """(verdict, detail lines) of `run` against `native`, bit for bit; either without the
    record of a finished run (it failed, or never ran) is not compared."""
    for side, name in ((native, "no native run to compare with"), (run, "the run failed")):
        if not (side / cases.RECORD).is_file():
            return CHECK_FAILED, [f"{name}: no outputs in {side} (no {cases.RECORD})"]
    try:
        comparison = bitwise.compare(native, run)
    except ClimstackError as err:  # an output that does not read
        return CHECK_FAILED, err.message.splitlines()[:5]
    if comparison.identical:
        return IDENTICAL, [f"{len(comparison.compared)} outputs and variables compared"]
    return DIFFERS, [str(d) for d in comparison.differences[:5]]


def work_root(out: Path) -> Path:
    """Where each benchmark runs, in its own directory (the files it writes)."""
    return out / "work"


def work_dir(out: Path, benchmark: Benchmark, mode: str, repeat: int) -> Path:
    """Where one run starts: its benchmark's directory; a model's case, a fresh run
    directory per mode and repeat."""
    work = work_root(out) / benchmark.name
    return work / f"{mode}.r{repeat}" if benchmark.case else work


def run_one(benchmark, mode, work, ranks, timeout, fields) -> str:
    """One run of `benchmark` in `mode`, in `work`: its output, or its failure's header
    line (`fields`: the header's). A run that hangs is stopped at `timeout` and run again
    (again_if_hung)."""

    def failed(reason: str) -> str:  # one line, whatever output the reason quotes
        return header({**fields, "reason": reason}, FAILED) + "\n"

    if mode.unavailable:
        return failed(mode.unavailable)
    try:
        program = [mode.locate(benchmark)]
    except LookupError as why:
        return failed(str(why))
    program += [arg.format(ranks=ranks) for arg in benchmark.argv[1:]]
    if benchmark.case:
        return _run_case(benchmark, mode, program[0], work, timeout, fields, failed)
    (work / (benchmark.workdir or "")).mkdir(parents=True, exist_ok=True)
    for name, text in benchmark.files:
        (work / name).write_text(text)
    what, argv = f"{benchmark.name} ({mode.name})", mode.wrap(program, cwd=str(work))
    try:
        start, proc = again_if_hung(
            lambda: (
                time.monotonic(),
                process.run(argv, what, cwd=work, timeout=timeout, env=mode.env, check=False),
            ),
            fields,
            mode.stop,
        )
    except ClimstackError as err:  # not found, or hung at every attempt
        return failed(err.message[:300])
    if proc.returncode:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        return failed(
            f"exit {proc.returncode} after {time.monotonic() - start:.1f} s: {last[:300]}"
        )
    return proc.stdout


def _run_case(benchmark, mode, program, work, timeout, fields, failed) -> str:
    """A model's case in a fresh run directory (`work`); its output, or the failure line."""
    case = cases.get(benchmark.case)
    settings = cases.parse_settings(list(benchmark.settings))

    def attempt():
        shutil.rmtree(work, ignore_errors=True)  # an earlier run's directory, or a hung one's
        cases.run(
            case, work, program, lambda argv: mode.wrap(argv, cwd=str(work.resolve())),
            settings, env=mode.env, timeout=timeout,
        )  # fmt: skip

    try:
        again_if_hung(attempt, fields, mode.stop)
    except ClimstackError as err:
        return failed(err.message.strip().splitlines()[0][:300])
    return (work / cases.STDOUT).read_text()


def again_if_hung(attempt, fields: dict, stop=None):
    """`attempt()`, run again while it hangs (process.TimedOut), HANG_ATTEMPTS times in
    all: a hang of the runtime or of a host MPI's teardown (OSU_HUNG_AFTER) costs one
    timeout, not the batch. After each hang `stop()` (a mode's: podman's containers and
    conmon, which outlive the killed process group) removes what it left; the next attempt
    starts at once, so the run keeps its place in the rotated order (the next run of the
    matrix waits for it). `fields["hung"]` and stderr
    say how many attempts were stopped and how the last ended, `fields["attempt"]` which
    attempt's output is kept (the one timed) and `fields["start"]` when it started; the
    last attempt's hang is the run's failure."""
    for tried in range(1, HANG_ATTEMPTS + 1):
        try:
            result = attempt()
        except process.TimedOut as hung:
            fields["hung"] = f"{tried} of {HANG_ATTEMPTS} attempts: {hung.message}"
            if stop:
                stop()
            if tried == HANG_ATTEMPTS:
                raise
            stopped = hung.message.splitlines()[0].split("; its last output")[0]
            print(f"    ... {stopped}; running it again", file=sys.stderr, flush=True)
            fields |= {"attempt": tried + 1} | ({"start": now()} if "start" in fields else {})
            continue
        return result


def now() -> str:
    """A header's `start=`: the time, UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
