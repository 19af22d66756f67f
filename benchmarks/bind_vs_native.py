"""Print IMB-MPI1 PingPong and Allgather times, native vs bind mode, and their ratios.

The same binary (Intel's IMB-MPI1 from PyPI impi-rt, built against Intel MPI) runs on 2
ranks with the host MPI (Debian's MPICH 4.0.2) swapped in: natively on the host, and in
bind mode with each rank in its own ch-run container under `climstack bind local`'s plan.
Runs alternate, REPEAT times; per message size the best (minimum) time of each side is
compared, the estimator least disturbed by other load on a 2-core machine (the 1-minute
load average is printed; medians too). Goal: bind within 2% of native.
Run: `.venv/bin/python benchmarks/bind_vs_native.py [REPEAT]`.
"""

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from climstack.bind import plan as plans
from climstack.common import process
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

IMB = ["PingPong", "Allgather", "-msglog", "0:16", "-iter", "2000", "-time", "2", "-npmin", "2"]
COLUMN = {"PingPong": "t[usec]", "Allgather": "t_avg[usec]"}


def parse(output: str) -> dict[str, dict[int, float]]:
    """{benchmark: {bytes: time in us}} from IMB's tables."""
    tables, current, column = {}, None, None
    for line in output.splitlines():
        if line.startswith("# Benchmarking "):
            current = line.split()[2]
            tables[current] = {}
        elif current and line.strip().startswith("#bytes"):
            column = line.split().index(COLUMN[current])
        elif current and column and line.strip() and line.split()[0].isdigit():
            fields = line.split()
            tables[current][int(fields[0])] = float(fields[column])
    return tables


def run(argv: list[str], env: dict) -> dict[str, dict[int, float]]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode:
        sys.exit(f"failed: {' '.join(argv[:6])} ...\n{proc.stderr[-2000:]}")
    return parse(proc.stdout)


def main(repeat: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        image = helpers.probe_image_copy(Path(tmp))
        plan = plans.make(sites.get("local"), out=Path(tmp) / "plan", environ={})
        CHARLIECLOUD.prepare_image(plan, image)
        launcher = ["mpiexec", "-n", "2"]
        env = {**os.environ, "USER": os.environ.get("USER") or "root"}
        # native: the same swap without a container (the plan's links dir, on the host)
        native_env = {**env, **plan.runtime_env(), "LD_LIBRARY_PATH": str(Path(tmp) / "alias")}
        (Path(tmp) / "alias").mkdir()
        (Path(tmp) / "alias" / "libmpi.so.12").symlink_to(
            Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
        )
        native = [*launcher, str(helpers.impi().bin / "IMB-MPI1"), *IMB]
        contained = [
            *launcher,
            *runtimes.get("charliecloud").exec_args(
                plan, str(image), ["/opt/probe/bin/IMB-MPI1", *IMB]
            ),
        ]
        probe = subprocess.run(
            [
                *launcher,
                *runtimes.get("charliecloud").exec_args(
                    plan, str(image), ["/opt/probe/bin/mpi-probe"]
                ),
            ],
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        print(f"host MPI in the container: {probe.splitlines()[0] if probe else '?'}")
        samples = {"native": [], "bind": []}
        for _ in range(repeat):
            samples["native"].append(run(native, native_env))
            samples["bind"].append(run(contained, env))
    print(
        f"IMB-MPI1, 2 ranks, {repeat} alternating runs each, load average "
        f"{os.getloadavg()[0]:.2f} (us; ratio = best bind / best native)"
    )
    for benchmark in COLUMN:
        print(
            f"\n{benchmark:>10} {'bytes':>7} {'native':>9} {'bind':>9} {'ratio':>7}"
            f" {'median ratio':>13}"
        )
        ratios = []
        for size in sorted(samples["native"][0][benchmark]):
            native_t, bind_t = (
                min(s[benchmark][size] for s in samples[side]) for side in ("native", "bind")
            )
            native_m, bind_m = (
                statistics.median(s[benchmark][size] for s in samples[side])
                for side in ("native", "bind")
            )
            if native_t > 0 and native_m > 0:
                ratios.append(bind_t / native_t)
                print(
                    f"{'':>10} {size:>7} {native_t:>9.2f} {bind_t:>9.2f} "
                    f"{bind_t / native_t:>7.3f} {bind_m / native_m:>13.3f}"
                )
        mean = statistics.geometric_mean(ratios)
        print(
            f"{benchmark}: geometric mean bind/native = {mean:.3f} "
            f"({(mean - 1) * 100:+.1f}%, goal within 2%)"
        )


if __name__ == "__main__":
    sys.exit(process.script(main, int(sys.argv[1]) if len(sys.argv) > 1 else 5))
