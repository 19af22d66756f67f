"""One launch of N ranks (climstack.bench.scale.scale_modes.Launch), observed from outside,
three ways, each a run of its own so that one observation never slows another:

- timed: wall seconds from the launch to its end (osu_init: MPI_Init, then MPI_Finalize),
  and the slowest rank's MPI_Init as osu_init prints it;
- sampled: every 20 ms, the processes the launch started (its descendants, and a podman
  container's, which conmon holds), the SIF mounts among them (squashfuse processes), their
  mount namespaces, and the PSS of them all (/proc/PID/smaps_rollup: shared pages counted
  once across the processes that share them), each figure's peak;
- traced: its file-system metadata calls (open, stat, access, readlink and their relatives)
  under `strace -f`, sorted by where they land (CATEGORIES).
"""

import os
import re
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from climstack.bench.scale.scale_modes import BIND_ROOTS, Launch
from climstack.common import process

TIMEOUT = 300  # seconds a launch may take (32 ranks in a container each, on 2 cores: ~30)
#: the calls traced: those that look a path up (fstat of an open descriptor does not)
CALLS = ("open", "openat", "openat2", "creat", "stat", "lstat", "newfstatat", "statx",
         "access", "faccessat", "faccessat2", "readlink", "readlinkat", "execve")  # fmt: skip
#: where a call lands: for a rank, in the native build's install tree (a centre's shared
#: file system), elsewhere on the host (node-local), in the image, on the bind plan's host
#: paths, in the kernel (/proc, /sys, /dev); any other process's (launcher, runtime) calls
#: are `runtime`, those of them on the SIF or image directory `image file`
CATEGORIES = ("install tree", "host system", "image", "bind paths", "kernel", "runtime",
              "image file")  # fmt: skip
KERNEL = ("/proc", "/sys", "/dev")
#: a traced call of one process's log: its name, its path, its result (none if it did not
#: return: an execve that succeeded in another thread's place, a process killed in it)
_CALL = re.compile(r'^(\w+)\((?:AT_FDCWD, |-?\d+, )?"([^"]*)"(?:.*\) = (-?\d+))?')


@dataclass
class Footprint:
    processes: int = 0
    image_mounts: int = 0
    mount_namespaces: int = 0
    pss_kib: int = 0


@dataclass
class Observation:
    wall_s: float = 0.0
    init_max_ms: float | None = None
    footprint: Footprint = field(default_factory=Footprint)
    calls: dict = field(default_factory=dict)  # category -> calls of the whole launch


def timed(launch: Launch) -> Observation:
    start = time.monotonic()
    text = _run(launch.argv, launch).stdout
    found = re.search(r"max:\s*([\d.]+)\s*ms", text)
    return Observation(time.monotonic() - start, float(found.group(1)) if found else None)


def _run(argv, launch: Launch):
    what = f"{launch.mode} on {launch.ranks} ranks"
    return process.run(argv, what, env=launch.env, timeout=TIMEOUT)


def _processes() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent, command name, start time in clock ticks since boot)."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1]
            fields = rest.split()
            table[int(entry.name)] = (int(fields[1]), name, int(fields[19]))
    return table


def launch_tree(table, root: int, since: int) -> list[int]:
    """`root`'s descendants, and those of every conmon started since `since` (ticks): the
    processes of a podman container outlive their parent and are conmon's."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    tops = [root] + [p for p, (_, name, began) in table.items() if name == "conmon" and
                     began >= since]  # fmt: skip
    found, todo = [], list(tops)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def footprint(table, pids: list[int], host_mounts: str) -> Footprint:
    pss, namespaces = 0, set()
    for pid in pids:
        try:
            namespaces.add(os.readlink(f"/proc/{pid}/ns/mnt"))
            for line in open(f"/proc/{pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                    break
        except OSError:  # it ended meanwhile
            continue
    mounts = sum(1 for pid in pids if table.get(pid, (0, ""))[1].startswith("squashfuse"))
    return Footprint(len(pids), mounts, len(namespaces - {host_mounts}), pss)


def sampled(launch: Launch, every: float = 0.02) -> Observation:
    """Each figure's peak over the launch (the figures may peak at different moments)."""
    since = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
    host_mounts, peak, done = os.readlink("/proc/self/ns/mnt"), Footprint(), threading.Event()

    def sample():
        while not done.wait(every):
            table = _processes()
            ours = [p for p, (parent, _, _) in table.items() if parent == os.getpid()]
            pids = [p for top in ours for p in launch_tree(table, top, since)]
            now = footprint(table, pids, host_mounts)
            for name in vars(peak):
                setattr(peak, name, max(getattr(peak, name), getattr(now, name)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        observation = timed(launch)
    finally:
        done.set()
        sampler.join()
    observation.footprint = peak
    return observation


def traced(launch: Launch, logs: Path) -> Observation:
    """The launch's metadata calls (a successful call or a failed one alike: a failed open in
    each RUNPATH directory is a look-up the server answers too), by category; `logs`: a
    directory for strace's logs, one per process."""
    logs.mkdir(parents=True, exist_ok=True)
    argv = [
        "strace",
        "-f",
        "-ff",
        "-qq",
        "-e",
        f"trace={','.join(CALLS)}",
        "-o",
        str(logs / "pid"),
    ]
    observation = timed(Launch(**{**vars(launch), "argv": [*argv, *launch.argv]}))
    counts = Counter({c: 0 for c in CATEGORIES})
    for log in logs.glob("pid.*"):
        counts.update(sort_calls(log.read_text(errors="replace"), launch))
    observation.calls = dict(counts)
    shutil.rmtree(logs)  # one log per process: thousands at 32 ranks; the counts are kept
    return observation


def sort_calls(trace: str, launch: Launch) -> Counter:
    """One process's calls by category: after it execs the program, a rank's."""
    counts, rank = Counter(), False
    for line in trace.splitlines():
        call = _CALL.match(line)
        if not call:
            continue
        name, path, result = call.groups()
        if name == "execve":
            rank = rank or (path == launch.program and result in ("0", None))
            continue
        counts[_category(path, rank, launch)] += 1
    return counts


def _category(path: str, rank: bool, launch: Launch) -> str:
    if not rank:
        return "image file" if launch.image_file and path.startswith(launch.image_file) else (
            "runtime")  # fmt: skip
    if path.startswith(KERNEL):
        return "kernel"
    if launch.container:
        return "bind paths" if path.startswith(BIND_ROOTS) else "image"
    return "install tree" if path.startswith(launch.install_root) else "host system"
