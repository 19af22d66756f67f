"""podman (rootful, >= 4.1) with the plan as a CDI spec (climstack.bind.cdi): `podman run
--device climstack.org/mpi=<site>` applies its mounts (read-only), variables and device nodes.
A user's spec that `verify --cdi` accepted runs as written (the oracle's variable beside it,
as `--env`). The spec stays in a spec directory of the plan's: `--cdi-spec-dir` where podman
has it (>= 4.7), else bound over /var/run/cdi in a private mount namespace (podman 4.3 reads
only /etc/cdi and /var/run/cdi). Containers have the host's IPC, PID and network namespaces
(as podman-hpc's MPI modules).

A launch whose ranks may share a container (`join`: `bench`, Slurm jobs) gets one container
per node, as podman-hpc's `shared_run`: created before the launcher starts (`sleep
infinity`), each rank a `podman exec` into it with the launcher's variables, the spec's
(exec does not apply CDI edits) and Hydra's or Slurm's PMI socket (PMI_FD) passed as fd 3;
removed when the launch ends, also on failure or a signal (a SIGKILLed launch leaves it to
`bench`'s stop, by this run's label). A Slurm job's node containers are created by a step
of their own and end with it, however Slurm ends it: scancel and the time limit start no
new step that could remove them (NODE_STEP, WATCH). Otherwise each rank (a probe, the
oracle) runs in a container of its own, `podman run`.

What a host needs beyond the defaults is found by trying (`settings`, once per image): a
runtime without cgroup v1 support (crun's "cgroups in hybrid mode") falls back to runc, a
systemd cgroup manager without systemd to cgroupfs, default ulimits above this process's
hard limits (setrlimit EPERM) to this process's own; each fallback is printed with its reason.
"""

import functools
import os
import re
import resource
import shlex
import shutil
import sys
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from climstack.bind import cdi
from climstack.common import process
from climstack.errors import ClimstackError, ToolFailure
from climstack.launch.runtimes.base import Runtime

PROGRAM = "podman"
#: the launchers' variables a rank needs (podman's --env takes a trailing *)
LAUNCHER_ENV = ("PMI_*", "MPIR_*", "HYDRA_*", "SLURM_*", "PALS_*")
#: the per-rank wrapper, a bash of the host: PMI_FD (a socket of the launcher's) moved to fd 3,
#: which `--preserve-fds=1` passes into the container (srun's is above 9, which dash's
#: redirections cannot name)
RANK_SHELL = "bash"
PMI_TO_FD3 = (
    'if [ -n "${PMI_FD:-}" ]; then exec 3<&"$PMI_FD"; PMI_FD=3; export PMI_FD; '
    "else exec 3</dev/null; fi; "
)
RANK = PMI_TO_FD3 + 'exec "$@"'
#: the node's container as its creator and its ranks name it: the launch's name, and the
#: node's under Slurm (a node's ranks share one; virtual nodes may share a host)
CONTAINER = '"$CLIMSTACK_PODMAN_CONTAINER${SLURMD_NODENAME:+-$SLURMD_NODENAME}"'
#: a launch with one container per node: the name ($0) exported to the ranks, its removal
#: ($2) trapped at exit (also after a signal) before the container is created ($1; a signal
#: meanwhile waits for it), then the launcher ("$@"), waited for in the background: a signal
#: interrupts `wait` (not a foreground command), and removing the container ends the ranks
#: in it (stdin kept, fd 4)
NODE = (
    'export CLIMSTACK_PODMAN_CONTAINER="$0"; '
    'trap "$2" EXIT; trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM; '
    'eval "$1" >/dev/null || exit; shift 2; exec 4<&0; "$@" <&4 4<&- & wait $!'
)
#: a job's node: a step of its own creates the container ($1, detached), prints "ready" and
#: waits. Its container's command (WATCH) watches this shell: once it has ended, whatever
#: ended it (srun's SIGKILL at the time limit too), the container ends its other processes
#: (the ranks that `podman exec` started: podman removes no container with exec sessions
#: alive) and itself, and conmon's cleanup (--rm) removes it. Sooner: the removal at exit
#: ($2) after scancel's SIGTERM, or the SIGUSR1 srun passes on from the script's exit (a
#: SIGTERM srun turns into SIGKILL); `wait`'s stderr: dash names the signal that ended sleep
NODE_STEP = (
    'trap \'kill ${s:-} 2>/dev/null; eval "$2"\' EXIT; trap "exit 0" HUP INT TERM USR1; '
    'eval "$1" >/dev/null || exit; echo ready; sleep infinity & s=$!; wait $s 2>/dev/null'
)
#: a node container's command: while the process $0 (host pid: --pid=host) lives, nothing;
#: then SIGKILL to every other process of the container (its mount namespace), until none is
#: left. The image needs `sh` and `sleep`
WATCH = (
    'while [ -d "/proc/$0" ]; do sleep 1; done; while :; do l=; for p in /proc/[0-9]*; do '
    '[ "$p" = /proc/$$ ] || ! [ "$p/ns/mnt" -ef /proc/$$/ns/mnt ] || l="$l ${p#/proc/}"; '
    'done; [ -n "$l" ] || exit 0; kill -9 $l 2>/dev/null; sleep 0.2; done'
)
#: a job script's end of the node step ($climstack_nodes: its srun, which passes SIGUSR1 on)
JOB_STOP = (
    '[ -z "$climstack_nodes" ] || { kill -USR1 "$climstack_nodes"; wait "$climstack_nodes"; } '
    "2>/dev/null || true"
)
#: a job script's wait for a line from each node's step (fd 9); EOF: one failed, and
#: --kill-on-bad-exit ended the others
JOB_READY = (
    'for _ in $(seq "$SLURM_JOB_NUM_NODES"); do read -r _ <&9 || { echo "climstack: a '
    "node's podman container did not start (the error above)\" >&2; exit 1; }; done; exec 9<&-"
)
#: without --cdi-spec-dir: the spec directory ($0) bound over /var/run/cdi, this launch only
SPEC_NAMESPACE = 'mkdir -p /var/run/cdi && mount --bind "$0" /var/run/cdi && exec "$@"'
#: the label of every container we start (tests remove leftovers by it): the plan's directory
LABEL = "org.climstack.plan"
#: and this process's run (RUN), by which a run removes its own leftovers, no one else's
RUN_LABEL = "org.climstack.run"
RUN = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"

#: (what podman printed, the fallback it asks for), tried in this order
FALLBACKS = (
    (re.compile(r"cgroups in hybrid mode|crun: .*cgroup", re.I), "runtime"),
    (re.compile(r"systemd|dbus", re.I), "cgroup-manager"),
    (re.compile(r"rlimit", re.I), "ulimits"),
)
#: runc's "error setting rlimit type N": RLIMIT_NPROC is 6, RLIMIT_NOFILE 7 (Linux)
RLIMITS = {"6": "nproc", "7": "nofile"}
#: the fewest files and processes a rank gets (halving stops there)
FLOOR = 1024


@dataclass(frozen=True)
class Settings:
    global_args: tuple[str, ...] = ()
    ulimits: tuple[tuple[str, int], ...] = ()  # (nofile|nproc, soft = hard)
    spec_dir_option: bool = False

    @property
    def run_args(self) -> tuple[str, ...]:
        return tuple(f"--ulimit={name}={n}:{n}" for name, n in self.ulimits)


def _own_limits() -> tuple[tuple[str, int], ...]:
    """This process's soft limits of files and processes (what it may give a child)."""
    found = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft = resource.getrlimit(which)[0]
        found.append((name, 1 << 20 if soft == resource.RLIM_INFINITY else soft))
    return tuple(found)


def fallback(found: Settings, error: str, tried: set[str]) -> tuple[Settings, str] | None:
    """The settings to try after `error`, and what changed; None: nothing left to try."""
    kind = next((k for p, k in FALLBACKS if p.search(error) and k not in tried), None)
    if kind == "runtime":
        return replace(found, global_args=found.global_args + ("--runtime", "runc")), kind
    if kind == "cgroup-manager":
        args = found.global_args + ("--cgroup-manager=cgroupfs",)
        return replace(found, global_args=args), kind
    if kind == "ulimits":
        return replace(found, ulimits=_own_limits()), kind
    which = re.search(r"rlimit type (\d+)", error)
    name = RLIMITS.get(which[1]) if which and found.ulimits else None
    limits = dict(found.ulimits)
    if name and limits[name] // 2 >= FLOOR:  # above a hard limit of podman's own: halved
        limits[name] //= 2
        return replace(found, ulimits=tuple(limits.items())), f"{name} halved"
    return None


def image_args(image: str) -> list[str]:
    """An image directory as the root file system (an overlay: it stays unchanged), else a
    registry reference, pulled where absent."""
    if Path(image).is_dir():
        path = str(Path(image).resolve())
        if ":" in path:
            raise ClimstackError(
                f"image directory {path} contains ':', which podman's --rootfs cannot carry",
                fix="move or link it to a path without ':'",
            )
        return ["--rootfs", f"{path}:O"]
    return ["--pull=missing", image]


@functools.cache
def settings(program: str, image: str) -> Settings:
    """What this host needs to run `image`: the defaults first, then each fallback that
    podman's error asks for (printed with its reason)."""
    help_text = process.run([program, "--help"], "podman --help", timeout=60).stdout
    found = Settings(spec_dir_option="--cdi-spec-dir" in help_text)
    if not found.spec_dir_option:
        print(
            f"climstack podman: {program} has no --cdi-spec-dir: the plan's spec directory is "
            "bound over /var/run/cdi in a private mount namespace",
            file=sys.stderr,
        )
    tried: set[str] = set()
    while True:
        argv = [program, *found.global_args, "run", "--rm", "--network=host"]
        argv += [*found.run_args, *image_args(image), "true"]
        proc = process.run(argv, f"podman run of {image}", timeout=300, check=False)
        if proc.returncode == 0:
            return found
        reason = (proc.stderr.strip().splitlines() or ["(no message)"])[-1][-300:]
        after = fallback(found, proc.stderr, tried)
        if after is None:
            raise ToolFailure(
                f"podman cannot run {image} here: {reason} (tried: {shlex.join(argv)})",
                fix="run as root with podman and runc installed (bin/setup), or another "
                "--runtime",
            )
        found, kind = after
        tried.add(kind)
        changed = shlex.join([*found.global_args, *found.run_args])
        print(f"climstack podman: {reason}: retrying with {changed}", file=sys.stderr)


class Podman(Runtime):
    name = "podman"
    separators = ""  # the spec is JSON: any path
    image_format = "directory"  # or a registry reference
    local = 3  # after Charliecloud and Apptainer
    read_only_binds = True  # the spec's mounts are all `ro`
    outlives_its_launch = True  # conmon keeps a container after its podman run is killed

    def settings(self, image: str) -> Settings:
        """The options this host needs (found by trying); the defaults without podman."""
        program = shutil.which(PROGRAM)
        return settings(program, str(image)) if program else Settings()

    def _spec(self, plan, found: Settings) -> tuple[list[str], list[str], dict[str, str]]:
        """(what runs podman so that it sees the spec directory, podman with its global
        options, the variables given beside the spec): the spec directory written (if
        absent; a user's spec judged by `verify --cdi`: that file as it is)."""
        directory, extra = cdi.runtime_spec(plan)
        podman, namespace = [PROGRAM, *found.global_args], []
        if found.spec_dir_option:
            podman += ["--cdi-spec-dir", str(directory)]
        else:
            namespace = ["unshare", "--mount", "--propagation", "private"]
            namespace += ["sh", "-c", SPEC_NAMESPACE, str(directory)]
        return namespace, podman, extra

    def _run_options(self, plan, found: Settings, extra: dict[str, str]) -> list[str]:
        """`podman run`'s options for a container of the plan (the spec as its device)."""
        run = ["--network=host", "--ipc=host", "--pid=host", *found.run_args]
        run += [f"--label={LABEL}={plan.directory}", f"--label={RUN_LABEL}={RUN}"]
        run += [f"--env={key}={value}" for key, value in sorted(extra.items())]
        return run + ["--device", cdi.device(plan)]

    def _parts(self, plan, image: str, cwd: str | None) -> tuple[list[str], list[str]]:
        """(one rank's `podman run` up to the image's options, the image's options), with
        the launcher's variables and its PMI socket."""
        found = self.settings(image)
        namespace, podman, extra = self._spec(plan, found)
        run = [*podman, "run", "--rm", "--preserve-fds=1", *self._run_options(plan, found, extra)]
        run += [f"--env={pattern}" for pattern in LAUNCHER_ENV]
        if cwd:  # where the program starts, and writes: writable, at its own path
            run += [f"--volume={cwd}:{cwd}", f"--workdir={cwd}"]
        return [RANK_SHELL, "-c", RANK, "climstack-rank", *namespace, *run], image_args(image)

    def _node(self, plan, image: str, command: list[str], cwd: str | None, here: bool = False,
              watch: bool = False):  # fmt: skip
        """(the shell command that creates the node's container, the one that removes it,
        each rank's command: a `podman exec` into it); the container is named by CONTAINER;
        `cwd`: the start directory, bound at its own path; `here`: $PWD at run time; `watch`:
        the container ends with the creating shell ($$, WATCH), else it sleeps."""
        found = self.settings(image)
        namespace, podman, extra = self._spec(plan, found)
        create = [*namespace, *podman, "run", "--detach", "--rm"]
        create += self._run_options(plan, found, extra)
        volume = [f"--volume={cwd}:{cwd}"] if cwd else []
        where = ' "--volume=$PWD:$PWD"' if here else ""
        create_text = f"{shlex.join([*create, *volume])}{where} --name={CONTAINER} "
        if watch:
            create_text += f'{shlex.join([*image_args(image), "sh", "-c", WATCH])} "$$"'
        else:
            create_text += shlex.join([*image_args(image), "sleep", "infinity"])
        remove = f'{shlex.join([*podman, "rm", "--force", "--time", "0"])} {CONTAINER}'
        # exec applies none of the spec's edits but its mounts (made at run): the variables
        # of joined ranks (no separate_env: UCX's CMA and proc-link shared memory stay on)
        exec_ = [PROGRAM, *found.global_args, "exec", "--preserve-fds=1"]
        exec_ += [f"--env={pattern}" for pattern in LAUNCHER_ENV]
        env = {**plan.runtime_env(joined=True), **extra}
        exec_ += [f"--env={key}={value}" for key, value in sorted(env.items())]
        exec_ += [f"--workdir={cwd}"] if cwd else []
        workdir = ' "--workdir=$PWD"' if here else ""
        rank = f'{PMI_TO_FD3}exec {shlex.join(exec_)}{workdir} {CONTAINER} "$@"'
        return (
            create_text,
            f"{remove} >/dev/null 2>&1",
            [RANK_SHELL, "-c", rank, "climstack-rank", *command],
        )

    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd: str | None = None
    ) -> list[str]:
        """One rank's `podman run` of command under the plan's spec, in a container of its
        own (`join` needs launch_args, which starts the node's container)."""
        head, image_part = self._parts(plan, str(image), cwd)
        return [*head, *image_part, *command]

    def launch_args(
        self, plan, image: str, launcher: list[str], command: list[str], join: int = 0,
        cwd: str | None = None,
    ) -> list[str]:  # fmt: skip
        """`join` > 0: the launcher in a shell that creates the node's container first and
        removes it when the launch ends; each rank joins it (`podman exec`). Shared memory
        between ranks needs no container of its own (the host's IPC and PID namespaces):
        one per node is podman-hpc's `shared_run`, and costs one `podman run` a launch."""
        if not join:
            return super().launch_args(plan, image, launcher, command, cwd=cwd)
        create, remove, rank = self._node(plan, str(image), command, cwd)
        name = f"climstack-{uuid.uuid4().hex[:12]}"
        return ["sh", "-c", NODE, name, create, remove, *launcher, *rank]

    def job_lines(
        self, plan, image: str, command: list[str], here: bool = False
    ) -> tuple[list[str], str]:
        """(lines that create one container per node of the job by a step of their own in
        the background (NODE_STEP), wait for a line from each node (through a FIFO) and end
        that step at the script's exit; each rank's `podman exec` into its node's); `here`:
        the step's directory bound at its own path, and the start there."""
        create, remove, rank = self._node(plan, image, command, None, here, watch=True)
        name = f"climstack-{uuid.uuid4().hex[:8]}-$SLURM_JOB_ID"
        step = "srun --overlap --kill-on-bad-exit=1 --ntasks-per-node=1 sh -c"
        step += f" {shlex.quote(NODE_STEP)} climstack-node"
        step += f" {shlex.quote(create)} {shlex.quote(remove)}"
        lines = [
            "# podman: one container per node, created by a step of its own and gone when it",
            "# ends (the script's exit, scancel, the time limit); the ranks join it (podman exec)",
            f'export CLIMSTACK_PODMAN_CONTAINER="{name}"',
            f"climstack_nodes=; trap {shlex.quote(JOB_STOP)} EXIT",
            'climstack_fifo="$(mktemp -d)/ready" && mkfifo "$climstack_fifo"',
            f'{step} >"$climstack_fifo" &',
            'climstack_nodes=$!; exec 9<"$climstack_fifo"; rm -r "${climstack_fifo%/*}"',
            JOB_READY,
        ]
        return lines, shlex.join(rank)

    def pull(self, reference: str, work: Path) -> Path:
        """`podman pull` into podman's storage; the reference, which `podman run` takes."""
        from climstack.launch import oci_images  # the registry client, only when pulling

        return Path(oci_images.pull_podman([PROGRAM], reference, work))

    def check_image(self, plan, image: Path) -> None:
        if not plan.directory:
            raise ClimstackError(
                "podman takes the plan as a CDI spec in the plan's directory: it has none",
                fix="write the plan with `climstack bind SITE --out DIR` and load DIR",
            )
        if "/" in str(image) and not Path(image).exists() and ":" not in str(image):
            raise ClimstackError(
                f"image {image} does not exist", fix="give an image directory or a reference"
            )
