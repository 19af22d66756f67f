"""The header line before each run's output, written by the local runner and the emitted
job scripts (`header`) and read by climstack.bench.results.collect (`parse`, `split_runs`):

    climstack-bench: benchmark=osu mode=bind ranks=128 nodes=1 runtime=apptainer \
        site=archer2 host=nid001 job=4711 start=2026-11-26T10:00:00Z repeat=2 order=3
    climstack-bench: failed benchmark=osu mode=fabric ... reason="..."
    climstack-bench: bitwise benchmark=mom6 mode=bind ... repeat=1 verdict=bit-identical

site, host and job name the batch of runs a record belongs to (only runs of one batch are
paired); `order` is the run's place in its repeat's rotated mode order
(climstack.bench.run.matrix); a `bitwise` line is a model run compared with native's, what
differs in the lines below it. A run that hung and was run again says `hung="1 of 3
attempts: ..."` (how many attempts were stopped, how the last ended) and `attempt=2` (the
attempt whose output follows: the one timed).
"""

import re
import shlex

HEADER = "climstack-bench:"
DEFAULTS = {
    "runtime": "none",
    "site": "unknown",
    "host": "unknown",
    "job": "unknown",
    "nodes": "1",
}
#: what a header line, a sidecar or a label may say about a run, in the header's order
KEYS = (
    "benchmark", "mode", "ranks", "nodes", "runtime", "site", "host", "job", "start",
    "repeat", "order", "operation",
)  # fmt: skip
STRIPE = ("stripe_count", "stripe_size")  # benchio's Lustre sweep (climstack.bench.run.jobs)
COUNTS = ("ranks", "nodes", "repeat", "order")
PLAIN = re.compile(r"[\w.:+/@$%{}-]+")  # a header value that needs no quotes
FAILED, BITWISE = "failed", "bitwise"  # the words that mark a failed run, a comparison


def header(fields: dict, kind: str = "") -> str:
    """A run's header line: `kind` FAILED or BITWISE or none, then KEY=VALUE in KEYS order
    (then any other key). A value with spaces or quotes is quoted for the shell's words;
    one like `$mode` is left for a job script's shell to expand."""
    order = [k for k in (*KEYS, *STRIPE) if k in fields] + [
        k for k in fields if k not in KEYS + STRIPE
    ]
    words = [HEADER, *([kind] if kind else [])]
    for key in order:
        if fields[key] is not None and fields[key] != "":
            value = " ".join(str(fields[key]).split())  # one line: a reason may hold output
            words.append(f"{key}={value if PLAIN.fullmatch(value) else shlex.quote(value)}")
    return " ".join(words)


def parse(text: str) -> dict[str, str]:
    words = shlex.split(text.split(HEADER, 1)[1])
    context = dict(word.split("=", 1) for word in words if "=" in word)
    for kind in (FAILED, BITWISE):
        if kind in words:
            context[kind] = "yes"
    return context


def split_runs(lines: list[str]) -> list[tuple[dict, list[tuple[int, str]]]]:
    runs, context, body = [], {}, []
    for number, text in enumerate(lines, 1):
        if text.startswith(HEADER):
            if body or context:
                runs.append((context, body))
            context, body = parse(text), []
        else:
            body.append((number, text))
    runs.append((context, body))
    return [(c, b) for c, b in runs if c or any(t.strip() for _, t in b)]


def count(text) -> int:
    return int(text) if str(text or "").isdigit() else 0


def hung(context: dict) -> int:
    """How many attempts of a run were stopped as hung: `hung="N of M attempts: ..."`'s N
    (0: none; an older header without `attempt=` says the same)."""
    first = str(context.get("hung", "")).split(" of ", 1)[0]
    return int(first) if first.isdigit() else 0
