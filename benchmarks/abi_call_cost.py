"""Print what mpi_abi_wrapper costs per MPI call, in ns (climstack.bench.abi.call_cost: the
calls a halo exchange makes, in loops on one rank, each host MPI's own build against the
standard-ABI build through the wrapper), with more runs and iterations than `bench abi`
gives it: MPICH 5.0.2's own standard ABI and the four wrapped hosts.

Run: `.venv/bin/python benchmarks/abi_call_cost.py [REPEATS [ITERATIONS]]` (7, 2000000).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from climstack.bench.abi import call_cost
from climstack.common import process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=7)
    parser.add_argument("iterations", nargs="?", type=int, default=2_000_000)
    args = parser.parse_args()
    if args.repeats < 1 or args.iterations < 1:
        parser.error("REPEATS and ITERATIONS: 1 or more")
    with tempfile.TemporaryDirectory() as work:
        record = call_cost.measure(
            list(call_cost.HOSTS), Path(work), args.repeats, args.iterations
        )
    print(f"{args.iterations} iterations per run")
    print(call_cost.table(record))
    return 0


if __name__ == "__main__":
    sys.exit(process.script(main))
