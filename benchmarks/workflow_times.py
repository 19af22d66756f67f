"""Print the wall times of the README's two commands, `make local` and `make test`, with
their goals (issue 16): make local warm <= 2 min; make test <= 10 min fresh, <= 4 min warm.

Warm is this machine's cache as it is (run it twice for a warm figure after a change).
With --fresh-cache DIR (an empty directory) both commands first run once on a new cache
there (CLIMSTACK_CACHE=DIR: Spack cloned, everything built), as on a new machine; the
clone URLs must be reachable (CLIMSTACK_SPACK_GIT, ... as for bin/setup). With --record DIR
each `make local` (run under /usr/bin/time -v) is kept as a record there,
make-local-<fresh|warm>.json, which `climstack bench workflow --report` shows (one run, or a
run before a change beside one after: docs/performance.md).

    .venv/bin/python benchmarks/workflow_times.py [--fresh-cache DIR] [--only local|test]
        [--record DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from climstack.common import atomic, process
from climstack.pins import PROJECT_ROOT
from climstack.stack import workflow_times

GOALS = {
    ("local", "fresh"): "printed, no goal",
    ("local", "warm"): "goal <= 2 min",
    ("test", "fresh"): "goal <= 10 min",
    ("test", "warm"): "goal <= 4 min",
}


def timed_make(target: str, environ: dict, record: Path | None = None) -> float:
    """Its wall seconds; `make local`'s own table of each task's start, wall and CPU seconds
    (climstack/workflow.py) printed too, and kept as `record` if given."""
    start = time.monotonic()
    command = ["/usr/bin/time", "-v", "make", target] if record else ["make", target]
    proc = subprocess.run(command, cwd=PROJECT_ROOT, env=environ, capture_output=True)
    seconds = time.monotonic() - start
    if record and proc.returncode == 0:
        text = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
        kind = "empty" if "fresh" in record.name else "warm"
        kept = workflow_times.parse(text, record.stem, kind)
        atomic.write_text(record, json.dumps(kept, indent=1) + "\n")
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout.decode()[-3000:] + proc.stderr.decode()[-3000:])
        raise SystemExit(f"make {target} failed after {seconds:.0f} s")
    lines = proc.stdout.decode().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("task ")), None)
    if first is not None:
        print("\n".join(lines[first:]), flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh-cache", help="an empty directory for a new-machine run first")
    parser.add_argument("--only", choices=("local", "test"))
    parser.add_argument("--record", type=Path, help="keep each make local as a record here")
    args = parser.parse_args()
    targets = [args.only] if args.only else ["local", "test"]
    runs = [("warm", dict(os.environ))]
    if args.fresh_cache:
        runs.insert(0, ("fresh", {**os.environ, "CLIMSTACK_CACHE": args.fresh_cache}))
        runs[1] = ("warm", runs[0][1])
    for kind, environ in runs:
        for target in targets:
            print(f"make {target} ({kind}) ...", flush=True)
            keep = args.record / f"make-local-{kind}.json" if args.record else None
            seconds = timed_make(target, environ, keep if target == "local" else None)
            minutes, rest = divmod(seconds, 60)
            goal = GOALS[target, kind]
            print(f"make {target} ({kind}): {int(minutes)} m {rest:04.1f} s  ({goal})", flush=True)


if __name__ == "__main__":
    sys.exit(process.script(main))
