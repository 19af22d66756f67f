"""Raw output files (ours, or a directory of Slurm .out files copied back from a centre)
into records. Each run in a file starts with a header line the runner and the emitted job
scripts print, e.g.

    climstack-bench: benchmark=osu mode=bind ranks=128 nodes=1 runtime=apptainer \
        site=archer2 repeat=2   (one line)
    climstack-bench: failed benchmark=osu mode=fabric reason="..."

A file without one is read as a single run whose context is unknown (mode `unknown`)."""

import shlex
from pathlib import Path

from climstack.bench import formats
from climstack.bench.records import Failure, Problem, Record
from climstack.errors import ClimstackError

HEADER = "climstack-bench:"
DEFAULTS = {"mode": "unknown", "runtime": "none", "site": "unknown", "nodes": "1", "repeat": "1"}
SUFFIXES = (".out", ".txt", ".log")


def _header(text: str) -> dict[str, str]:
    words = shlex.split(text.split(HEADER, 1)[1])
    context = dict(word.split("=", 1) for word in words if "=" in word)
    if "failed" in words:
        context["failed"] = "yes"
    return context


def _runs(lines: list[str]) -> list[tuple[dict, list[tuple[int, str]]]]:
    runs, context, body = [], {}, []
    for number, text in enumerate(lines, 1):
        if text.startswith(HEADER):
            if body or context:
                runs.append((context, body))
            context, body = _header(text), []
        else:
            body.append((number, text))
    runs.append((context, body))
    return [(c, b) for c, b in runs if c or any(t.strip() for _, t in b)]


def read_file(path: Path) -> tuple[list[Record], list[Failure], list[Problem]]:
    records, failures, problems = [], [], []
    text = path.read_text(errors="replace")
    for context, body in _runs(text.splitlines()):
        if context.get("failed"):
            failures.append(
                Failure(context.get("benchmark", "?"), context.get("mode", "?"), context["reason"])
            )
            continue
        name = formats.detect(body)
        if name is None:
            raise ClimstackError(
                f"{path}: line {body[0][0] if body else 1}: output of an unknown format",
                fix="give raw output of one of: " + ", ".join(formats.FORMATS),
            )
        run = {**DEFAULTS, **context}
        bad = [key for key in ("ranks", "nodes", "repeat") if not run.get(key, "0").isdigit()]
        if bad:
            line = body[0][0] - 1 if body else 1
            problems.append(
                Problem(
                    str(path), line, f"header {bad[0]}={run[bad[0]]!r} is no count; run left out"
                )
            )
            continue

        def warn(line: int, message: str, path=path):
            problems.append(Problem(str(path), line, message + "; left out"))

        found = list(formats.FORMATS[name][1](body, warn))
        if not found:
            last = body[-1][0] if body else 1
            problems.append(
                Problem(str(path), last, f"{name} output with no results (truncated?); left out")
            )
        for m in found:
            records.append(
                Record(
                    benchmark=name,
                    operation=m.operation,
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
                )
            )
    return records, failures, problems


def read_paths(paths: list[Path]) -> tuple[list[Record], list[Failure], list[Problem]]:
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
    records, failures, problems = [], [], []
    for path in files:
        found = read_file(path)
        records += found[0]
        failures += found[1]
        problems += found[2]
    return records, failures, problems
