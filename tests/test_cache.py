"""One cache entry mechanism (climstack.common.cache) for images, SIFs, the provided
Apptainer's root filesystem and setup's scopes: built once per key, atomically, the stamp
last; a current twin is copied; a failed build leaves the old result as it was."""

import os
import stat

import pytest

from climstack.common import cache


class Fill:
    """A fill that counts its calls and writes the file or directory it is given."""

    def __init__(self, directory: bool = False, fail: bool = False):
        self.calls, self.directory, self.fail = 0, directory, fail

    def __call__(self, work):
        self.calls += 1
        if self.directory:
            work.mkdir()
            (work / "made").write_text(f"build {self.calls}\n")
        else:
            work.write_text(f"build {self.calls}\n")
        if self.fail:
            raise RuntimeError("the build failed")


def test_built_once_per_key_with_the_stamp_beside_it(tmp_path):
    fill = Fill()
    entry = cache.Entry(tmp_path / "result.sif", "key-1")
    assert not entry.current()
    assert entry.build(fill) == entry.path
    assert entry.build(fill) == entry.path
    assert fill.calls == 1
    assert entry.stamp == tmp_path / "result.sif.inputs"
    assert entry.stamp.read_text() == "key-1"
    cache.Entry(entry.path, "key-2").build(fill)  # new inputs: built again, in place
    assert fill.calls == 2 and entry.path.read_text() == "build 2\n"
    assert not entry.current()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.sif", "result.sif.inputs"]


def test_a_directory_carries_its_stamp_inside(tmp_path):
    fill = Fill(directory=True)
    entry = cache.Entry(tmp_path / "image", "k", inside="opt/stamp")
    entry.build(fill)
    entry.build(fill, force=True)
    assert fill.calls == 2
    assert (tmp_path / "image/opt/stamp").read_text() == "k"
    assert (tmp_path / "image/made").read_text() == "build 2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["image"]  # no leftovers


def test_a_current_twin_is_copied_and_a_stale_one_is_not(tmp_path):
    twin = cache.Entry(tmp_path / "user" / "image", "k", inside="stamp")
    twin.build(Fill(directory=True))
    fill = Fill(directory=True)
    copy = cache.Entry(tmp_path / "tests" / "image", "k", inside="stamp").build(
        fill, twin=twin.path
    )
    assert fill.calls == 0 and (copy / "made").read_text() == "build 1\n"
    other = cache.Entry(tmp_path / "other", "another key", inside="stamp")
    other.build(fill, twin=twin.path)
    assert fill.calls == 1


def test_a_failed_build_keeps_the_old_result_and_its_stamp(tmp_path):
    entry = cache.Entry(tmp_path / "lock.json", "k1")
    entry.build(Fill())
    with pytest.raises(RuntimeError, match="the build failed"):
        cache.Entry(entry.path, "k2").build(Fill(fail=True))
    assert entry.current() and entry.path.read_text() == "build 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock.json", "lock.json.inputs"]


def test_a_step_in_place_runs_once_per_key_and_again_after_a_failure(tmp_path):
    marker, runs = tmp_path / "mirror" / ".filled", []
    marker.parent.mkdir()
    assert cache.once(marker, "k", lambda: runs.append(1))
    assert not cache.once(marker, "k", lambda: runs.append(2))
    with pytest.raises(RuntimeError):
        cache.once(marker, "k2", lambda: (_ for _ in ()).throw(RuntimeError("failed")))
    assert marker.read_text() == "k"  # a failed step leaves the marker as it was
    assert cache.once(marker, "k2", lambda: runs.append(3))
    assert runs == [1, 3]


def test_written_files_follow_the_umask_as_open_would(tmp_path):
    from climstack.common import atomic

    old = os.umask(0o022)
    try:
        report = atomic.write_text(tmp_path / "report.html", "<html></html>")
    finally:
        os.umask(old)
    assert stat.S_IMODE(report.stat().st_mode) == 0o644  # readable by those it is shared with
