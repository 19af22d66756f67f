"""Print what podman's launch shape costs MPI: the local bind plan as a CDI spec, one
container per node (the ranks `podman exec`ed into it: `bench`'s bind-cdi) against one
container per rank (`podman run` each, the spec's variables for separate ranks:
UCX_TLS=^cma, UCX_POSIX_USE_PROC_LINK=n), one container per rank without those
variables ("bare"), and native.

1. osu_latency (1 B, 8 KiB, 16 KiB, 64 KiB), LATENCY runs of each, alternating: medians.
2. osu_allreduce LOOPS times each, alternating, each run stopped after bench's hang limit
   (60 s): how many hung or failed, the median wall time and the median at 64 KiB.
Run: `.venv/bin/python benchmarks/podman_launch.py [LOOPS [LATENCY]]` (60 and 10).
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from climstack.bench.run import leftovers, runner
from climstack.bench.run.local import IMAGE, local_modes
from climstack.bind import loader
from climstack.bind import plan as plans
from climstack.image import image
from climstack.inputs import sites
from climstack.launch import launch, launchers, runtimes
from climstack.stack import environments
from climstack.stack.install import install

PODMAN = runtimes.get("podman")
SIZES = (1, 8192, 16384, 65536)
RANKS = 2


def commands(work: Path) -> dict[str, dict[str, list[str]]]:
    """variant -> benchmark -> the host command line."""
    prefixes = install(environments.resolve("local"))
    native, joined = local_modes(["native", "bind-cdi"], RANKS, "charliecloud", None, None,
                                 prefixes, work)  # fmt: skip
    plan = plans.make(sites.get("local"), "bind", view=loader.View(), runtime="podman")
    launcher = launchers.given(["mpiexec", "-n", str(RANKS)])
    # the same plan without separate_env: which of the two costs, the containers or the
    # variables (its own spec directory: the spec's variables win over podman's --env)
    bare = plans.write(replace(plan, separate_env={}), work / "plan-without-separate-env")
    found = {"native": {}, "one per node": {}, "one per rank": {}, "per rank, bare": {}}
    for name in ("osu_latency", "osu_allreduce"):
        benchmark = next(b for b in runner.LOCAL if b.name == name)
        args = list(benchmark.argv[1:])
        found["native"][name] = native.wrap([native.locate(benchmark), *args])
        program = [joined.locate(benchmark), *args]
        found["one per node"][name] = joined.wrap(program, str(work))
        for variant, made in (("one per rank", plan), ("per rank, bare", bare)):
            found[variant][name] = launch.command(
                made, PODMAN, launcher, image.default_destination(IMAGE), program, RANKS, 0,
                str(work),
            )  # fmt: skip
    return found


def timed(argv: list[str], work: Path, global_args=()) -> tuple[str, float, dict[int, float]]:
    """(ok | hung | failed, wall s, latency per size in us). A run still running after
    bench's hang limit is stopped: its whole process group killed (the launcher, its ranks'
    podman clients), then this process's containers removed (leftovers.stop_podman, by the
    run label: a concurrent run's stay), with podman's `global_args`."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=work, start_new_session=True)  # fmt: skip
    try:
        stdout, _ = proc.communicate(timeout=runner.OSU_HUNG_AFTER)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()  # not its pipes: a process that left the group may hold them
        proc.stdout.close()
        proc.stderr.close()
        leftovers.stop_podman(None, global_args)
        return "hung", time.monotonic() - start, {}
    wall = time.monotonic() - start
    rows = [line.split() for line in stdout.splitlines() if line[:1].isdigit()]
    values = {int(r[0]): float(r[1]) for r in rows if len(r) >= 2}
    return ("ok" if proc.returncode == 0 else "failed"), wall, values


def main(loops: int = 60, latency: int = 10) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        found = commands(work)
        global_args = PODMAN.settings(str(image.default_destination(IMAGE))).global_args
        names = list(found)
        print(f"osu_latency, {RANKS} ranks, {latency} alternating runs each (median us), "
              f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        samples = {n: [] for n in names}
        for _ in range(latency):
            for name in names:
                samples[name].append(timed(found[name]["osu_latency"], work, global_args)[2])
        print(f"{'launch':<14}" + "".join(f"{size:>10}" for size in SIZES))
        for name in names:
            medians = [statistics.median(s[size] for s in samples[name] if size in s)
                       for size in SIZES]  # fmt: skip
            print(f"{name:<14}" + "".join(f"{m:>10.2f}" for m in medians))
        print(f"\nosu_allreduce, {loops} alternating runs each, hung after "
              f"{runner.OSU_HUNG_AFTER} s")  # fmt: skip
        print(f"{'launch':<14}{'ok':>5}{'hung':>6}{'failed':>8}{'wall s':>9}{'64 KiB us':>11}")
        runs = {n: [] for n in names}
        for index in range(loops):
            for name in names:
                runs[name].append(timed(found[name]["osu_allreduce"], work, global_args))
            print(f"  ... {index + 1} of {loops}", file=sys.stderr, end="\r")
        for name in names:
            states = [state for state, _, _ in runs[name]]
            wall = statistics.median(w for _, w, _ in runs[name])
            big = [v[65536] for _, _, v in runs[name] if 65536 in v]
            print(f"{name:<14}{states.count('ok'):>5}{states.count('hung'):>6}"
                  f"{states.count('failed'):>8}{wall:>9.2f}"
                  f"{statistics.median(big) if big else float('nan'):>11.2f}")  # fmt: skip


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
