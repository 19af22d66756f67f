"""Print the MPI-5 standard ABI matrix: `climstack bench abi` with every OSU benchmark of
the lane (latency, bandwidth, allreduce, allgather, alltoall) on 2 ranks, REPEATS repeats
(the order of hosts and of image/native rotated per repeat): the image's time ratio to each
host MPI's native build, with its 95% interval, and NetCDF-Bench's data compared across
the three hosts' runs; then MOM6 through mpif on each host (MPICH 5.0.2, Intel MPI 2021.18
and 2021.19, Open MPI 6): the preflights, main-loop medians, outputs bit for bit.

Run: `.venv/bin/python benchmarks/abi_matrix.py [REPEATS]` (default 5).
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from climstack.bench.abi import abi
from climstack.common import process
from climstack.pins import PROJECT_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "abi"
        command = [PROJECT_ROOT / "bin" / "climstack", "bench", "abi", "--out", out]
        command += ["--repeats", str(args.repeats), "--benchmarks", ",".join(abi.OSU)]
        sys.exit(subprocess.run(command).returncode)


if __name__ == "__main__":
    sys.exit(process.script(main))
