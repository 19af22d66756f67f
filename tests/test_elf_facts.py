"""The ELF facts kept across processes (climstack.bind.elf_facts): a large file's facts read back
from the store are the ones pyelftools reads from the file; a file changed in place, or a
store written by other code, is read again."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from climstack.bind import elf, elf_facts

#: Debian's MPICH: 41 MB, thousands of MPI exports, its imports with their GLIBC versions
LIBRARY = Path("/usr/lib/x86_64-linux-gnu/libmpich.so.12")


@pytest.fixture
def copy(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path / "cache"))
    elf._read_cached.cache_clear()  # each read below goes to the store or the file
    copied = tmp_path / "libmpi.so.12"
    shutil.copy2(LIBRARY.resolve(), copied)
    yield copied
    elf._read_cached.cache_clear()


def stored(tmp_path) -> list[Path]:
    return sorted((tmp_path / "cache" / elf_facts.FACTS_DIR).glob("*.json"))


def test_kept_facts_are_the_files_own(copy, tmp_path):
    parsed = elf._parsed(copy)
    assert parsed.mpi_exports() and parsed.import_versions and parsed.soname
    assert elf.read(copy) == parsed and len(stored(tmp_path)) == 1  # read, then kept
    elf._read_cached.cache_clear()
    assert elf.read(copy) == parsed  # from the store, in a process that never parsed it


def test_a_changed_file_or_a_foreign_store_is_read_again(copy, tmp_path):
    elf.read(copy)
    [kept] = stored(tmp_path)
    subprocess.run(["patchelf", "--set-soname", "libother.so.1", copy], check=True)
    elf._read_cached.cache_clear()
    assert elf.read(copy).soname == "libother.so.1"  # another identity: read anew
    assert len(stored(tmp_path)) == 2
    for path in stored(tmp_path):  # facts of other code, under the same key
        path.write_text(json.dumps({"path": str(copy), "unknown": 1}))
    elf._read_cached.cache_clear()
    assert elf.read(copy) == elf._parsed(copy)
    assert kept.read_text() != elf_facts.saved(elf._parsed(copy))  # the old identity's, untouched


def test_small_files_are_never_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path / "cache"))
    small = Path(shutil.which("true")).resolve()
    assert small.stat().st_size < elf_facts.KEPT_FROM
    elf._read_cached.cache_clear()
    elf.read(small)
    assert stored(tmp_path) == []


def test_facts_unused_for_a_month_go_before_a_new_entry(copy, tmp_path):
    elf.read(copy)
    [kept] = stored(tmp_path)
    month = elf_facts.KEPT_DAYS * 86400
    old = kept.stat().st_mtime - month - 60
    os.utime(kept, (old, old))
    elf._read_cached.cache_clear()
    elf.read(copy)  # read back: used, so kept longer
    assert kept.stat().st_mtime > old + month
    os.utime(kept, (old, old))
    subprocess.run(["patchelf", "--set-soname", "libother.so.1", copy], check=True)
    elf._read_cached.cache_clear()
    elf_facts.prune.cache_clear()
    elf.read(copy)  # a new entry: the unused one goes first
    assert not kept.exists() and len(stored(tmp_path)) == 1
