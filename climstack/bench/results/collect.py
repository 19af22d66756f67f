"""Raw output files (ours, a directory of Slurm .out files copied back from a centre, or
outputs others published) into records. Each run in a file starts with a header line
(climstack.bench.results.headers) the runner and the emitted job scripts print. A run at a Lustre
stripe setting (benchio's sweep) says `stripe_count=4 stripe_size=1M`: its operations are
named with it (`MPI-IO (lfs -c 4 -S 1M)`), so the report compares the modes per setting.

Two runs that would share (batch, benchmark, mode, repeat) are not merged: the later one is
left out, named with the fix, whether in two files or in one (a requeued Slurm job appends
its second attempt to its .out). A value that is no positive finite number (0, nan, inf)
is left out the same way (climstack.bench.results.parsing). A file without a header line is a
single run whose context comes from its sidecar `FILE.yaml` (`mode: native`, and any other
header key) or from `--label FILE=MODE`; a header line wins over both, a label over the
sidecar. What cannot be read (an unknown format, no mode, a garbled line) is left out with
a Problem naming the file, the line and the fix."""

import re
from collections import Counter, defaultdict
from dataclasses import replace
from fnmatch import fnmatch
from pathlib import Path

import yaml

from climstack.bench.results import formats
from climstack.bench.results.headers import (
    BITWISE,
    COUNTS,
    DEFAULTS,
    FAILED,
    HEADER,
    KEYS,
    STRIPE,
    count,
    hung,
    split_runs,
)
from climstack.bench.results.records import BitCheck, Failure, Problem, Record
from climstack.errors import ClimstackError

SUFFIXES = (".out", ".txt", ".log")
SIDECAR = ".yaml"  # slurm-1.out.yaml describes slurm-1.out
MODE_NAME = re.compile(r"[\w.+-]+")
#: operations a file name can name, for a table pasted without its title line
NAMED_OPERATIONS = {
    "latency", "bw", "bibw", "multi_lat", "mbw_mr", "allgather", "allgatherv", "allreduce",
    "alltoall", "alltoallv", "barrier", "bcast", "gather", "gatherv", "reduce", "scatter",
    "scatterv", "reduce_scatter", "PingPong", "PingPing", "Sendrecv", "Exchange",
}  # fmt: skip


class LeftOut(Exception):
    """A run or file that cannot be read: where, why and the fix."""

    def __init__(self, line: int, message: str, fix: str = ""):
        super().__init__(message)
        self.line, self.message, self.fix = line, message, fix


def sidecar(path: Path) -> dict[str, str]:
    """What `path`'s sidecar FILE.yaml says about its run; {} without one."""
    side = path.with_name(path.name + SIDECAR)
    if not side.is_file():
        return {}
    example = "mode: native\nbenchmark: mpibench\nranks: 128"
    try:
        data = yaml.safe_load(side.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        line = getattr(getattr(err, "problem_mark", None), "line", 0) + 1
        raise LeftOut(line, f"sidecar {side.name} does not read: {err}", fix=example) from None
    if not isinstance(data, dict) or set(map(str, data)) - set(KEYS + STRIPE):
        extra = sorted(set(map(str, data)) - set(KEYS + STRIPE)) if isinstance(data, dict) else []
        raise LeftOut(
            1,
            f"sidecar {side.name}: "
            + (f"unknown key(s) {', '.join(extra)}" if extra else "no map"),
            fix=f"a YAML map of {', '.join(KEYS)}, e.g. " + example.replace("\n", ", "),
        )
    if "benchmark" in data and formats.format_of(data["benchmark"]) not in formats.FORMATS:
        raise LeftOut(
            1,
            f"sidecar {side.name}: benchmark {data['benchmark']!r} is no format known",
            fix="one of " + ", ".join([*formats.FORMATS, *formats.MODELS]),
        )
    return {str(key): str(value) for key, value in data.items()}


def _operation(path: Path, run: dict) -> str:
    """The operation of a table without a title: the sidecar's, or one the file name says."""
    if run.get("operation"):
        return run["operation"]
    words = re.split(r"[^A-Za-z0-9]+", path.name.split(".")[0].removeprefix("osu_"))
    words.append(path.name.split(".")[0].removeprefix("osu_"))
    return next((w for w in reversed(words) if w in NAMED_OPERATIONS), "unknown")


def _stripe(run: dict) -> str:
    """' (lfs -c 4 -S 1M)' for a run at a Lustre stripe setting, '' for any other."""
    if not any(run.get(key) for key in STRIPE):
        return ""
    return f" (lfs -c {run.get('stripe_count', '?')} -S {run.get('stripe_size', '?')})"


def _check(path: Path, run: dict, body, name: str | None) -> None:
    """A run the report can use, or LeftOut with the fix."""
    first = body[0][0] if body else 1
    at = max(first - 1, 1)  # the header line, if any, is just before the body
    if name is None:
        raise LeftOut(
            first,
            "output of an unknown format, left out",
            fix="give the raw output (or a pasted table) of one of: " + formats.known(),
        )
    if "mode" not in run:
        raise LeftOut(
            first,
            f"{name} output with no mode (no `{HEADER}` header line), left out",
            fix=f"a sidecar {path.name}{SIDECAR} saying `mode: native` (or bind, hybrid, ...), "
            f"or --label {path.name}=MODE",
        )
    if not MODE_NAME.fullmatch(run["mode"]):
        raise LeftOut(at, f"mode {run['mode']!r} is no mode name; run left out")
    bad = [key for key in COUNTS if not run.get(key, "0").isdigit()]
    if bad:
        raise LeftOut(at, f"header {bad[0]}={run[bad[0]]!r} is no count; run left out")


def _read_run(path: Path, run: dict, body, problems: list, repeats: Counter) -> list[Record]:
    name = formats.detect(body)
    if name is None and formats.format_of(run.get("benchmark", "")) in formats.FORMATS:
        name = formats.format_of(run["benchmark"])  # no banner, no data line: the header says
    _check(path, run, body, name)
    # a model's rows are named by the model (mom6), not by the format of its clock table
    model = run.get("benchmark") if formats.format_of(run.get("benchmark", "")) == name else None

    def warn(line: int, message: str):
        fix = "restore the line as the program printed it (a value the run could not measure: "
        fix += "run it again), or delete the line"
        problems.append(Problem(str(path), line, message + "; left out", fix))

    found = list(formats.FORMATS[name].parse(body, warn, _operation(path, run)))
    if not found:
        last = body[-1][0] if body else 1
        raise LeftOut(last, f"{name} output with no results (truncated?); left out")
    if "repeat" not in run:  # runs without one count up per benchmark, mode and operations
        key = (name, run["mode"], frozenset(m.operation for m in found))
        repeats[key] += 1
        run = {**run, "repeat": str(repeats[key])}
    return [
        Record(
            benchmark=model or name,
            operation=m.operation + _stripe(run),
            bytes=m.bytes,
            ranks=int(run.get("ranks") or m.ranks or 0),
            nodes=int(run["nodes"]),
            mode=run["mode"],
            runtime=run["runtime"],
            site=run["site"],
            metric=m.metric,
            value=m.value,
            unit=m.unit,
            repeat=int(run["repeat"]),
            host=run["host"],
            job=run["job"],
            start=run.get("start", ""),
            order=int(run.get("order") or 0),
            resolution=m.resolution,
            hung=hung(run),
        )
        for m in found
    ]


def read_file(
    path: Path, label: str | None = None, repeats: Counter | None = None, first=None
) -> tuple[list[Record], list[Failure], list[Problem]]:
    """One output file's records, failed runs and problems; `label`: its mode if no header
    line says one; `first`: where each measurement was read first (`_apart`), across files."""
    records, failures, problems = [], [], []
    repeats = Counter() if repeats is None else repeats
    first = {} if first is None else first
    try:
        text = path.read_text(errors="replace")
        given = {**sidecar(path), **({"mode": label} if label else {})}
    except OSError as err:
        return [], [], [Problem(str(path), 1, f"cannot read: {err.strerror}", "make it readable")]
    except LeftOut as why:
        side = path.with_name(path.name + SIDECAR)
        message = f"{why.message}; {path.name} left out"
        return [], [], [Problem(str(side), why.line, message, why.fix)]
    for context, body in split_runs(text.splitlines()):
        if context.get(BITWISE):
            continue  # a comparison of two runs' outputs: read_checks
        if context.get(FAILED):
            run = {**DEFAULTS, **given, **context}
            failures.append(
                Failure(
                    run.get("benchmark", "?"), run.get("mode", "?"), run.get("reason", "?"),
                    run["site"], run["host"], run["job"], count(run.get("repeat")),
                )  # fmt: skip
            )
            continue
        try:
            found = _read_run(path, {**DEFAULTS, **given, **context}, body, problems, repeats)
        except LeftOut as why:
            problems.append(Problem(str(path), why.line, why.message, why.fix))
            continue
        at = body[0][0] - bool(context) if body else 1  # its header line, or its first
        records += _apart(found, (str(path), at), first, problems)
    return records, failures, problems


def parse_labels(values: list[str]) -> dict[str, str]:
    """--label FILE=MODE options into {FILE: MODE}; FILE may be a glob (`cray-*.txt`)."""
    labels = {}
    for value in values:
        file, _, mode = value.rpartition("=")
        if not file or not MODE_NAME.fullmatch(mode):
            raise ClimstackError(
                f"--label {value}: not FILE=MODE", fix="e.g. --label cray-built.txt=native"
            )
        labels[file] = mode
    return labels


def _label_of(path: Path, labels: dict[str, str]) -> str | None:
    for pattern, mode in labels.items():
        if pattern in (str(path), path.name) or fnmatch(path.name, pattern):
            return mode
        if fnmatch(str(path), pattern) or Path(pattern).resolve() == path.resolve():
            return mode
    return None


def output_files(paths: list[Path]) -> list[Path]:
    """Every output file under `paths` (directories: *.out, *.txt, *.log)."""
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            raise ClimstackError(f"{path}: no such file or directory", fix="give output files")
    if not files:
        raise ClimstackError(
            f"no output files ({', '.join(SUFFIXES)}) under {', '.join(map(str, paths))}",
            fix="copy the jobs' Slurm .out files there",
        )
    return files


def read_paths(
    paths: list[Path], labels: dict[str, str] | None = None
) -> tuple[list[Record], list[Failure], list[Problem]]:
    """Every output file under `paths`; `labels`: {FILE or glob: mode} (--label)."""
    files, labels = output_files(paths), labels or {}
    for pattern in labels:
        if not any(_label_of(path, {pattern: "x"}) for path in files):
            raise ClimstackError(
                f"--label {pattern}={labels[pattern]}: no output file matches {pattern}",
                fix="name one of: " + ", ".join(str(p) for p in files[:10]),
            )
    records, failures, problems, repeats, first = [], [], [], Counter(), {}
    for path in files:
        found = read_file(path, _label_of(path, labels), repeats, first)
        records += found[0]
        failures += found[1]
        problems += found[2]
    return fill_ranks(records), failures, problems


def _apart(records: list[Record], where: tuple, first: dict, problems: list) -> list[Record]:
    """One run's `records` (at `where`: its file and line) less those that would collide
    with a run read before, in another file or earlier in this one (same batch, benchmark,
    mode, repeat and measurement), each collision named once per pair of runs."""
    kept, clashes = [], Counter()
    for r in records:
        key = (r.batch, r.benchmark, r.operation, r.bytes, r.ranks, r.metric, r.mode, r.repeat)
        if first.setdefault(key, where) == where:
            kept.append(r)
        else:
            clashes[(first[key], r.mode, r.repeat, r.batch)] += 1
    for ((other, line), mode, repeat, batch), clashed in clashes.items():
        same = f"site, host and job: {', '.join(batch)}"
        if other == where[0]:
            message = (
                f"{clashed} result(s) of {mode} repeat {repeat} repeat the run at line {line} "
                f"of this file ({same}): two attempts of one run (a requeued Slurm job "
                "appends to its .out); left out, not merged"
            )
            fix = "keep one attempt: delete the other's lines, from its header line on"
        else:
            message = (
                f"{clashed} result(s) of {mode} repeat {repeat} collide with {other}'s ({same})"
                "; left out, not merged"
            )
            fix = "give each job's outputs their own job= (header line) or `job:` (sidecar "
            fix += "FILE.yaml), or report them apart"
        problems.append(Problem(where[0], where[1], message, fix))
    return kept


def read_checks(paths: list[Path]) -> list[BitCheck]:
    """Every model run's bit-for-bit comparison with native's (`bitwise` header lines)
    in the output files under `paths`."""
    checks = []
    for path in output_files(paths):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue  # read_paths names it
        for context, body in split_runs(text.splitlines()):
            if not context.get(BITWISE):
                continue
            run = {**DEFAULTS, **context}
            detail = "; ".join(line.strip() for _, line in body if line.strip())[:500]
            checks.append(
                BitCheck(
                    run.get("benchmark", "?"), run.get("mode", "?"), count(run.get("repeat")),
                    run.get("verdict", FAILED), detail, run["site"], run["host"], run["job"],
                )  # fmt: skip
            )
    return checks


def fill_ranks(records: list[Record]) -> list[Record]:
    """Records of an output that does not say its ranks (0) take those of the benchmark's
    other records of the same operation, when they all agree: a labelled excerpt pairs
    with the runs it is compared to."""
    known = defaultdict(set)
    for r in records:
        if r.ranks:
            known[(r.benchmark, r.operation)].add(r.ranks)
    return [
        (
            replace(r, ranks=next(iter(known[key])))
            if not r.ranks and len(known[key := (r.benchmark, r.operation)]) == 1
            else r
        )
        for r in records
    ]
