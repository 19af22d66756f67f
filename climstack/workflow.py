"""`make local`'s tasks, each a command, run by a small scheduler: a task starts once the
tasks it comes after have finished, up to SLOTS at once (the builds side by side, so both
cores stay busy), and a timed task (a benchmark) only alone, nothing starting beside it.
Each start and end is said with what is running and what is left; the run ends with each
task's start, wall and CPU seconds: the CPU time of a task is its processes' user + system
time (os.wait4's rusage, descendants included), so a figure from one machine can be judged
on another whatever its cores. Below it, the ten slowest package builds of the run, from
Spack's own records (climstack.stack.build_times).

SIGTERM or SIGINT (a job's time limit, `timeout`, Ctrl-C) stops the running commands, each
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
class Task:
    name: str
    command: tuple[str, ...]
    after: tuple[str, ...] = ()  # the tasks that must have finished first
    timed: bool = False  # a benchmark: it runs alone


@dataclass(frozen=True)
class Timing:
    name: str
    start: float  # seconds into the run
    wall: float
    cpu: float


#: tasks running at once: the three stack builds side by side (each mostly one compiler at
#: a time, so together they use both cores). More costs more than it saves: CPU seconds
#: grow when this machine's two cores are oversubscribed (29 Nov 2026, docs/performance.md:
#: five builds at once, the Apptainer's and the MPI-5 image's beside the stack builds from
#: the start, ran the ARCHER2 image into its time limit). The MPI-5 image waits for the
#: native stack and the CCE stand-in, then takes the core the ARCHER2 image leaves idle:
#: from an empty cache, 490 s less wall and 344 CPU-s fewer from the solves on (30 Nov,
#: with MOM6 and FMS at -g0).
SLOTS = 3

STACK_BUILDS = ("ARCHER2 image", "native stack", "CCE stand-in")

#: in the order they start when several may. Every task reuses what its inputs' stamps find
#: cached.
LOCAL = (
    Task("setup", ("bin/setup",)),
    Task("concretize", (CLIMSTACK, "concretize"), after=("setup",)),
    Task("recipes", (CLIMSTACK, "containerize"), after=("concretize",)),
    Task("smoke slice", (CLIMSTACK, "dev", "smoke", "local"), after=("recipes",)),
    Task("ARCHER2 image", (CLIMSTACK, "image", "container-archer2"), after=("smoke slice",)),
    Task("native stack", (CLIMSTACK, "install", "local"), after=("smoke slice",)),
    Task("CCE stand-in", (CLIMSTACK, "install", "local-cce"), after=("smoke slice",)),
    # the MPI-5 image and its hosts' files (`bench abi`'s builds, not its runs): in the core
    # the ARCHER2 image alone leaves idle (its last packages build one file at a time)
    Task(
        "MPI-5 ABI image",
        (CLIMSTACK, "bench", "abi", "--prepare"),
        after=("native stack", "CCE stand-in"),
    ),
    Task(
        "SIF smoke",
        (CLIMSTACK, "dev", "container-smoke", "container-archer2"),
        after=STACK_BUILDS,
    ),
    Task("registry smoke", (CLIMSTACK, "dev", "registry-smoke", "local"), after=("SIF smoke",)),
    Task("benchmarks", (CLIMSTACK, "bench", "local", "--reuse"), after=("registry smoke",),
         timed=True),  # fmt: skip
    # the MPI-5 standard ABI image on MPICH 5, Intel MPI and Open MPI 6 (and the wrapped
    # MPIs): the C slice, then MOM6 (Fortran through mpif) on each, bit for bit
    Task("MPI-5 ABI runs", (CLIMSTACK, "bench", "abi"), after=("benchmarks", "MPI-5 ABI image"),
         timed=True),  # fmt: skip
)
WORKFLOWS = {"local": LOCAL}


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def check(tasks) -> None:
    """Each name once, and each task after tasks listed before it (so no cycle)."""
    seen: set[str] = set()
    for task in tasks:
        unknown = [name for name in task.after if name not in seen]
        if task.name in seen or unknown:
            raise ValueError(f"task {task.name!r}: a second of that name, or after {unknown}")
        seen.add(task.name)


def tasks_environ(environ: dict | None = None) -> dict:
    """The tasks' environment: without make's MAKEFLAGS (Spack would take a --jobserver-auth
    whose descriptors are closed for these non-make commands), with make's PATH
    (CLIMSTACK_STEPS_PATH), not the one a python3 shim hands down (pyenv puts its
    interpreter's bin/ first)."""
    env = {k: v for k, v in (environ or os.environ).items() if k not in ("MAKEFLAGS", "MFLAGS")}
    env["PATH"] = env.pop("CLIMSTACK_STEPS_PATH", env.get("PATH", os.defpath))
    return env


def _startable(pending, done, running, slots):
    """The next task to start now, if one may: in the order listed, once its tasks before
    have finished; a timed one only with nothing running, and none beside it."""
    if any(task.timed for task, _ in running.values()):
        return None
    for task in pending:
        if not all(name in done for name in task.after):
            continue
        if task.timed:
            return None if running else task  # it is next: nothing starts before it
        return task if len(running) < slots else None
    return None


def run(tasks, environ: dict | None = None, slots: int = SLOTS) -> list[Timing]:
    """Run `tasks` (check()ed); their timings in the order they ended. A failing task starts
    nothing more: the running ones finish (what they build is kept), then SystemExit with
    its status, after the table of the tasks ended."""
    check(tasks)
    env, origin = tasks_environ(environ), time.monotonic()
    pending, done, running = list(tasks), {}, {}
    failed: tuple[str, int] | None = None
    while running or (pending and not failed):
        task = None if failed else _startable(pending, done, running, slots)
        if task:
            pending.remove(task)
            running[process.start(task.command, ROOT, env)] = (task, time.monotonic())
            beside = [t.name for t, _ in running.values() if t is not task]
            _say(f"==> start {task.name}" + (f" (beside: {', '.join(beside)})" if beside else ""))
            continue
        if not running:  # nothing runs and nothing may start: a task after a missing one
            raise SystemExit(f"no task can start: {', '.join(t.name for t in pending)}")
        try:
            pid, cpu, status = process.wait_any(list(running))
        except process.Interrupted:
            if done:  # the tasks finished, which a rerun reuses
                _say(table(list(done.values())))
            raise
        task, began = running.pop(pid)
        done[task.name] = Timing(task.name, began - origin, time.monotonic() - began, cpu)
        left = len(pending) + len(running)
        _say(
            f"==> done {task.name}: {done[task.name].wall:.0f} s ({len(done)} of "
            f"{len(tasks)}; {left} left{', running: ' if running else ''}"
            f"{', '.join(t.name for t, _ in running.values())})"
        )
        if status and not failed:
            failed = (task.name, status)
            if running:
                _say(
                    f"==> {task.name} failed (exit status {status}): starting nothing more; "
                    "waiting for the running tasks, whose builds are kept"
                )
    if failed:
        _say(table(list(done.values())))
        raise SystemExit(f"{failed[0]} failed with exit status {failed[1]}")
    return list(done.values())


def table(timings: list[Timing]) -> str:
    """Each task's start, wall and CPU seconds; the total's wall is the run's, from the
    first start to the last end (tasks overlap), its CPU the sum (CPU / wall: cores kept
    busy)."""
    width = max(len(t.name) for t in timings)
    lines = [f"{'task':<{width}}  {'start s':>8}  {'wall s':>8}  {'CPU s':>8}  {'CPU/wall':>8}"]
    first = min(t.start for t in timings)
    end = max(t.start + t.wall for t in timings)
    total = Timing("total", first, end - first, sum(t.cpu for t in timings))
    for t in [*sorted(timings, key=lambda t: t.start), total]:
        ratio = t.cpu / t.wall if t.wall else 0.0
        lines.append(
            f"{t.name:<{width}}  {t.start:8.0f}  {t.wall:8.0f}  {t.cpu:8.0f}  {ratio:8.2f}"
        )
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
