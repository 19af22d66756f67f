"""The image directory built here runs mpi-probe with its own MPICH, and its ELF is right."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from climstack import pins
from climstack.bind import elf
from climstack.common import cache
from climstack.image import image, image_check
from climstack_dev import images


@pytest.fixture(scope="module")
def archer2_image():
    """Built (or reused while its inputs are unchanged) in a directory of the tests' own:
    the user's image (`climstack image`, the default destination) is left alone."""
    if not all(map(shutil.which, ("ch-run", "mmdebstrap"))):
        pytest.skip("needs Debian's charliecloud and mmdebstrap (bin/setup installs them)")
    destination = images.image_dir("container-archer2")
    assert destination != image.default_destination("container-archer2")
    return image.build("container-archer2", destination)


def ch_run(root: Path, *command: str, cwd: str = "/") -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ch-run", "-c", cwd, str(root), "--", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "USER": "root"},
    )


def in_image(root: Path, path: str) -> Path:
    return image_check.resolve_in(root, Path(path))


def test_mpi_probe_runs_on_two_ranks_with_the_images_own_mpich(archer2_image):
    proc = ch_run(
        archer2_image,
        f"/opt/mpich-{image.WHEEL_MPICH}/bin/mpiexec",
        "-n",
        "2",
        f"{image.VIEW}/bin/mpi-probe",
    )
    assert proc.returncode == 0, proc.stderr
    assert "library: MPICH Version:\t3.4.3" in proc.stdout
    assert "loaded: /opt/mpich-3.4.3/lib/libmpi.so.12" in proc.stdout
    assert "ranks: 2" in proc.stdout


def test_view_executables_need_xpmem_and_use_runpath(archer2_image):
    executables = image_check.mpi_users(image_check.scan(Path(image.VIEW), archer2_image))
    assert {e.path.name for e in executables} >= {"mpi-probe"}
    for info in executables:
        assert image_check.XPMEM_SONAME in info.needed, info.path
        assert info.runpath and not info.rpath, info.path
        # the stub resolves through the executable's own RUNPATH, inside the image
        stubs = [in_image(archer2_image, d) / image_check.XPMEM_SONAME for d in info.runpath]
        found = [s for s in stubs if s.exists()]
        assert found and elf.read(found[0]).soname == image_check.XPMEM_SONAME


def test_no_library_of_the_image_searches_this_hosts_paths(archer2_image):
    """Every search path of the image's own builds lies inside the image: its
    netcdf-fortran, built from a copy of the pristine develop tree, once linked the local
    environment's stale objects, whose RPATH named this host's install tree."""
    software = archer2_image / "opt" / "software"
    libraries = [p for p in software.rglob("*.so*") if p.is_file() and not p.is_symlink()]
    assert any(p.name.startswith("libnetcdff.so") for p in libraries)
    for path in libraries:
        info = elf.try_read(path)
        for directory in (info.rpath + info.runpath) if info else []:
            assert not directory.startswith(str(pins.cache_dir())), (path, directory)
            assert directory.startswith(("/opt/", "$ORIGIN")), (path, directory)


def test_the_io_libraries_are_built_shared_only_and_hdf5_without_its_tools(archer2_image):
    """The overlay recipes (repo/packages/hdf5, netcdf-c, netcdf-fortran) build each source
    once, for the shared library; site/container builds HDF5 without h5dump and the rest."""
    software = archer2_image / "opt" / "software"
    prefixes = {
        name: next(software.glob(f"*/*/*/*/*/*/{name}-*"))
        for name in ("hdf5", "netcdf-c", "netcdf-fortran")
    }
    for name, libraries in {
        "hdf5": ("libhdf5", "libhdf5_hl", "libhdf5_fortran"),
        "netcdf-c": ("libnetcdf",),
        "netcdf-fortran": ("libnetcdff",),
    }.items():
        files = {p.name for p in prefixes[name].rglob("lib*")}
        assert {f"{lib}.so" for lib in libraries} <= files, (name, files)
        assert not [f for f in files if f.endswith(".a")], (name, files)
    hdf5_tools = {p.name for p in (prefixes["hdf5"] / "bin").iterdir()}
    assert not hdf5_tools & {"h5dump", "h5ls", "h5diff", "h5repack"}, hdf5_tools


def test_the_benchmarks_are_kept_as_built_without_xpmem(archer2_image):
    """The bind-noxpmem control: each MPI executable of the view also exists, as built, under
    image.NOXPMEM: the same DT_NEEDED but libxpmem.so.0."""
    executables = image_check.mpi_users(image_check.scan(Path(image.VIEW), archer2_image))
    assert {e.path.name for e in executables} >= {"osu_latency", "osu_allgather", "mpiBench"}
    for info in executables:
        built = elf.read(
            archer2_image / image.NOXPMEM.lstrip("/") / info.path.relative_to(archer2_image)
        )
        assert image_check.XPMEM_SONAME not in built.needed, built.path
        assert set(built.needed) == set(info.needed) - {image_check.XPMEM_SONAME}, built.path


def test_image_check_passes_inside_the_image(archer2_image):
    proc = ch_run(
        archer2_image,
        "python3",
        "-m",
        "climstack.image.image_check",
        image.VIEW,
        cwd="/opt/climstack",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout


@pytest.mark.skipif(not shutil.which("mpicc"), reason="needs Debian's mpicc (libmpich-dev)")
def test_executable_linked_with_rpath_is_reported(tmp_path):
    source = Path(__file__).parent.parent / "repo/packages/mpi-probe/mpi_probe.c"
    binary = tmp_path / "bin" / "probe-rpath"
    binary.parent.mkdir()
    subprocess.run(
        [
            "mpicc",
            "-o",
            str(binary),
            str(source),
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,/usr/lib/x86_64-linux-gnu",
        ],
        check=True,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "climstack.image.image_check", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    assert proc.returncode == 1
    assert f"FAIL {binary}" in proc.stdout
    assert "has DT_RPATH" in proc.stdout and "lacks libxpmem.so.0" in proc.stdout


def test_an_image_of_the_same_inputs_elsewhere_is_copied_not_rebuilt(
    archer2_image, tmp_path, capfd
):
    """`climstack image` into another directory copies an image built from the same inputs
    (make local's, for the tests' own) instead of building again; a stale one is not."""
    copy = image.build("container-archer2", tmp_path / "copy", twin=archer2_image)
    assert f"==> copying {archer2_image}, built from the same inputs" in capfd.readouterr().err
    assert image.inputs_stamp(copy).read_text() == image.inputs_stamp(archer2_image).read_text()
    assert relative_tree(copy) == relative_tree(archer2_image)
    stale = tmp_path / "stale"
    image.inputs_stamp(stale).parent.mkdir(parents=True)
    image.inputs_stamp(stale).write_text("another recipe\n")
    value = image.inputs_stamp(archer2_image).read_text().strip()
    entry = cache.Entry(tmp_path / "new", value, inside=image.INPUTS_STAMP)
    assert not entry._copy_twin(stale, tmp_path / "work")
    assert not (tmp_path / "work").exists()


def relative_tree(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(top, name), root)
        for top, dirs, files in os.walk(root)
        for name in dirs + files
    }
