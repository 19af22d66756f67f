"""The skip policy (skip_policy.py), in a pytest session of its own: in CI a skip fails the
run unless the test is listed as allowed; elsewhere skips pass, with their reasons shown."""

import os
import subprocess
import sys

from conftest import PROJECT_ROOT

TESTS = """
import pytest

def test_unreadable_library_directory_is_reported():
    pytest.skip("needs root")

def test_needs_a_tool():
    pytest.skip("needs ch-run")

def test_runs():
    pass
"""


def session(tmp_path, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_bind.py").write_text(TESTS)  # one allowed node id, one not
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update({"PYTHONPATH": str(PROJECT_ROOT / "tests")}, **({"CI": ci} if ci else {}))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "skip_policy", "-p", "no:cacheprovider", "-rfs"]
        + ["-q", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_in_ci_an_unlisted_skip_fails_the_run(tmp_path):
    proc = session(tmp_path, "true")
    assert proc.returncode == 1, proc.stdout
    assert "1 failed, 1 passed, 1 skipped" in proc.stdout, proc.stdout
    assert "unexpected skip in CI: needs ch-run" in proc.stdout
    assert "FAILED tests/test_bind.py::test_needs_a_tool" in proc.stdout
    assert "SKIPPED [1] tests/test_bind.py:5: needs root" in proc.stdout  # the listed one


def test_outside_ci_skips_pass_with_their_reasons(tmp_path):
    proc = session(tmp_path, None)
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 2 skipped" in proc.stdout and "needs ch-run" in proc.stdout
