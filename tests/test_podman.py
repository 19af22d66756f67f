"""Bind plans under real podman (Debian's 4.3.1 with runc) through the plan's CDI spec:
mpi-probe in the probe image, launched on 2 ranks from outside the container as on a Cray,
loads the host MPI in bind mode; the spec's mounts arrive read-only and its variables set;
verify accepts and refuses the same programs as under Charliecloud, the image's own ld.so
asked under podman, in a container of the user's spec where `verify --cdi` judged one. A
joined launch (`bench`, Slurm jobs) runs one container per node, its ranks `podman exec`ed
into it, removed after a failure and a SIGTERM too, also one that comes while the container
is created; a Slurm job's go when it is cancelled or out of time. Every container is removed
(checked at the end by label)."""

import os
import shutil
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
import slurm_cluster
import yaml
from conftest import tree

from climstack import pins
from climstack.bind import cdi
from climstack.bind import plan as planner
from climstack.check import verify
from climstack.inputs import sites
from climstack.jobs import slurm
from climstack.launch import launch, launchers, runtimes
from climstack.launch.runtimes import podman
from climstack_dev import programs as helpers

BIN = "/opt/probe/bin"
PODMAN = runtimes.get("podman")
CHARLIECLOUD = runtimes.get("charliecloud")
MPIEXEC = launchers.given(["mpiexec.mpich", "-n", "2"])
HOSTS = {
    "debian": (helpers.debian_mpich, "MPICH Version:\t4.0.2"),
    "mpich-3.4.3": (lambda: helpers.mpich("3.4.3"), "MPICH Version:\t3.4.3"),
}

pytestmark = pytest.mark.skipif(
    not all(map(shutil.which, ("podman", "runc", "unshare"))),
    reason="needs Debian's podman and runc (bin/setup installs them)",
)


def ours() -> list[str]:
    """Our containers (by their label), running or not."""
    out = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label={podman.LABEL}", "--format", "{{.ID}}"],
        capture_output=True,
        text=True,
    )
    return out.stdout.split()


@pytest.fixture(scope="module", autouse=True)
def no_container_left():
    """No container of ours before or after: any left is removed, and the module fails."""
    before = ours()
    yield
    left = [c for c in ours() if c not in before]
    if left:
        subprocess.run(["podman", "rm", "-f", *left], capture_output=True)
    assert not left, f"containers left running: {left}"


@pytest.fixture(scope="module")
def plans(image, tmp_path_factory):
    """(podman plan, charliecloud plan) of each host MPI, written (the same plan but for
    its runtime); the Charliecloud one with its mount points in the image."""
    made = {}
    for name, (mpi, _) in HOSTS.items():
        prefix = None if name == "debian" else str(mpi().prefix)
        plan = planner.make_plan(sites.get("local"), prefix=prefix, environ={})
        on_podman = planner.write(replace(plan, runtime="podman"), tmp_path_factory.mktemp(name))
        on_ch = planner.write(plan, tmp_path_factory.mktemp(f"{name}-ch"))
        CHARLIECLOUD.prepare_image(on_ch, image)
        made[name] = on_podman, on_ch
    return made


@pytest.mark.parametrize("host", HOSTS)
def test_mpi_probe_on_two_ranks_loads_the_host_mpi_under_podman(host, image, plans):
    plan, _ = plans[host]
    mpi, expected = HOSTS[host][0](), HOSTS[host][1]
    report = verify.check(helpers.BASE_PROBE, plan, image)
    assert report.passed, report.problems
    argv = PODMAN.exec_args(plan, str(image), [helpers.BASE_PROBE])
    assert ["--device", cdi.device(plan)] == argv[argv.index("--device") :][:2]
    assert "--ipc=host" in argv and "--pid=host" in argv and "--preserve-fds=1" in argv
    proc = verify.run_probe(plan, image, helpers.BASE_PROBE, [str(mpi.bin / "mpiexec"), "-n", "2"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    probe = verify.parse_probe(proc.stdout)
    assert probe["library"] == expected and probe["ranks"] == "2"
    assert probe["loaded"] == f"{planner.LINKS_DIR}/libmpi.so.12"
    assert not verify.loaded_mismatch(plan, probe)


def test_spec_mounts_arrive_read_only_with_its_variables(image, plans):
    """What podman applied of the spec, seen from inside: mountinfo and the environment."""
    plan, _ = plans["debian"]
    script = "grep ' /opt/climstack/' /proc/self/mountinfo; echo LD=$LD_LIBRARY_PATH"
    argv = PODMAN.exec_args(plan, str(image), ["sh", "-c", script])
    before = tree(image)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    mounted = {line.split()[4]: line.split()[5] for line in proc.stdout.splitlines()[:-1]}
    assert set(mounted) == {dst for _, dst in plan.binds}
    assert all(options.split(",")[0] == "ro" for options in mounted.values()), mounted
    assert proc.stdout.splitlines()[-1] == f"LD={planner.LINKS_DIR}"
    assert tree(image) == before  # the image directory is an overlay's lower layer


@pytest.mark.parametrize(
    "program, host",
    [
        (helpers.BASE_PROBE, "debian"),
        (f"{BIN}/mpi41", "debian"),  # MPI 4.1 on MPICH 4.0.2: a missing symbol
        (f"{BIN}/mpi-probe-rpath", "debian"),  # its DT_RPATH keeps the host MPI out
        (f"{BIN}/mpi4", "mpich-3.4.3"),  # MPI 4 on Cray MPICH 8's base
    ],
)
def test_verify_gives_the_same_verdict_under_podman_as_charliecloud(program, host, image, plans):
    """The verdicts agree, and the image's own ld.so, asked under podman, agrees."""
    on_podman, on_ch = plans[host]
    by_podman = verify.check(program, on_podman, image, runtime_image=image)
    by_ch = verify.check(program, on_ch, image, runtime_image=image)
    assert by_podman.passed == by_ch.passed
    assert by_podman.verdict == by_ch.verdict
    assert [p for p in by_podman.problems if "ld.so" not in p] == [
        p.replace(on_ch.directory, on_podman.directory) for p in by_ch.problems if "ld.so" not in p
    ]
    assert by_podman.oracle == "agrees", by_podman.problems
    if program == helpers.BASE_PROBE:
        assert by_podman.ok


def test_the_oracle_runs_the_users_spec_under_podman(image, plans, tmp_path):
    """`verify --cdi` on a podman plan asks the image's ld.so in a container of the user's
    spec as written (YAML; mounts `ro,rbind`, where climstack's own add nosuid), not of one
    regenerated from the plan: the file podman is given is the user's, byte for byte, and
    a container of it has the user's mount options."""
    plan, _ = plans["debian"]
    spec = cdi.spec_of(plan)
    for mount in spec["devices"][0]["containerEdits"]["mounts"]:
        mount["options"] = ["ro", "rbind"]
    users = tmp_path / "users.yaml"
    users.write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [pins.PROJECT_ROOT / "bin" / "climstack", "verify", helpers.BASE_PROBE, "--image", image,
         "--plan", plan.directory, "--cdi", users],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the image's own ld.so: agrees" in proc.stdout and "\nverdict: ok\n" in proc.stdout
    given = list((Path(plan.directory) / "cdi").glob("given-*/*"))
    assert [g.read_bytes() for g in given] == [users.read_bytes()]
    script = ["sh", "-c", "grep ' /opt/climstack/' /proc/self/mountinfo"]
    options = {}
    for name, runs in (("users", cdi.judge(plan, users)[1]), ("own", plan)):
        out = subprocess.run(PODMAN.exec_args(runs, str(image), script), capture_output=True,
                             text=True, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr
        options[name] = {line.split()[4]: line.split()[5] for line in out.stdout.splitlines()}
        assert set(options[name]) == {dst for _, dst in plan.binds}
        assert all(o.split(",")[0] == "ro" for o in options[name].values())
    assert not any("nosuid" in o.split(",") for o in options["users"].values()), options
    assert all("nosuid" in o.split(",") for o in options["own"].values()), options


#: what each rank prints: its container (the mount namespace) and whether it has the
#: variables of separate ranks (they switch UCX's CMA off: 10x slower above 8 KiB)
WHERE = 'echo "rank $(readlink /proc/self/ns/mnt) UCX_TLS=${UCX_TLS:-}"; exec "$0"'


def ranks_seen(output: str) -> list[tuple[str, str]]:
    return [tuple(line.split()[1:3]) for line in output.splitlines() if line.startswith("rank ")]


def test_joined_ranks_share_one_container_per_launch_then_it_is_gone(plans, image, tmp_path):
    """`join`: the launch creates one container, both ranks `podman exec` into it with the
    spec's variables but not separate_env, mpi-probe loads the host MPI; without `join`
    each rank has its own. No container is left (the module's fixture checks the label)."""
    plan, _ = plans["debian"]
    argv = ["sh", "-c", WHERE, helpers.BASE_PROBE]
    seen = {}
    for join in (2, 0):
        command = launch.command(plan, PODMAN, MPIEXEC, image, argv, 2, join, str(tmp_path))
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        probe = verify.parse_probe(proc.stdout)
        assert probe["ranks"] == "2" and probe["loaded"] == f"{planner.LINKS_DIR}/libmpi.so.12"
        seen[join] = ranks_seen(proc.stdout)
    assert len(seen[2]) == 2 and len({ns for ns, _ in seen[2]}) == 1, seen
    assert {tls for _, tls in seen[2]} == {"UCX_TLS="}, "joined ranks keep UCX's CMA"
    assert len({ns for ns, _ in seen[0]}) == 2, seen  # one container per rank
    assert not ours()


def test_a_failed_or_interrupted_launch_leaves_no_container(plans, image):
    """A rank's exit status is the launch's, and its container is removed; a launch
    stopped by SIGTERM (Ctrl-C, a job's time limit) removes it too."""
    plan, _ = plans["debian"]
    failing = launch.command(plan, PODMAN, MPIEXEC, image, ["sh", "-c", "exit 3"], 2, 2)
    assert subprocess.run(failing, capture_output=True, timeout=300).returncode == 3
    assert not ours()
    waiting = launch.command(plan, PODMAN, MPIEXEC, image, ["sleep", "600"], 2, 2)
    proc = subprocess.Popen(waiting, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not ours() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ours(), "the node's container never started"
        time.sleep(2)  # the ranks inside it
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=120) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not ours(), "the interrupted launch left its container"


def test_a_slurm_job_runs_one_container_per_node_and_removes_them(plans, image, tmp_path):
    """`climstack slurm`'s script with the podman plan, 2 ranks on the 2 virtual nodes of a
    real Slurm cluster: a container per node created before the step, each rank joined
    to its node's (two containers), mpi-probe loads the host MPI through srun's PMI; none
    left when the job ends."""
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.skip(f"needs Slurm and munge (bin/setup installs them): {', '.join(missing)}")
    plan, _ = plans["debian"]
    code, output = slurm_cluster.run_step(plan, image, ["sh", "-c", WHERE, helpers.BASE_PROBE],
                                          tmp_path)  # fmt: skip
    assert code == 0, output
    probe = verify.parse_probe(output)
    assert probe["ranks"] == "2" and probe["loaded"] == f"{planner.LINKS_DIR}/libmpi.so.12"
    assert len({ns for ns, _ in ranks_seen(output)}) == 2, output
    assert not ours(), "the job left its containers"


def processes(field: int, value: int) -> list[int]:
    """The processes whose /proc/PID/stat `field` (after the name: 1 ppid, 3 session) is
    `value`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        if int(fields[field]) == value:
            found.append(int(stat.parent.name))
    return found


def test_a_launch_stopped_while_it_creates_its_container_removes_it(plans, image):
    """A SIGTERM to the launch's shell while its `podman run --detach` still creates the
    node's container: the shell's trap, set before the create, removes the container once
    it exists. (Set after it, the shell ended at once, and the container stayed.)"""
    plan, _ = plans["debian"]
    waiting = launch.command(plan, PODMAN, MPIEXEC, image, ["sleep", "600"], 2, 2)
    proc = subprocess.Popen(waiting, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not processes(1, proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert processes(1, proc.pid), "the launch never started to create its container"
        os.kill(proc.pid, signal.SIGTERM)  # the shell alone: its create goes on
        assert proc.wait(timeout=120) != 0
        deadline = time.monotonic() + 120
        while processes(3, proc.pid) and time.monotonic() < deadline:  # a create left behind
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    left = ours()
    subprocess.run(["podman", "rm", "-f", "-t", "0", *left], capture_output=True)
    assert not left, "the container created after the SIGTERM was left"


#: each rank of the jobs below: a command line no other test runs
RANK_SLEEP = ["sleep", "3607"]


def sleeping_ranks() -> list[Path]:
    want = "\0".join(RANK_SLEEP).encode() + b"\0"
    return [c for c in Path("/proc").glob("[0-9]*/cmdline") if _read(c) == want]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""  # it ended meanwhile


def job_containers(plan, job: str) -> list[str]:
    """The names of job `job`'s containers (this run's, of `plan`), running or not."""
    argv = ["podman", "ps", "-a", "--format", "{{.Names}}"]
    argv += ["--filter", f"label={podman.LABEL}={plan.directory}"]
    argv += ["--filter", f"label={podman.RUN_LABEL}={podman.RUN}"]
    names = subprocess.run(argv, capture_output=True, text=True).stdout.split()
    return [name for name in names if f"-{job}-" in name]


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.25)
    return condition()


def test_a_cancelled_or_timed_out_slurm_job_leaves_no_container(plans, image, tmp_path):
    """`climstack slurm`'s script with the podman plan, 2 ranks on 2 nodes, each sleeping,
    twice at once: one job is cancelled (`scancel`), the other reaches its time limit
    (submitted with --time=1, Slurm's least, then lowered to 0 with scontrol as an
    administrator may: the same enforcement, without a minute's wait). Slurm starts no new
    step then: each node's container goes with the step that created it, and its ranks (the
    `podman exec`ed processes, outside Slurm's reach) with it."""
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.skip(f"needs Slurm and munge (bin/setup installs them): {', '.join(missing)}")
    plan, _ = plans["debian"]
    text = slurm.script(sites.get("local"), plan, str(image), [slurm.Component(2, 2, RANK_SLEEP)])
    script = tmp_path / "job.sh"
    script.write_text(text)
    jobs = []
    try:
        with slurm_cluster.started(tmp_path / "cluster") as cluster:
            jobs += [cluster.submit(script, "--time=1"), cluster.submit(script)]
            timed, cancelled = jobs

            def all_run():
                counts = [len(job_containers(plan, job)) for job in jobs]
                return counts == [2, 2] and len(sleeping_ranks()) == 4

            assert wait_for(all_run, 120), f"the jobs never all ran\n{cluster.logs()}"
            cluster.run("scontrol", "update", f"JobId={timed}", "TimeLimit=0")
            cluster.run("scancel", cancelled)
            ended = {cancelled: "CANCELLED", timed: "TIMEOUT"}
            # slurmctld checks time limits every 30 s
            assert wait_for(lambda: {j: cluster.state(j) for j in jobs} == ended, 60)
            wait_for(lambda: not any(job_containers(plan, job) for job in jobs), 30)
            left = {ended[job]: job_containers(plan, job) for job in jobs}
            assert left == {"CANCELLED": [], "TIMEOUT": []}, "the jobs' containers stayed"
            assert wait_for(lambda: not sleeping_ranks(), 10), "the jobs' ranks still run"
    finally:
        left = [name for job in jobs for name in job_containers(plan, job)]
        if left:
            subprocess.run(["podman", "rm", "-f", "-t", "0", *left], capture_output=True)
