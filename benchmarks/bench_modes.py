"""Print the comparison's figures: `climstack bench local` on 2 ranks, every mode, REPEATS
repeats (the mode order rotated per repeat), then its headline through the report's own
code (climstack.bench.report.headline and stats: per batch, benchmark and operation group, each
mode's verdict, time ratio to native, 95% interval and n; a model's bit-for-bit verdicts),
so that the figures printed here and the report's are one computation.

Run: `.venv/bin/python benchmarks/bench_modes.py [REPEATS]` (default 5), or
`--from DIR` to print the headline of a report directory `bench local` already wrote
(`make local` prints its path).
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from climstack.bench.report import headline, stats
from climstack.bench.results import records
from climstack.common import process
from climstack.pins import PROJECT_ROOT


def show(out: Path) -> None:
    found, failures, checks = records.read(out / "records.json")
    rows = headline.rows(found, failures, checks)
    head, body = headline.table(rows)
    widths = [max(len(str(x)) for x in column) for column in zip(head, *body)]
    for line in [head, *body]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
    print(f"\nmethod: {stats.METHOD}; within {stats.WITHIN:.0%} when the interval lies in 1 ± "
          f"{stats.WITHIN:g}")  # fmt: skip
    for benchmark, mode, reason in sorted({(f.benchmark, f.mode, f.reason) for f in failures}):
        print(f"{benchmark:>12} {mode:<12} not run: {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=5)
    parser.add_argument("--from", dest="source", type=Path, help="a bench local report dir")
    args = parser.parse_args()
    if args.source:
        return show(args.source)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        subprocess.run(
            [PROJECT_ROOT / "bin" / "climstack", "bench", "local", "--repeats", str(args.repeats)]
            + ["--out", out],
            check=False,  # 1: a model run differs; the headline says which
            stdout=subprocess.DEVNULL,
        )
        print(f"\nclimstack bench local: 2 ranks, {args.repeats} repeats, mode order rotated")
        show(out)


if __name__ == "__main__":
    sys.exit(process.script(main))
