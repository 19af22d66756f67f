"""The suite's own housekeeping: old sessions' temporary directories go in the background."""

import os

from conftest import remove_old_sessions


def test_all_but_the_newest_three_sessions_are_removed_unless_running(tmp_path):
    for n in range(1, 7):
        (tmp_path / f"pytest-{n}" / "test0").mkdir(parents=True)
    (tmp_path / "pytest-2" / ".lock").write_text(str(os.getpid()))  # still running
    (tmp_path / "pytest-3" / ".lock").write_text("999999999")  # its process is gone
    (tmp_path / "pytest-current").symlink_to(tmp_path / "pytest-6")
    remove_old_sessions(tmp_path / "pytest-6").wait()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["pytest-2", "pytest-4", "pytest-5", "pytest-6", "pytest-current"]
    assert remove_old_sessions(tmp_path / "pytest-6") is None  # nothing (more) to remove
    assert remove_old_sessions(tmp_path / "elsewhere") is None  # --basetemp
