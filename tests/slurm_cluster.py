"""A private Slurm cluster on loopback for the tests: munged, slurmctld and two slurmd
virtual nodes (n1, n2) on 127.0.0.1, all state in one temporary directory, free ports.

`Cluster.start()` returns once both nodes are idle; `stop()` ends every daemon it started
(by its pid) and is safe to call twice, also after a failed start. A job's steps get 2 s
between SIGTERM and SIGKILL (KillWait), and none past its time limit (OverTimeLimit).
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo")
CONF = """\
ClusterName=climstacktest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.socket
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool-%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
KillWait=2
OverTimeLimit=0
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
NodeName=n1 NodeHostname={host} NodeAddr=127.0.0.1 Port={n1_port} CPUs=2 RealMemory=2000
NodeName=n2 NodeHostname={host} NodeAddr=127.0.0.1 Port={n2_port} CPUs=2 RealMemory=2000
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
"""


def missing_binaries() -> list[str]:
    return [name for name in DAEMONS if not shutil.which(name)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    def __init__(self, directory: Path):
        self.dir = directory
        self.conf = directory / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "USER": "root"}
        self.pids: list[tuple[str, Path]] = []  # (daemon, pid file)

    def _daemon(self, name: str, argv: list[str], pid_file: Path) -> None:
        self.pids.append((name, pid_file))
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"{name} did not start: {proc.stderr or proc.stdout}")

    def start(self, timeout: float = 60) -> "Cluster":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)  # munged refuses group/world-writable directories
        (self.dir / "state").mkdir()
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self._daemon(
            "munged",
            [
                "munged",
                "--force",
                f"--socket={self.dir}/munge.socket",
                f"--key-file={key}",
                f"--pid-file={self.dir}/munged.pid",
                f"--log-file={self.dir}/munged.log",
                f"--seed-file={self.dir}/munged.seed",
            ],
            self.dir / "munged.pid",
        )
        self.conf.write_text(
            CONF.format(
                host=socket.gethostname(),
                dir=self.dir,
                ctld_port=_free_port(),
                n1_port=_free_port(),
                n2_port=_free_port(),
            )
        )
        self._daemon("slurmctld", ["slurmctld", "-f", str(self.conf)], self.dir / "slurmctld.pid")
        for node in ("n1", "n2"):
            self._daemon(
                f"slurmd {node}",
                ["slurmd", "-f", str(self.conf), "-N", node],
                self.dir / f"slurmd-{node}.pid",
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
            if states.count("idle") == 2:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"nodes not idle after {timeout} s: {states}\n{self.logs()}")

    def run(
        self, *argv: str, check: bool = True, timeout: int = 300
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=self.env, timeout=timeout, cwd=self.dir
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {proc.stderr}\n{self.logs()}")
        return proc

    def sbatch_wait(self, script: Path, timeout: int = 240) -> tuple[int, str]:
        """Submit, wait for the job to end; (exit code, its output file's text)."""
        output = script.with_suffix(".out")
        try:
            proc = self.run(
                "sbatch",
                "--parsable",
                "--wait",
                f"--output={output}",
                str(script),
                check=False,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            self.cancel_jobs()  # a job left running would outlive the test
            raise
        return proc.returncode, output.read_text() if output.exists() else proc.stderr

    def submit(self, script: Path, *options: str) -> str:
        """Submit without waiting (its output: the script's name with .out); the job id."""
        output = f"--output={script.with_suffix('.out')}"
        return self.run("sbatch", "--parsable", output, *options, str(script)).stdout.strip()

    def state(self, job: str) -> str:
        """RUNNING, CANCELLED, TIMEOUT...: the job's state while slurmctld keeps its record."""
        text = self.run("scontrol", "-o", "show", "job", job, check=False, timeout=60).stdout
        return next((w.split("=", 1)[1] for w in text.split() if w.startswith("JobState=")), "")

    def cancel_jobs(self, timeout: float = 30) -> None:
        """Cancel every job of this cluster and wait until none is left."""
        self.run("scancel", "--partition=debug", check=False, timeout=60)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", "-o", "%i", check=False, timeout=60).stdout.strip():
                return
            time.sleep(0.5)

    def logs(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text()[-1500:]}" for log in sorted(self.dir.glob("*.log"))
        )

    def stop(self) -> None:
        if any(name == "slurmctld" for name, _ in self.pids):
            self.cancel_jobs()  # jobs first: stopping slurmd would orphan their steps
        # the Slurm daemons end side by side (a few seconds each), munged, which
        # authenticates them, after them
        _terminate([pid_file for name, pid_file in self.pids if name != "munged"])
        _terminate([pid_file for name, pid_file in self.pids if name == "munged"])
        self.pids.clear()


@contextlib.contextmanager
def started(directory: Path):
    """A cluster in `directory`, up for the block, its daemons stopped after it."""
    instance = Cluster(directory)
    try:
        instance.start()
        yield instance
    finally:
        instance.stop()


def _terminate(pid_files: list[Path], timeout: float = 10) -> None:
    """SIGTERM the daemons of `pid_files`, then SIGKILL those still running after timeout."""
    pids = []
    for pid_file in pid_files:
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue
        pids.append(pid)
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = [pid for pid in pids if _alive(pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def run_step(plan, image: Path, argv: list[str], directory: Path, timeout=240) -> tuple[int, str]:
    """`argv` in `image` under `plan` as a 2-rank Slurm step (`climstack slurm`'s script
    for site local) on a cluster started in `directory`: the exit code and the output."""
    from climstack.inputs import sites
    from climstack.jobs import slurm

    text = slurm.script(sites.get("local"), plan, str(image), [slurm.Component(2, 2, argv)])
    script = directory / "step.sbatch"
    script.write_text(text)
    with started(directory / "cluster") as cluster:
        return cluster.sbatch_wait(script, timeout=timeout)
