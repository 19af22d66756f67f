"""`make local`'s step runner (climstack.workflow): which step of how many, the CPU
seconds of commands run side by side (their descendants included), and a failing step."""

import sys

import pytest

from climstack import workflow

#: half a second of CPU in a grandchild: counted only if the rusage includes descendants
BUSY = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    "'import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass'])"
)


def test_side_by_side_commands_count_their_descendants_cpu(capsys):
    steps = (
        workflow.Step("first", ((sys.executable, "-c", "pass"),)),
        workflow.Step("both", ((sys.executable, "-c", BUSY), (sys.executable, "-c", BUSY))),
    )
    first, both = workflow.run(steps)
    assert both.cpu >= 0.9 and first.cpu < both.cpu  # two half-seconds, by grandchildren
    said = capsys.readouterr().err
    assert "==> step 1 of 2: first (then: both)" in said
    assert "==> step 2 of 2: both (then: nothing)" in said
    table = workflow.table([first, both]).splitlines()
    assert table[0].split() == ["step", "wall", "s", "CPU", "s", "CPU/wall"]
    assert table[-1].startswith("total") and len(table) == 4


def test_a_failing_step_stops_the_run_after_the_table(capsys):
    steps = (
        workflow.Step("fails", ((sys.executable, "-c", "raise SystemExit(3)"),)),
        workflow.Step("never", ((sys.executable, "-c", "pass"),)),
    )
    with pytest.raises(SystemExit) as stopped:
        workflow.run(steps)
    assert "step 1 (fails) failed with exit status 3" in str(stopped.value)
    said = capsys.readouterr().err
    assert "never" in said and "==> step 2" not in said and "total" in said


def test_make_local_runs_the_workflow_and_setup_first():
    assert workflow.LOCAL[0].commands == (("bin/setup",),)
    timed = [step for step in workflow.LOCAL if "bench" in step.commands[0]]
    assert timed and all(len(step.commands) == 1 for step in timed)  # a timed step runs alone
    assert workflow.main(["nonsense"]) == 2


def test_the_steps_get_makes_path_not_the_shims(tmp_path):
    """pyenv's python3 puts its own bin/ first on PATH; the steps run with make's."""
    out = tmp_path / "path"
    write = f"import os; open({str(out)!r}, 'w').write(os.environ['PATH'])"
    step = workflow.Step("path", ((sys.executable, "-c", write),))
    environ = {"PATH": "/shim/bin:/usr/bin", "CLIMSTACK_STEPS_PATH": "/usr/bin:/bin"}
    _, status = workflow.run_step(step, environ)
    assert status == 0 and out.read_text() == "/usr/bin:/bin"
