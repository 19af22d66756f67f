"""Generated job scripts, run through a real local Slurm (two virtual nodes on loopback),
each rank inside ch-run with the host MPI bound in, including a heterogeneous step."""

import os
import shutil
import subprocess

import pytest
import slurm_cluster
from conftest import cpus_alone

from climstack import pins
from climstack.bind import loader
from climstack.bind import plan as plans
from climstack.check import container_smoke
from climstack.errors import ClimstackError
from climstack.image.image import VIEW
from climstack.inputs import sites
from climstack.jobs import slurm
from climstack.launch import runtimes
from climstack.launch.runtimes import apptainer
from climstack_dev import cray_tree, foreign_image
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

PROBE = "/opt/probe/bin/mpi-probe"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = slurm_cluster.missing_binaries() + [
        b for b in ("ch-run", "mmdebstrap") if not shutil.which(b)
    ]
    if missing:
        pytest.skip(
            f"needs {', '.join(missing)} (Debian slurm-wlm, munge, charliecloud, "
            "mmdebstrap: bin/setup installs them)"
        )
    with slurm_cluster.started(tmp_path_factory.mktemp("slurm") / "cluster") as instance:
        yield instance


def plan_for(mode, image, tmp_path):
    plan = plans.write(plans.make_plan(sites.get("local"), mode=mode, environ={}), tmp_path / mode)
    CHARLIECLOUD.prepare_image(plan, image)
    return plan


def submit(cluster, text, tmp_path, name):
    script = tmp_path / f"{name}.sh"
    script.write_text(text)
    return cluster.sbatch_wait(script)


def test_bind_mode_job_on_two_nodes(cluster, image, tmp_path):
    plan = plan_for("bind", image, tmp_path)
    text = slurm.script(sites.get("local"), plan, str(image), [slurm.Component(2, 2, [PROBE])])
    assert "srun --mpi=pmi2 --cpu-bind=cores --nodes=2 --ntasks=2 ch-run" in text
    code, output = submit(cluster, text, tmp_path, "bind")
    assert code == 0, output
    assert "library: MPICH Version:\t4.0.2" in output and "ranks: 2" in output
    assert f"loaded: {plans.LINKS_DIR}/libmpi.so.12" in output


def test_parity_preflight_runs_on_the_first_node_and_stops_a_job_that_lost_providers(
    cluster, image, tmp_path
):
    """`--parity`: the job first traces mpi-probe natively and in the container with srun; a
    plan without the UCX modules' link loses providers and the job stops before its step."""
    native = helpers.compile_probe(helpers.debian_mpich(), tmp_path / "native" / "mpi-probe")
    plan = plan_for("bind", image, tmp_path)
    components = [slurm.Component(2, 2, [PROBE])]

    def script(made):
        local = sites.get("local")
        return slurm.script(
            local, made, str(image), components, parity_native=str(native), parity_probe=PROBE
        )

    text = script(plan)
    assert (
        "parity --plan=" in text
        and "'--launcher=srun --mpi=pmi2 --nodes=1 --ntasks=2 --overcommit'" in text
    )
    code, output = submit(cluster, text, tmp_path, "parity")
    assert code == 0, output
    assert "parity: ok" in output and "ucx:ib" in output and "ranks: 2" in output

    broken = plans.make_plan(sites.get("local"), environ={})
    del broken.links["ucx"]
    text = script(plans.write(broken, tmp_path / "broken"))
    code, output = submit(cluster, text, tmp_path, "parity-broken")
    assert code != 0 and "LOST PROVIDER: ucx:ib" in output
    assert "pingpong" not in output.split("parity: FAILED")[1]  # the job step never ran


def test_heterogeneous_step_shares_one_comm_world(cluster, image, tmp_path):
    plan = plan_for("bind", image, tmp_path)
    components = [slurm.Component(1, 1, [PROBE]), slurm.Component(1, 1, [PROBE])]
    text = slurm.script(sites.get("local"), plan, str(image), components)
    assert text.count("#SBATCH hetjob") == 1 and "--het-group=1" in text
    assert "#SBATCH --export=ALL" in text
    code, output = submit(cluster, text, tmp_path, "het")
    assert code == 0, output
    assert "ranks: 2" in output and "library: MPICH Version:\t4.0.2" in output


def test_hybrid_mode_job_uses_the_images_mpi(cluster, image, tmp_path):
    plan = plan_for("hybrid", image, tmp_path)
    text = slurm.script(sites.get("local"), plan, str(image), [slurm.Component(2, 2, [PROBE])])
    code, output = submit(cluster, text, tmp_path, "hybrid")
    assert code == 0, output
    assert "library: MPICH Version:      5.0.2" in output and "ranks: 2" in output


def test_apptainer_job_written_by_the_cli(cluster, image, tmp_path):
    """`climstack bind --runtime apptainer` then `climstack slurm`: the job's exports carry
    the plan to `apptainer exec` on each rank (the provided Apptainer on this machine)."""
    tool = str(pins.PROJECT_ROOT / "bin" / "climstack")
    plan_dir, job = tmp_path / "plan", tmp_path / "job.sh"
    for args in (
        ["bind", "local", "--runtime", "apptainer", "--out", plan_dir],
        [
            "slurm",
            "local",
            "--plan",
            plan_dir,
            "--image",
            image,
            "--nodes",
            "2",
            "--ntasks",
            "2",
            "--output",
            job,
            "--command",
            helpers.BASE_PROBE,
        ],
    ):
        proc = subprocess.run([tool, *map(str, args)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    text = job.read_text()
    assert "export APPTAINER_BIND=" in text
    program = f"{apptainer.on_this_machine()} exec --sharens {image} {helpers.BASE_PROBE}"
    assert f"--ntasks=2 {program}" in text
    code, output = cluster.sbatch_wait(job)
    assert code == 0, output
    assert "library: MPICH Version:\t4.0.2" in output and "ranks: 2" in output
    assert f"loaded: {plans.LINKS_DIR}/libmpi.so.12" in output


def test_only_a_program_that_starts_mpi_shares_a_container(archer2_image, tmp_path):
    """`climstack slurm` writes `--sharens` for a program that calls MPI_Init (its first rank
    waits there for every follower), not for one that never does (ncdump: it loads MPI
    through parallel NetCDF): its followers could come after the first rank has ended."""
    tool = str(pins.PROJECT_ROOT / "bin" / "climstack")
    plan_dir = tmp_path / "plan"
    made = subprocess.run([tool, "bind", "local", "--runtime", "apptainer", "--out", plan_dir],
                          capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    sif = container_smoke.target("container-archer2", "apptainer", archer2_image)
    for program, shared in ((container_smoke.PROBE, True), (f"{VIEW}/bin/ncdump", False)):
        job = subprocess.run([tool, "slurm", "local", "--plan", plan_dir, "--image", sif,
                              "--ntasks", "2", "--command", program],
                             capture_output=True, text=True)  # fmt: skip
        assert job.returncode == 0, job.stderr
        assert (" exec --sharens " in job.stdout) is shared, job.stdout


def test_an_apptainer_job_mounts_the_sif_once_per_node(cluster, archer2_image, tmp_path):
    """The job's `apptainer exec --sharens`: the ranks srun starts on a node share one
    container and one SIF mount (one root file system device per node), where without it
    each rank mounts its own (the route `bench scale` measured growing by one per rank).
    Each rank prints its root's device, then runs the image's mpi-probe on the host MPI:
    an MPI program, whose first rank waits in MPI_Init until every follower has joined."""
    plan = plans.write(
        plans.make_plan(sites.get("local"), mode="bind", runtime="apptainer", environ={}),
        tmp_path / "plan",
    )
    sif = container_smoke.target("container-archer2", "apptainer", archer2_image)
    rank = 'echo "root: $SLURMD_NODENAME $(stat -c %d /)"; exec ' + container_smoke.PROBE
    text = slurm.script(
        sites.get("local"), plan, str(sif), [slurm.Component(2, 4, ["sh", "-c", rank])]
    )
    assert f"{apptainer.on_this_machine()} exec --sharens {sif} sh -c" in text
    devices = {}
    for name, job in (("shared", text), ("per-rank", text.replace(" exec --sharens ", " exec "))):
        code, output = submit(cluster, job, tmp_path, name)
        assert code == 0, output
        assert "library: MPICH Version:\t4.0.2" in output and "ranks: 4" in output, output
        roots = [line.split()[1:] for line in output.splitlines() if line.startswith("root: ")]
        assert len(roots) == 4 and {node for node, _ in roots} == {"n1", "n2"}, output
        devices[name] = {node: {d for n, d in roots if n == node} for node in ("n1", "n2")}
    assert all(len(found) == 1 for found in devices["shared"].values()), devices
    assert all(len(found) == 2 for found in devices["per-rank"].values()), devices


def test_export_none_is_refused_for_heterogeneous_jobs(image, tmp_path):
    plan = plans.make_plan(sites.get("local"), environ={})
    with pytest.raises(ClimstackError, match="hang with --export=NONE"):
        slurm.script(
            sites.get("local"),
            plan,
            "img",
            [slurm.Component(1, 1, ["a"]), slurm.Component(1, 1, ["b"])],
            export="NONE",
        )


def test_cray_site_scripts_use_cray_shasta_and_the_sites_runtime(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc for the synthetic Cray tree")
    root = cray_tree.cray_tree(tmp_path / "root")
    # Gaea's module environment (LD_LIBRARY_PATH) points at this tree's libfabric and xpmem
    gaea_env = {
        "LD_LIBRARY_PATH": "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64:"
        "/opt/cray/xpmem/2.6.2-2.5_2.22/lib64"
    }
    for site, account, prefix, environ, runtime in (  # SingularityCE has no --sharens
        ("archer2", "--account=[budget code]", None, {}, "singularity exec"),
        ("gaea-c5", "--clusters=c5", cray_tree.CRAY_MPICH, gaea_env, "apptainer exec --sharens"),
    ):
        plan = plans.write(
            plans.make_plan(
                sites.get(site), view=loader.View(root), prefix=prefix, environ=environ
            ),
            tmp_path / site,
        )
        text = slurm.script(
            sites.get(site),
            plan,
            "/work/n02/app.sif",
            [
                slurm.Component(2, 256, ["/opt/view/bin/atmos"]),
                slurm.Component(1, 64, ["/opt/view/bin/ocean"]),
            ],
        )
        assert (
            "srun --mpi=cray_shasta --cpu-bind=cores --nodes=2 --ntasks=256 "
            f"--het-group=0 {runtime} /work/n02/app.sif /opt/view/bin/atmos" in text
        )
        assert ": --mpi=cray_shasta" in text and f"#SBATCH {account}" in text
        assert "export SINGULARITY_BIND=" in text
        assert "export SINGULARITYENV_LD_LIBRARY_PATH=/opt/climstack/bind/lib" in text
        # SingularityCE (ARCHER2) reads no APPTAINER* variables; Apptainer reads both
        assert ("export APPTAINER_BIND=" in text) == runtime.startswith("apptainer")
        if site == "archer2":  # the published job script's setup, in order
            assert (
                "module load cray-mpich-abi\nexport SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK"
                in text
            )
        assert text.count(f"#SBATCH {account}") == 2  # every het component gets them
        proc = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
        assert proc.returncode == 0, proc.stderr


def test_cli_preflight_refuses_an_executable_the_host_cannot_run(image, tmp_path):
    plan = plan_for("bind", image, tmp_path)
    climstack = str(pins.PROJECT_ROOT / "bin" / "climstack")
    argv = [climstack, "slurm", "local", "--plan", plan.directory, "--image", str(image)]
    refused = subprocess.run(
        [*argv, "--command", "/opt/probe/bin/mpi41"],
        capture_output=True,
        text=True,
        env={**os.environ, "USER": "root"},
    )
    assert refused.returncode == 2 and "MPI_Status_set_source" in refused.stderr
    written = subprocess.run(
        [
            *argv,
            "--output",
            str(tmp_path / "job.sh"),
            "--component",
            f"1x1 {helpers.BASE_PROBE}",
            "--component",
            f"1x1 {helpers.BASE_PROBE}",
        ],
        capture_output=True,
        text=True,
    )
    assert written.returncode == 0, written.stderr
    job = tmp_path / "job.sh"
    assert os.access(job, os.X_OK) and written.stdout == f"wrote {job}\n"
    text = job.read_text()
    assert text.startswith("#!/bin/bash\n") and text.count("#SBATCH hetjob") == 1
    assert "#SBATCH --export=ALL" in text and text.count(f" -- {helpers.BASE_PROBE}") == 2
    assert "--het-group=0" in text and "\n  : --mpi=pmi2" in text and "--het-group=1" in text
    assert f"--bind={plan.directory}/lib:{plans.LINKS_DIR}" in text  # the plan, on ch-run
    syntax = subprocess.run(["bash", "-n", str(job)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr


@cpus_alone
def test_bench_job_scripts_run_on_the_local_cluster(cluster, tmp_path):
    """`climstack bench local --emit`: the comparisons' scripts, as a centre gets them, run
    through Slurm (every mode, one repeat, 2 ranks); their .out files report every mode."""
    from climstack.bench.results import collect
    from climstack.bench.run import local
    from climstack.image import image
    from climstack.stack import environments, install

    install.install(environments.resolve("local"))  # the native builds (a no-op when installed)
    image_dir = image.build(local.IMAGE, image.default_destination(local.IMAGE))
    jobs = tmp_path / "jobs"
    proc = subprocess.run(
        [pins.PROJECT_ROOT / "bin" / "climstack", "bench", "local", "--emit", jobs]
        + ["--repeats", "1", "--image", image_dir],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("mpibench-xpmem", "osu-latency"):
        # alone they take 15-35 s; once, with the CPUs held alone, mpiBench's Allreduce at
        # 32 KiB ran 8x slower in bind-noxpmem than natively (busy-polling ranks on a noisy
        # 2-vCPU machine) and the job passed 240 s: the timeout guards against a hang only
        code, output = cluster.sbatch_wait(jobs / f"{name}.sh", timeout=600)
        assert code == 0, output[-3000:]
    records, failures, problems = collect.read_paths(sorted(jobs.glob("*.out")))
    assert failures == [] and problems == []
    assert {(r.benchmark, r.mode) for r in records} == {
        ("mpibench", "native"),
        ("mpibench", "bind-noxpmem"),
        ("mpibench", "bind"),
        ("osu", "native"),
        ("osu", "bind"),
        ("osu", "hybrid"),
    }
    assert {r.runtime for r in records if r.mode != "native"} == {"charliecloud"}


# last in the module: the cluster stops (~8 s) in its teardown, beside the other worker's
# tests, not in that of the cpus_alone test above
def test_a_timed_out_job_is_cancelled(cluster, tmp_path):
    """sbatch --wait gives up after its timeout; the job must not outlive the test."""
    script = tmp_path / "sleep.sh"
    script.write_text("#!/bin/bash\nsleep 600\n")
    with pytest.raises(subprocess.TimeoutExpired):
        cluster.sbatch_wait(script, timeout=5)
    assert cluster.run("squeue", "-h", "-o", "%i").stdout.strip() == ""


def test_an_rpath_remedy_carries_into_the_job_step(cluster, image, tmp_path):
    """The foreign image's RPATH'd probe (tests/test_rpath_remedies.py) in a Slurm step on
    two nodes: the script runs it through the image's ld.so with the host MPI preloaded."""
    foreign = tmp_path / "foreign"
    subprocess.run(["cp", "-al", str(foreign_image.foreign_image()), str(foreign)], check=True)
    made = plans.make_plan(sites.get("local"), environ={}, rpath_remedy="preload")
    plan = plans.write(made, tmp_path / "preload")
    CHARLIECLOUD.prepare_image(plan, foreign)
    step = [slurm.Component(2, 2, ["/opt/foreign/bin/probe-rpath"])]
    text = slurm.script(sites.get("local"), plan, str(foreign), step)
    assert f"/lib64/ld-linux-x86-64.so.2 --preload {plans.LINKS_DIR}/libmpich.so.12" in text
    code, output = submit(cluster, text, tmp_path, "remedy")
    assert code == 0, output
    assert f"loaded: {plans.LINKS_DIR}/libmpich.so.12" in output and "ranks: 2" in output
