"""Apptainer for machines without one: Debian's apptainer (in sid only; it needs glibc >= 2.38)
run in an unprivileged Charliecloud container of a sid root filesystem that bin/setup makes
once. `bin/apptainer ARGS` is `apptainer ARGS` in that container.

The host stays visible at its own paths, except under the directories the sid system itself
occupies (/usr, /etc, /lib, ...). The whole host root is also mounted at /host, and the
wrapper rewrites what Apptainer must find on the host there: the sources of bind requests
(-B/--bind, APPTAINER_BIND, SINGULARITY_BIND) and image paths.
"""

import os
import shutil
import sys
from pathlib import Path

from climstack import pins
from climstack.common import cache, process, progress, stamp
from climstack.errors import ClimstackError

PACKAGES = tuple(
    "apptainer squashfs-tools squashfuse fuse3 fuse2fs fuse-overlayfs gocryptfs uidmap fakeroot"
    " tzdata".split()
)
SUITE = "sid"
#: the archive's sid Release file can be past its Valid-Until date
APT_OPTIONS = ('Acquire::Check-Valid-Until "false"',)
HOST = "/host"
#: top-level directories of the sid system: the host's are reached through HOST
OWN = frozenset("bin boot dev etc lib lib32 lib64 libx32 proc run sbin sys usr var".split())
BIND_VARIABLES = ("APPTAINER_BIND", "SINGULARITY_BIND")
#: subcommands whose positional arguments (before the command to run) are host paths
IMAGE_COMMANDS = {
    "exec": 1,
    "run": 1,
    "shell": 1,
    "test": 1,
    "inspect": 1,
    "run-help": 1,
    "build": 2,
    "pull": 1,
}
#: Apptainer as root in ch-run's namespace, which maps no other ids, fails to chown an OCI
#: layer's files (`lchown ... invalid argument`); as an ordinary user it unpacks rootless
UNPRIVILEGED = {"pull": ("--uid=65534", "--gid=65534")}
#: options of those subcommands that take a value as the next argument
VALUE_OPTIONS = set(
    "-B --bind --env --env-file -H --home --pwd -W --workdir -o --overlay --mount --build-arg"
    " --build-arg-file --app -S --scratch --security --network --network-args --hostname"
    " --fusemount --bind-path".split()
)


def rootfs() -> cache.Entry:
    """The sid root filesystem with Apptainer, as a cache entry (its stamp inside it)."""
    key = stamp.digest(SUITE, *PACKAGES, *APT_OPTIONS, length=12)
    return cache.Entry(pins.cache_dir() / "apptainer" / SUITE, key, inside=".climstack-inputs")


def mmdebstrap(target: Path, variant: str, packages, what: str) -> None:
    """A Debian SUITE root filesystem in `target` (an empty directory)."""
    options = [f"--aptopt={option}" for option in APT_OPTIONS]
    process.run(
        [
            "mmdebstrap",
            f"--variant={variant}",
            *options,
            f"--include={','.join(packages)}",
            SUITE,
            target,
        ],
        f"mmdebstrap of {what}",
        timeout=1800,
    )


def ensure_rootfs() -> Path:
    """The sid root filesystem with Apptainer, made once (mmdebstrap, ~20 s)."""
    entry = rootfs()
    if entry.current():
        return entry.path
    for tool, package in (("mmdebstrap", "mmdebstrap"), ("ch-run", "charliecloud")):
        if not shutil.which(tool):
            raise ClimstackError(
                f"`{tool}` not found: it makes and runs the provided Apptainer",
                fix=f"apt-get install {package} (bin/setup does, as root)",
            )

    def fill(work: Path):
        work.mkdir()
        mmdebstrap(
            work, "apt", PACKAGES, f"Debian {SUITE} with Apptainer"
        )  # Apptainer bind-mounts both into every container and fails without them
        (work / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
        (work / "etc/localtime").unlink(missing_ok=True)
        shutil.copy2(work / "usr/share/zoneinfo/Etc/UTC", work / "etc/localtime")
        (work / HOST.lstrip("/")).mkdir()

    with progress.step(f"making the provided Apptainer (Debian {SUITE} in ch-run, once)"):
        for stale in entry.path.parent.glob(f"{SUITE}-*"):  # the keyed names of before
            shutil.rmtree(stale, ignore_errors=True)
        return entry.build(fill)


def outside(path: str) -> str:
    """Where a host path is inside the container."""
    top = path.lstrip("/").split("/", 1)[0]
    return f"{HOST}{path}" if path.startswith("/") and top in OWN else path


def bind_list(value: str) -> str:
    """SRC[:DST[:OPTS]],... with each host SRC made visible (DST defaults to SRC)."""
    rewritten = []
    for item in value.split(","):
        src, sep, rest = item.partition(":")
        dst = rest if sep else src
        rewritten.append(f"{outside(src)}:{dst}" if outside(src) != src else item)
    return ",".join(rewritten)


def arguments(argv: list[str]) -> list[str]:
    """The apptainer arguments with bind sources and image paths rewritten."""
    out, index = list(argv), 0
    while index < len(out) and out[index].startswith("-"):  # global options
        index += 1
    if index == len(out) or out[index] not in IMAGE_COMMANDS:
        return out
    positionals, index = IMAGE_COMMANDS[out[index]], index + 1
    while index < len(out) and positionals:
        arg = out[index]
        if arg in ("-B", "--bind") and index + 1 < len(out):
            out[index + 1] = bind_list(out[index + 1])
            index += 2
        elif arg.startswith(("--bind=", "-B=")):
            name, value = arg.split("=", 1)
            out[index] = f"{name}={bind_list(value)}"
            index += 1
        elif arg in VALUE_OPTIONS:
            index += 2
        elif arg.startswith("-"):
            index += 1
        else:
            out[index] = outside(arg)
            positionals, index = positionals - 1, index + 1
    return out


def command(argv: list[str], environ: dict) -> tuple[list[str], dict]:
    """The ch-run command line and environment that run `apptainer argv`."""
    root = rootfs().path
    if not (root / "usr/bin/apptainer").exists():
        raise ClimstackError(
            "no `apptainer` on PATH and the provided one is not made yet",
            fix=f"run {pins.PROJECT_ROOT}/bin/setup (it makes it in the user cache), or "
            "load your site's apptainer module",
        )
    binds = [f"--bind=/:{HOST}"]
    for entry in sorted(os.listdir("/")):
        host = Path("/", entry)
        if entry in OWN or entry == HOST.lstrip("/") or host.is_symlink() or not host.is_dir():
            continue
        (root / entry).mkdir(exist_ok=True)  # a mount point for a host-only directory
        binds.append(f"--bind={host}")
    env = process.with_user(environ)
    for name in BIND_VARIABLES:
        if env.get(name):
            env[name] = bind_list(env[name])
    cwd = f"--cd={outside(os.getcwd())}"  # relative paths stay relative to it
    user = UNPRIVILEGED.get(next((a for a in argv if not a.startswith("-")), ""), ())
    command = ["ch-run", *binds, *user, cwd, str(root), "--", "apptainer", *arguments(argv)]
    return command, env


def main(argv=None) -> int:
    try:
        args, env = command(sys.argv[1:] if argv is None else argv, dict(os.environ))
    except ClimstackError as err:
        print(f"apptainer (climstack): error: {err}", file=sys.stderr)
        return 2
    os.execvpe(args[0], args, env)


if __name__ == "__main__":
    sys.exit(main())
