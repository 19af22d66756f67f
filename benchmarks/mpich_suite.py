"""MPICH's whole test suite (`climstack bench suite --tests all`) on the host MPIs that stand
for the centres, in SHARDS shards so that each run fits an hour; the smoke slice on the
other hosts. Lanes (host MPI: routes):
- MPICH 3.4.3, Cray MPICH 8's base: both images, natively and through the bind plan;
- MPICH 4.1.3 (Cray MPICH 9.0's base) and Open MPI 5.0.11, through mpi_abi_wrapper: the
  standard-ABI image and its native baseline;
- MPICH 5.0.2, whose own standard ABI is the native baseline of the rest;
- Debian's MPICH 4.0.2, the one host MPI here with a Fortran side: every Fortran test
  (f77, f90), natively and through the bind plan; and every Fortran test over the standard
  ABI through mpif, on every host of that ABI, natively and in its image.
Each shard's report is kept; then one report of all shards (`bench suite --report`), the
tests that pass natively and fail in the image first. Exit 1 while a lane has a failure
not on the expected lists (climstack/bench/suite/expected.yaml) or a listed test passes.

Run: `.venv/bin/python benchmarks/mpich_suite.py [SHARDS] [--out DIR]` (default 8).
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

from climstack import pins
from climstack.common import process

CLIMSTACK = pins.PROJECT_ROOT / "bin" / "climstack"
#: (hosts, routes) of the whole suite
CENTRES = (
    ("mpich-3.4.3", "native,bind,native-abi,bind-abi"),
    ("mpich-4.1,openmpi-5", "native-abi,bind-abi"),
    ("mpich", "native-abi"),
)
#: the hosts that run the smoke slice only
OTHERS = "debian-mpich,intel-2021.19,openmpi"
#: the hosts of the Fortran slice (the MPI's own mpif77, mpifort and libmpifort)
FORTRAN = "debian-mpich"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shards", nargs="?", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or pins.cache_dir() / "bench" / time.strftime("mpich-suite-%Y%m%d-%H%M%S")
    records: dict[str, list[Path]] = {hosts: [] for hosts, _ in CENTRES}
    worst = 0
    for group, (hosts, routes) in enumerate(CENTRES, start=1):
        for shard in range(1, args.shards + 1):
            where = out / f"centres-{group}" / f"shard-{shard}"
            print(f"==> {hosts} ({routes}): shard {shard} of {args.shards}", flush=True)
            code = subprocess.run(
                [CLIMSTACK, "bench", "suite", "--tests", "all", "--hosts", hosts,
                 "--routes", routes, "--shard", f"{shard}/{args.shards}", "--out", where]
            ).returncode  # fmt: skip
            if code not in (0, 1):  # 1: judged, with unexpected outcomes; else it broke
                return code
            records[hosts].append(where / "suite.json")
            worst = max(worst, code)
    print("==> the other hosts: the smoke slice", flush=True)
    others = [CLIMSTACK, "bench", "suite", "--hosts", OTHERS, "--out", out / "others"]
    worst = max(worst, subprocess.run(others).returncode)
    print(f"==> every Fortran test on {FORTRAN}", flush=True)
    fortran = [CLIMSTACK, "bench", "suite", "--tests", "fortran", "--hosts", FORTRAN,
               "--routes", "native,bind", "--out", out / "fortran"]  # fmt: skip
    worst = max(worst, subprocess.run(fortran).returncode)
    print("==> every Fortran test over the standard ABI (mpif), every host", flush=True)
    mpif = [CLIMSTACK, "bench", "suite", "--tests", "fortran", "--routes",
            "native-abi,bind-abi", "--out", out / "fortran-abi"]  # fmt: skip
    worst = max(worst, subprocess.run(mpif).returncode)
    for hosts, shards in records.items():
        print(f"==> the whole suite on {hosts}", flush=True)
        subprocess.run([CLIMSTACK, "bench", "suite", "--report", *shards])
    print(f"mpich_suite: the shards' reports under {out}")
    return worst


if __name__ == "__main__":
    sys.exit(process.script(main))
