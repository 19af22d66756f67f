"""`make local`'s steps, run in order (some side by side), saying which step of how many
it is on and what is left, and ending with each step's wall and CPU seconds: the CPU time
of a step is its processes' user + system time (os.wait4's rusage, descendants included),
so a figure from one machine can be judged on another whatever its cores. Below it, the ten
slowest package builds of the run, from Spack's own records (climstack.stack.build_times).

SIGTERM or SIGINT (a job's time limit, `timeout`, Ctrl-C) stops the step's commands, each
of which stops its own (climstack.common.process.interruptible), within seconds; a rerun
finds what was finished. One `make local` at a time per cache: a second one is refused,
naming the first.

Standard library only: it runs before bin/setup has made the .venv.

    python3 -m climstack.workflow local
"""

import fcntl
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from climstack import pins
from climstack.common import process
from climstack.errors import ClimstackError
from climstack.stack import build_times

ROOT = Path(__file__).resolve().parent.parent
CLIMSTACK = str(ROOT / "bin" / "climstack")


@dataclass(frozen=True)
class Step:
    name: str
    commands: tuple[tuple[str, ...], ...]  # run side by side


@dataclass(frozen=True)
class Timing:
    name: str
    wall: float
    cpu: float


#: the stack is built twice, side by side: in the ARCHER2 image (on the image's MPICH) and
#: natively (the benchmarks' baseline), and beside them the CCE stand-in's NetCDF-C and
#: NetCDF-Bench (clang); each is mostly one compiler at a time, so together they use both
#: cores. Every step reuses what its inputs' stamps find cached. (Tried on 29 Nov 2026: the
#: provided Apptainer and the MPI-5 image's build beside these three, from an empty cache:
#: the step took 4157 s wall and 7253 CPU-s, and the ARCHER2 image hit its 3600 s limit;
#: five builds on two cores cost more CPU than they save in idle cores.)
LOCAL = (
    Step("setup", (("bin/setup",),)),
    Step("concretize every environment", ((CLIMSTACK, "concretize"),)),
    Step("emit the container recipes", ((CLIMSTACK, "containerize"),)),
    Step("local smoke slice", ((CLIMSTACK, "dev", "smoke", "local"),)),
    Step(
        "stack builds: ARCHER2 image | native | native CCE stand-in",
        (
            (CLIMSTACK, "image", "container-archer2"),
            (CLIMSTACK, "install", "local"),
            (CLIMSTACK, "install", "local-cce"),
        ),
    ),
    Step("SIF and container smoke", ((CLIMSTACK, "dev", "container-smoke", "container-archer2"),)),
    Step("OCI registry smoke", ((CLIMSTACK, "dev", "registry-smoke", "local"),)),
    Step("benchmarks", ((CLIMSTACK, "bench", "local", "--reuse"),)),
    # the MPI-5 standard ABI image on MPICH 5, Intel MPI and Open MPI 6: the C slice, then MOM6
    # (Fortran through mpif) on each, bit for bit
    Step("MPI-5 ABI image: C and MOM6 on the host MPIs", ((CLIMSTACK, "bench", "abi"),)),
)
WORKFLOWS = {"local": LOCAL}


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run_step(step: Step, environ: dict | None = None) -> tuple[Timing, int]:
    """Run the step's commands side by side; (its timing, the first non-zero exit status)."""
    start = time.monotonic()
    # without make's MAKEFLAGS: Spack would take a --jobserver-auth whose descriptors are
    # closed for these (non-make) commands; with make's PATH (CLIMSTACK_STEPS_PATH), not
    # the one a python3 shim hands down (pyenv puts its interpreter's bin/ first)
    env = {k: v for k, v in (environ or os.environ).items() if k not in ("MAKEFLAGS", "MFLAGS")}
    env["PATH"] = env.pop("CLIMSTACK_STEPS_PATH", env.get("PATH", os.defpath))
    cpu, status = process.side_by_side(step.commands, ROOT, env)
    return Timing(step.name, time.monotonic() - start, cpu), status


def run(steps, environ: dict | None = None) -> list[Timing]:
    """Run `steps` in order; their timings. A failing step ends the run (SystemExit with
    its status) after the table of the steps so far."""
    timings: list[Timing] = []
    for number, step in enumerate(steps, 1):
        left = ", ".join(s.name for s in steps[number:]) or "nothing"
        _say(f"==> step {number} of {len(steps)}: {step.name} (then: {left})")
        try:
            timing, status = run_step(step, environ)
        except process.Interrupted:
            if timings:  # the steps finished, which a rerun reuses
                _say(table(timings))
            raise
        timings.append(timing)
        _say(f"==> step {number} of {len(steps)}: {step.name}: {timing.wall:.0f} s")
        if status:
            _say(table(timings))
            raise SystemExit(f"step {number} ({step.name}) failed with exit status {status}")
    return timings


def table(timings: list[Timing]) -> str:
    """Each step's wall and CPU seconds, and the totals (CPU / wall: cores kept busy)."""
    width = max(len(t.name) for t in timings)
    lines = [f"{'step':<{width}}  {'wall s':>8}  {'CPU s':>8}  {'CPU/wall':>8}"]
    total = Timing("total", sum(t.wall for t in timings), sum(t.cpu for t in timings))
    for t in [*timings, total]:
        ratio = t.cpu / t.wall if t.wall else 0.0
        lines.append(f"{t.name:<{width}}  {t.wall:8.0f}  {t.cpu:8.0f}  {ratio:8.2f}")
    return "\n".join(lines)


@contextmanager
def only_run(name: str):
    """Hold the cache's lock of workflow `name` for the block, or refuse (ClimstackError)
    naming the run that holds it: two runs at once would build into one cache."""
    lock = pins.cache_dir() / f".{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another run (starting)"
            raise ClimstackError(
                f"`make {name}` is already running on the cache {pins.cache_dir()}: {holder} "
                f"(it holds {lock})",
                fix="wait for it to end, or stop it (kill PID: it stops its commands), then "
                "rerun; another run at once needs another cache (CLIMSTACK_CACHE=DIR)",
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}, {ROOT}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)


def main(argv=None) -> int:
    names = sys.argv[1:] if argv is None else argv
    if len(names) != 1 or names[0] not in WORKFLOWS:
        _say(f"usage: python3 -m climstack.workflow {{{','.join(WORKFLOWS)}}}")
        return 2
    try:
        with only_run(names[0]), process.interruptible():
            start = time.time()
            print(table(run(WORKFLOWS[names[0]])), flush=True)
            builds = build_times.builds_since(pins.cache_dir(), start)
            print(build_times.table(builds), flush=True)
    except ClimstackError as err:
        _say(f"make {names[0]}: error: {err}")
        return err.exit_code
    except process.Interrupted as stop:
        _say(f"make {names[0]}: {stop}; its steps' commands are stopped; rerun it to resume")
        return stop.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
