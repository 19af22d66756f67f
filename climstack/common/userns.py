"""Make this process, as root, root of a new user namespace that maps a range of ids onto
the same ids outside (`0 0 IDS`), then let the caller exec a program in it.

`unshare --user --map-root-user` maps one id (`0 0 1`): a program in it that believes it is
root and restores files' owners (Apptainer's OCI unpacker, ch-image, tar) fails on the first
file owned by anyone else (`lchown ... invalid argument`: the id is not mapped).
`unshare --map-users=0,0,N` asks newuidmap, which refuses a range /etc/subuid does not grant.
Root needs neither: a process with CAP_SETUID and CAP_SETGID in the parent namespace may write
any map of ids mapped there. So a forked child, still outside, writes the maps of the parent
once the parent has unshared; the parent, now root in the namespace with every capability of
it, goes on to exec (it stays the same process: signals and exit statuses are the program's).
"""

import ctypes
import fcntl
import os
import sys
from pathlib import Path

from climstack.errors import ToolFailure

CLONE_NEWUSER = 0x10000000
#: the ids mapped: 0..65535, as a subordinate range of rootless podman's default size,
#: which holds every system account and group of a distribution image (nobody is 65534)
IDS = 65536


def enter(ids: int = IDS) -> None:
    """Become root of a new user namespace mapping ids 0..ids-1 to themselves; as root only."""
    if os.geteuid() != 0:
        raise ToolFailure(
            "a user namespace mapping a range of ids needs root",
            fix="run the program itself: an ordinary user needs no such namespace",
        )
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:  # outside the namespace: wait for the parent to unshare, then map it
        os.close(ready_write)
        os.read(ready_read, 1)
        try:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{os.getppid()}/{name}", "w") as file:
                    file.write(f"0 0 {ids}\n")
        except OSError:
            os._exit(1)
        os._exit(0)
    os.close(ready_read)
    libc = ctypes.CDLL(None, use_errno=True)
    failed = libc.unshare(CLONE_NEWUSER) != 0
    error = ctypes.get_errno()
    os.close(ready_write)  # the child reads end of file: unshared or not, it maps and ends
    _, status = os.waitpid(child, 0)
    if failed or status != 0:
        why = os.strerror(error) if failed else "writing its uid_map and gid_map failed"
        raise ToolFailure(
            f"cannot make a user namespace mapping ids 0-{ids - 1}: {why}",
            fix="allow user namespaces (sysctl user.max_user_namespaces > 0; on Debian "
            "kernel.unprivileged_userns_clone=1), or run as an ordinary user",
        )


def enter_with_siblings(records: Path) -> None:
    """As root: root of the user namespace of this process's siblings (the processes of its
    parent: the ranks a launcher starts on a node), made by the first of them. An ordinary
    user's ranks all run in the user's one namespace, which Apptainer's `--sharens` needs: its
    followers join the first rank's instance. The first records its pid in a file per parent
    under `records`; the others setns(2) into its namespace (root may: it owns it)."""
    records.mkdir(parents=True, exist_ok=True)
    with open(records / f"parent-{os.getppid()}", "a+") as record:
        fcntl.flock(record, fcntl.LOCK_EX)
        record.seek(0)
        first = record.read().strip()
        if first.isdigit() and _sibling(int(first)):
            _join(int(first))
            return
        enter()
        record.seek(0)
        record.truncate()
        record.write(f"{os.getpid()}\n")


def _sibling(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == os.getppid()


def _join(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    descriptor = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    try:
        if libc.setns(descriptor, CLONE_NEWUSER) != 0:
            raise ToolFailure(
                f"cannot join the user namespace of process {pid}, this one's sibling: "
                f"{os.strerror(ctypes.get_errno())}",
                fix="run as an ordinary user (one namespace for every rank), or without "
                "--sharens",
            )
    finally:
        os.close(descriptor)


def main(argv: list[str]) -> int:
    """`python3 -m climstack.common.userns PROGRAM ARGS...`: PROGRAM as root of one new
    namespace (as root), or as is (as anyone else): what an ordinary user's launcher is."""
    if not argv:
        print("usage: python3 -m climstack.common.userns PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    if os.geteuid() == 0:
        try:
            enter()
        except ToolFailure as err:
            print(f"climstack userns: error: {err}", file=sys.stderr)
            return err.exit_code
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
