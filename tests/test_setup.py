"""bin/setup: pinned Spack from git, cached per user, offline on a warm cache, atomic."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT_ROOT, run_spack

from climstack import pins
from climstack import setup as climstack_setup
from climstack import spack
from climstack.bind import elf
from climstack.inputs import sites
from climstack.stack.sources import git_sources
from climstack_dev import IN_SPACK


def setup(*args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "climstack.setup", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )


def test_warm_cache_needs_no_network():
    # Unreachable URLs prove the cached clones are reused, not fetched again.
    clones = [pins.spack_root(), pins.cache_dir() / pins.SPACK_PACKAGES.cache_name]
    before = [os.stat(path).st_ino for path in clones]  # a new clone is a new directory
    proc = setup(
        CLIMSTACK_SPACK_GIT="https://unreachable.invalid/spack.git",
        CLIMSTACK_SPACK_PACKAGES_GIT="https://unreachable.invalid/packages.git",
    )
    assert proc.returncode == 0, proc.stderr
    assert "cloning" not in proc.stderr and "unreachable.invalid" not in proc.stderr
    assert f"setup: Spack {pins.SPACK_VERSION} at {pins.spack_root()}" in proc.stderr
    assert [os.stat(path).st_ino for path in clones] == before


def test_spack_reports_the_pinned_version():
    assert run_spack("--version").stdout.split() == [pins.SPACK_VERSION, f"({pins.SPACK.commit})"]


def test_builtin_repo_is_the_cached_clone_and_no_binary_bootstrap():
    repos = run_spack("repo", "list").stdout
    assert str(pins.builtin_repo_root()) in repos
    assert run_spack("config", "get", "bootstrap").stdout.count("enable: false") == 1
    clingo = spack.DEFAULT.python(IN_SPACK, "clingo")
    assert str(PROJECT_ROOT / ".venv") in clingo


def test_spack_starts_from_bytecode_where_python_writes_none():
    # setup compiled the pinned clone: no Spack module is compiled from source at start
    # (python -v says "code object from X.py" for a compiled source, "from 'X.pyc'" else)
    verbose = os.environ | {"PYTHONVERBOSE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    stderr = run_spack("--version", environ=verbose).stderr
    root = re.escape(str(pins.spack_root()))
    loaded = re.findall(rf"^# code object from '?({root}/[^'\s]+)", stderr, re.MULTILINE)
    from_source = [path for path in loaded if path.endswith(".py")]
    assert len(loaded) > 100 and not from_source, from_source[:5]


def test_clone_from_a_local_mirror_path(tmp_path):
    # An air-gapped centre points the variables at local mirrors: here, the cached clones.
    # This host's detections and provided Apptainer are seeded, as a second run finds them
    # (making them again costs ~110 s and is what every fresh `bin/setup` does anyway).
    detected = tmp_path / "local-externals"
    shutil.copytree(pins.local_externals(), detected)
    (tmp_path / "apptainer").symlink_to(pins.cache_dir() / "apptainer")
    wrapper = git_sources.COMPILER_WRAPPER  # and the compiler wrapper's release, remade once
    archive = Path("_source-cache", "archive", wrapper.sha256[:2], f"{wrapper.sha256}.tar.gz")
    (tmp_path / "source-mirror" / archive).parent.mkdir(parents=True)
    shutil.copyfile(git_sources.local_mirror() / archive, tmp_path / "source-mirror" / archive)
    proc = setup(
        CLIMSTACK_CACHE=str(tmp_path),
        CLIMSTACK_SPACK_GIT=str(pins.spack_root()),
        CLIMSTACK_SPACK_PACKAGES_GIT=str(pins.cache_dir() / pins.SPACK_PACKAGES.cache_name),
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / pins.SPACK.cache_name / "bin" / "spack").is_file()
    assert (
        tmp_path / pins.SPACK_PACKAGES.cache_name / "repos" / "spack_repo" / "builtin"
    ).is_dir()
    for clone in (pins.SPACK.cache_name, pins.SPACK_PACKAGES.cache_name):  # compiled on arrival
        assert (
            tmp_path / clone / ".climstack-bytecode"
        ).read_text() == sys.implementation.cache_tag
    # the seeded detections were current: kept, not detected again
    assert (detected / "packages.yaml").read_text() == (
        pins.local_externals() / "packages.yaml"
    ).read_text()
    assert "detecting this host's compilers" not in proc.stderr
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], "temp dirs left"


def test_unreachable_spack_url_fails_clearly_and_leaves_nothing(tmp_path):
    proc = setup(
        CLIMSTACK_CACHE=str(tmp_path), CLIMSTACK_SPACK_GIT="file:///nonexistent/spack.git"
    )
    assert proc.returncode == 2
    assert "file:///nonexistent/spack.git" in proc.stderr
    assert "CLIMSTACK_SPACK_GIT" in proc.stderr and "fix:" in proc.stderr
    assert list(tmp_path.iterdir()) == [], "a failed clone left files in the cache"


def test_wrong_spack_version_in_the_cache_is_refused(tmp_path):
    stale = tmp_path / pins.SPACK.cache_name
    stale.mkdir()
    subprocess.run(["git", "init", "-q", str(stale)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(stale),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "not spack",
        ],
        check=True,
    )
    proc = setup(CLIMSTACK_CACHE=str(tmp_path))
    assert proc.returncode == 2
    assert str(stale) in proc.stderr and pins.SPACK.tag in proc.stderr
    assert f"rm -rf '{stale}'" in proc.stderr


def test_the_local_site_has_the_hosts_libfabric():
    """bin/setup declares the host libfabric (HOST_LIBFABRIC) in the detections' scope:
    the local site's fabric mode finds it, at the version the library itself reports, with
    the FABRIC_1.7 the image's MPICH needs (Debian 12's libfabric1 stops at FABRIC_1.6)."""
    external = climstack_setup.libfabric_external()["externals"][0]
    local = sites.get("local")
    assert local.external_prefix("libfabric") == external["prefix"]
    assert local.external_version("libfabric") == external["spec"].split("@")[1]
    library = elf.read(Path(external["prefix"]) / "libfabric.so.1")
    assert "FABRIC_1.7" in library.version_defs
