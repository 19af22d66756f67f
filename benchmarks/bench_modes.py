"""Print the comparison's figures from the precise profile: `climstack bench local
--precise` on 2 ranks (pinned, a discarded warm-up per benchmark and mode, the modes back to
back per benchmark in a rotated order, repeated until every headline interval is narrower
than 4% or the cap), then its page: bind, hybrid and fabric against native with each
verdict and interval, the control's known 5% found or not, the A/A control's claims and
what the stopping rule does to them, the pinning and the load, the run time; the numbers
are the report's own (climstack.bench.precise.summary, climstack.bench.report.stats).

Run: `.venv/bin/python benchmarks/bench_modes.py [CAP]` (default 15; about 45 min on 2
cores), or `--from DIR` to print the page of a report directory it wrote.
"""

import argparse
import subprocess
import sys
from pathlib import Path

from climstack.bench.precise import profile
from climstack.common import process
from climstack.pins import PROJECT_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cap", nargs="?", type=int, default=profile.CAP)
    parser.add_argument("--from", dest="source", type=Path, help="a --precise report dir")
    args = parser.parse_args()
    if args.source:
        print((args.source / "precise.md").read_text())
        return
    # its report directory goes to the cache; the command prints its path and the page
    subprocess.run(
        [PROJECT_ROOT / "bin" / "climstack", "bench", "local", "--precise"]
        + ["--repeats", str(args.cap)],
        check=False,  # 1: a model run differs; the page says which
    )


if __name__ == "__main__":
    sys.exit(process.script(main))
