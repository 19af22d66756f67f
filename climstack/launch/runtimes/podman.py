"""podman (rootful, >= 4.1) with the plan as a CDI spec (climstack.bind.cdi): `podman run
--device climstack.org/mpi=<site>` applies its mounts (read-only), variables and device nodes.
A user's spec that `verify --cdi` accepted runs as written (the oracle's variable beside it,
as `--env`). The spec stays in a spec directory of the plan's: `--cdi-spec-dir` where podman
has it (>= 4.7), else bound over /var/run/cdi in a private mount namespace (podman 4.3 reads
only /etc/cdi and /var/run/cdi). Each rank runs in its own container, with the host's IPC,
PID and network namespaces (shared memory between ranks, as podman-hpc's MPI modules), the
launcher's variables, and Hydra's or Slurm's PMI socket (PMI_FD) passed as fd 3.

What a host needs beyond the defaults is found by trying (`settings`, once per image): a
runtime without cgroup v1 support (crun's "cgroups in hybrid mode") falls back to runc, a
systemd cgroup manager without systemd to cgroupfs, default ulimits above this process's
hard limits (setrlimit EPERM) to this process's own; each fallback is printed with its reason.
"""

import functools
import re
import resource
import shlex
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from climstack.bind import cdi
from climstack.common import process
from climstack.errors import ClimstackError, ToolFailure
from climstack.launch.runtimes.base import Runtime

PROGRAM = "podman"
#: the launchers' variables a rank needs (podman's --env takes a trailing *)
LAUNCHER_ENV = ("PMI_*", "MPIR_*", "HYDRA_*", "SLURM_*", "PALS_*")
#: the per-rank wrapper: PMI_FD (a socket of the launcher's) moved to fd 3, which
#: `--preserve-fds=1` passes into the container
RANK = (
    'if [ -n "${PMI_FD:-}" ]; then exec 3<&"$PMI_FD"; PMI_FD=3; export PMI_FD; '
    'else exec 3</dev/null; fi; exec "$@"'
)
#: without --cdi-spec-dir: the spec directory ($0) bound over /var/run/cdi, this launch only
SPEC_NAMESPACE = 'mkdir -p /var/run/cdi && mount --bind "$0" /var/run/cdi && exec "$@"'
#: the label of every container we start (tests remove leftovers by it)
LABEL = "org.climstack.plan"

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
    local = 0  # not yet in container-smoke and bench local (they need `pull`)
    read_only_binds = True  # the spec's mounts are all `ro`
    outlives_its_launch = True  # conmon keeps a container after its podman run is killed

    def settings(self, image: str) -> Settings:
        """The options this host needs (found by trying); the defaults without podman."""
        program = shutil.which(PROGRAM)
        return settings(program, str(image)) if program else Settings()

    def _parts(self, plan, image: str, cwd: str | None) -> tuple[list[str], list[str]]:
        """(the command up to the image's options, the image's options): the spec directory
        written (if absent; a user's spec judged by `verify --cdi`: that file as it is, the
        plan's other variables beside it), the wrappers, podman's options."""
        directory, extra = cdi.runtime_spec(plan)
        found = self.settings(image)
        wrapper = ["sh", "-c", RANK, "climstack-rank"]
        podman = [PROGRAM, *found.global_args]
        if found.spec_dir_option:
            podman += ["--cdi-spec-dir", str(directory)]
        else:
            wrapper += ["unshare", "--mount", "--propagation", "private"]
            wrapper += ["sh", "-c", SPEC_NAMESPACE, str(directory)]
        run = [*podman, "run", "--rm", "--network=host", "--ipc=host", "--pid=host"]
        run += [*found.run_args, "--preserve-fds=1", f"--label={LABEL}={plan.directory}"]
        run += [f"--env={pattern}" for pattern in LAUNCHER_ENV]
        run += [f"--env={key}={value}" for key, value in sorted(extra.items())]
        run += ["--device", cdi.device(plan)]
        if cwd:  # where the program starts, and writes: writable, at its own path
            run += [f"--volume={cwd}:{cwd}", f"--workdir={cwd}"]
        return [*wrapper, *run], image_args(image)

    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd: str | None = None
    ) -> list[str]:
        """One rank's `podman run` of command under the plan's spec; one container per rank
        (`join` is ignored: the host's IPC namespace already shares memory)."""
        head, image_part = self._parts(plan, str(image), cwd)
        return [*head, *image_part, *command]

    def job_lines(
        self, plan, image: str, command: list[str], here: bool = False
    ) -> tuple[list[str], str]:
        """(no lines: the command carries the spec, the per-rank command); `here`: the
        step's directory bound at its own path, and the start there."""
        head, image_part = self._parts(plan, image, None)
        where = ' "--volume=$PWD:$PWD" "--workdir=$PWD"' if here else ""  # at run time
        return [], f"{shlex.join(head)}{where} {shlex.join([*image_part, *command])}"

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
