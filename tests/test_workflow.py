"""`make local`'s scheduler (climstack.workflow): tasks after the tasks they need, up to its
slots at once, a timed task alone, the CPU seconds of each task (its descendants included),
and a failing task."""

import sys

import pytest

from climstack import workflow

#: half a second of CPU in a grandchild: counted only if the rusage includes descendants
BUSY = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    "'import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass'])"
)
SLEEP = "import time; time.sleep(0.4)"


def task(name: str, code: str = SLEEP, **kwargs) -> workflow.Task:
    return workflow.Task(name, (sys.executable, "-c", code), **kwargs)


def by_name(timings) -> dict:
    return {t.name: t for t in timings}


def end(timing) -> float:
    return timing.start + timing.wall


def test_tasks_side_by_side_count_their_descendants_cpu(capsys):
    tasks = (
        task("first", "pass"),
        task("a", BUSY, after=("first",)),
        task("b", BUSY, after=("first",)),
    )
    timings = by_name(workflow.run(tasks))
    assert timings["a"].cpu >= 0.45 and timings["b"].cpu >= 0.45  # by grandchildren
    assert timings["first"].cpu < timings["a"].cpu
    assert end(timings["first"]) <= timings["a"].start  # after it
    assert timings["b"].start < end(timings["a"])  # side by side
    said = capsys.readouterr().err
    assert "==> start first\n" in said and "==> start b (beside: a)" in said
    assert "==> done first: 0 s (1 of 3; 2 left)" in said
    table = workflow.table(list(timings.values())).splitlines()
    assert table[0].split() == ["task", "start", "s", "wall", "s", "CPU", "s", "CPU/wall"]
    total = table[-1].split()
    assert total[0] == "total" and len(table) == 5
    assert float(total[3]) >= 0.9  # the CPU seconds summed


def test_a_timed_task_runs_alone_and_before_any_task_listed_after_it():
    tasks = (
        task("build 1"),
        task("build 2"),
        task("benchmark", timed=True),
        task("build 3"),  # ready from the start, but listed after the benchmark
    )
    timings = by_name(workflow.run(tasks))
    assert timings["build 2"].start < end(timings["build 1"])
    bench = timings["benchmark"]
    assert bench.start >= max(end(timings["build 1"]), end(timings["build 2"]))
    assert timings["build 3"].start >= end(bench)


def test_no_more_than_its_slots_run_at_once():
    timings = workflow.run(tuple(task(f"build {n}") for n in range(3)), slots=2)
    first, second, third = sorted(timings, key=lambda t: t.start)
    assert second.start < end(first) and third.start >= min(end(first), end(second))


def test_a_failing_task_starts_nothing_more_and_lets_the_running_finish(capsys, tmp_path):
    finished = tmp_path / "finished"
    tasks = (
        task("fails", "raise SystemExit(3)"),
        task("running", f"import time; time.sleep(0.5); open({str(finished)!r}, 'w')"),
        task("never", "pass", after=("fails",)),
    )
    with pytest.raises(SystemExit) as stopped:
        workflow.run(tasks)
    assert str(stopped.value) == "fails failed with exit status 3"
    assert finished.is_file()  # not killed: what it built is kept
    said = capsys.readouterr().err
    assert "fails failed (exit status 3): starting nothing more" in said
    assert "==> start never" not in said and "total" in said


def test_a_task_after_an_unknown_or_later_task_is_refused():
    with pytest.raises(ValueError, match="'b'.*after \\['a'\\]"):
        workflow.check((task("b", after=("a",)), task("a")))
    with pytest.raises(ValueError, match="a second of that name"):
        workflow.check((task("a"), task("a")))


def test_make_locals_tasks():
    workflow.check(workflow.LOCAL)
    tasks = {t.name: t for t in workflow.LOCAL}
    assert workflow.LOCAL[0].command == ("bin/setup",)
    runs = [t for t in workflow.LOCAL if "bench" in t.command and "--prepare" not in t.command]
    assert runs and all(t.timed for t in runs)
    # `bench abi`'s builds are untimed, its runs wait for them
    assert not tasks["MPI-5 ABI image"].timed
    assert "MPI-5 ABI image" in tasks["MPI-5 ABI runs"].after
    # the SIF smoke after every build: nothing built is left to start beside the benchmarks
    assert set(tasks["SIF smoke"].after) == set(workflow.STACK_BUILDS)
    assert workflow.main(["nonsense"]) == 2


def test_the_tasks_get_makes_path_not_the_shims():
    """pyenv's python3 puts its own bin/ first on PATH; the tasks run with make's."""
    environ = {
        "PATH": "/shim/bin:/usr/bin",
        "CLIMSTACK_STEPS_PATH": "/usr/bin:/bin",
        "MAKEFLAGS": "-j",
    }
    env = workflow.tasks_environ(environ)
    assert env["PATH"] == "/usr/bin:/bin" and "MAKEFLAGS" not in env
