"""What a run stopped at its timeout leaves outside its process group, removed before the
run is tried again (climstack.bench.run.runner.again_if_hung calls a mode's `stop`). Under
podman, killing the launch's process group kills the launcher and the `podman run`
clients only: each rank's conmon runs in a session of its own and the container under it,
so a rank hung in MPI_Finalize would keep running beside the retry. They are found by the
labels every container carries (climstack.launch.runtimes.podman): its plan's (LABEL) and
this process's run (RUN_LABEL), so that another run's containers of the same plan stay;
removed, and waited for until no conmon of theirs is left."""

import time
from pathlib import Path

from climstack.common import process
from climstack.errors import ToolFailure
from climstack.launch.runtimes import podman

#: how long conmon may take to exit once its container is removed
CONMON_EXIT_S = 30


def podman_containers(value: str | None, global_args=(), run: str = podman.RUN) -> list[str]:
    """The full ids of the containers of the run `run` (this process's by default), running
    or not; `value`: only those of that plan (labelled `podman.LABEL=value`)."""
    argv = [podman.PROGRAM, *global_args, "ps", "-aq", "--no-trunc"]
    argv += ["--filter", f"label={podman.RUN_LABEL}={run}"]
    argv += ["--filter", f"label={podman.LABEL}={value}"] if value else []
    return process.run(argv, "podman ps", timeout=60).stdout.split()


def conmons(ids: list[str]) -> list[int]:
    """The live conmon processes of the containers `ids` (their command line names the id)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # it ended meanwhile
        if words and words[0].endswith(b"conmon") and any(i.encode() in words for i in ids):
            found.append(int(cmdline.parent.name))
    return found


def stop_podman(value: str | None, global_args=(), run: str = podman.RUN) -> None:
    """Remove this run's containers of the plan `value` (None: of any plan; a hung run's
    ranks) and wait until their conmon processes have exited; ToolFailure naming them if
    they do not. Another run's containers are never touched, whatever their plan."""
    ids = podman_containers(value, global_args, run)
    if not ids:
        return
    argv = [podman.PROGRAM, *global_args, "rm", "--force", "--ignore", "--time", "0", *ids]
    process.run(argv, "podman rm of a hung run's containers", timeout=120)
    deadline = time.monotonic() + CONMON_EXIT_S
    while (left := conmons(ids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left or (left := podman_containers(value, global_args, run)):
        raise ToolFailure(
            f"a hung run's podman containers or their conmon still running: {left}",
            fix=f"podman rm --force {' '.join(ids)}; kill the conmon processes left",
        )
