"""Print what mpi_abi_wrapper costs per MPI call, in ns: the calls a halo exchange makes
(abi_call_cost.c: MPI_Comm_rank, MPI_Type_size, MPI_Irecv + MPI_Isend + MPI_Waitall to
itself, an MPI_Iprobe that finds nothing, a one-rank MPI_Allreduce) in loops on one rank,
built with the host MPI's own mpicc and with MPICH 5.0.2's mpicc_abi, the latter run on the
host MPI through mpi_abi_wrapper (the library path and MPI_ABI_WRAPPER_LIB as `bench
suite`'s native-abi lane sets them). On MPICH 5.0.2 itself the same pair prices MPICH's own
standard-ABI layer. Per host and kernel: the median ns per call of each build over REPEATS
alternating runs, their difference, and the ratio's 95% interval (bench.report.stats).

Run: `.venv/bin/python benchmarks/abi_call_cost.py [REPEATS [ITERATIONS]]` (7, 2000000).
"""

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from climstack.bench.abi import abi_hosts
from climstack.bench.report import stats
from climstack.bench.suite.suite_lanes import native_libraries
from climstack.common import process

SOURCE = Path(__file__).with_name("abi_call_cost.c")
HOSTS = ("mpich", "mpich-3.4.3", "mpich-4.1", "debian-mpich", "openmpi-5")


def builds(host: abi_hosts.Host, work: Path) -> tuple[Path, Path]:
    """(the host's own build, the standard-ABI build by MPICH 5.0.2's mpicc_abi)."""
    own = abi_hosts.compile_c(host, [SOURCE], work / host.name / "own")
    standard = work / "standard" / "abi_call_cost"
    if not standard.is_file():
        standard.parent.mkdir(parents=True, exist_ok=True)
        mpicc_abi = abi_hosts.wheel_prefix("mpich") / "bin" / "mpicc_abi"
        process.run([mpicc_abi, "-O2", "-o", standard, SOURCE], "mpicc_abi abi_call_cost.c")
    return own, standard


def run(host: abi_hosts.Host, program: Path, env: dict, iterations: int) -> dict[str, float]:
    """kernel -> ns per call, one run on one rank."""
    argv = host.launch(1) + [str(program), str(iterations)]
    output = process.run(argv, f"{program} on {host.title}", env=env, timeout=600).stdout
    found = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 3 and words[1].isdigit():
            found[words[0]] = float(words[2]) / int(words[1])
        elif line.startswith("wrong"):
            raise SystemExit(f"{program} on {host.title}: {line}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=7)
    parser.add_argument("iterations", nargs="?", type=int, default=2_000_000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in HOSTS:
            host = abi_hosts.host(name, visible=(work,))
            own, standard = builds(host, work)
            base = process.with_user({**os.environ, **host.env})
            through = dict(base, LD_LIBRARY_PATH=str(native_libraries(host, "native-abi", work)))
            if host.wrapper:
                through["MPI_ABI_WRAPPER_LIB"] = f"{host.wrapper}/lib/libmpiwrapper.so"
            times: dict[str, dict[str, list[float]]] = {"own": {}, "standard": {}}
            for repeat in range(args.repeats):  # alternating, the order flipped each repeat
                pairs = [("own", own, base), ("standard", standard, through)]
                for label, program, env in pairs[:: 1 if repeat % 2 else -1]:
                    for kernel, ns in run(host, program, env, args.iterations).items():
                        times[label].setdefault(kernel, []).append(ns)
            route = "mpi_abi_wrapper" if host.wrapper else "its own libmpi_abi"
            for kernel, mine in times["own"].items():
                theirs = times["standard"][kernel]
                ratio = stats.estimate(t / m for t, m in zip(theirs, mine))
                rows.append((host.title, route, kernel, statistics.median(mine),
                             statistics.median(theirs), ratio))  # fmt: skip
    print(f"ns per call, medians of {args.repeats} runs of {args.iterations} iterations, 1 rank")
    print(
        "| host MPI | standard ABI through | call | own ABI | standard ABI | + ns | ratio [95%] |"
    )
    print("|---|---|---|---|---|---|---|")
    for title, route, kernel, mine, theirs, ratio in rows:
        interval = f"[{ratio.low:.2f}-{ratio.high:.2f}]" if ratio.low else ""
        print(f"| {title} | {route} | {kernel} | {mine:.1f} | {theirs:.1f} "
              f"| {theirs - mine:+.1f} | {ratio.ratio:.2f} {interval} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(process.script(main))
