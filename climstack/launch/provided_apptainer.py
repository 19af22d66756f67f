"""Apptainer for machines without one: the pinned release (PIN, 1.5.3) built from its source
with the machine's Go into the user cache, once per inputs (about 7 minutes and 670
CPU-seconds on 2 cores; never at a centre, which runs its own). `bin/apptainer ARGS` runs it.

Built as an unprivileged user's Apptainer is (no setuid starter, no network plugins, no
seccomp, no subuid library): images run in user namespaces, SIFs are mounted with
squashfuse. As root it runs as root of a user namespace of its own: Apptainer's privileged
route asks for every capability, and a host that withholds one from root (this machine keeps
back CAP_SYS_RESOURCE) gets "Requesting capability set ... while permitted capability set
is ..." instead of a container. In the namespace it has them all, and builds, execs and
mounts as an ordinary user's would. The namespace maps ids 0-65535 onto themselves
(climstack.common.userns), not root alone: Apptainer there still counts as root and restores
each pulled file's owner, which must be mapped (`/etc/gshadow` is group shadow's). With
`--sharens`, the ranks of one parent share one such namespace, as an ordinary user's ranks
share theirs: each in its own, the followers could not join the first rank's instance.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

from climstack import pins
from climstack.common import cache, clones, golang, process, progress, stamp, userns
from climstack.errors import ClimstackError

PIN = pins.GitPin(
    name="apptainer",
    url_variable="CLIMSTACK_APPTAINER_GIT",
    default_url="https://github.com/apptainer/apptainer.git",
    tag="v1.5.3",
    commit="6a76317a87c4eae10f52c7805965756a919291d7",
)
VERSION = PIN.tag.lstrip("v")
#: an unprivileged user's Apptainer: what it needs to run images, nothing it cannot use
CONFIGURE = ("--without-suid", "--without-network", "--without-seccomp", "--without-libsubid")
#: where it goes (the prefix is compiled in: the configuration and helpers are found there)
HOME = "apptainer"
#: the prefix this checkout's setup built or found, recorded beside the Python that runs
#: bin/apptainer: an image module's wrapper runs under its user's cache, not the publisher's
LINK = pins.PROJECT_ROOT / ".venv" / "apptainer"
#: as root, where the first rank of each parent records the namespace its siblings join
SIBLINGS = Path(tempfile.gettempdir()) / f"climstack-userns-{os.getuid()}"


def entry(toolchains: tuple[str, ...] = ()) -> cache.Entry:
    """Its install prefix in the cache, the key of its inputs inside it: the release, its
    options, Go's settings and the toolchains' versions (golang.toolchains)."""
    key = stamp.digest(
        PIN.commit, *CONFIGURE, *map("=".join, sorted(golang.ENV.items())), *toolchains
    )
    prefix = pins.cache_dir().absolute() / HOME / VERSION  # compiled in: absolute
    return cache.Entry(prefix, key, inside=".climstack-inputs")


def built() -> Path | None:
    """The apptainer command bin/setup built, whatever toolchains it was built with (asking
    them at every start would cost each rank a `go version`): the one this checkout's .venv
    records (LINK), so a caller of another cache finds it too, else the cache's; None
    before."""
    for prefix in (LINK, entry().path):
        program = prefix / "bin" / "apptainer"
        if (prefix / entry().inside).is_file() and program.is_file():
            return program.resolve()
    return None


def record(prefix: Path) -> None:
    """LINK -> `prefix`, replaced in one rename (only beside a .venv: a checkout's)."""
    if LINK.parent.is_dir():
        temporary = LINK.with_name(f".{LINK.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(prefix)
        os.replace(temporary, LINK)


def ensure() -> Path:
    """The install prefix, built once per inputs (a clone of the tag, mconfig, make, make
    install)."""
    go = golang.go(f"Apptainer {VERSION} (the project's, for a machine without one)")
    made = entry(golang.toolchains(go))
    if made.current():
        record(made.path)
        return made.path
    for tool in ("git", "make", "gcc"):
        if not shutil.which(tool):
            raise ClimstackError(
                f"`{tool}` not found: it builds the provided Apptainer",
                fix="apt-get install git build-essential (bin/setup does, as root)",
            )

    def fill(work: Path):
        scratch = work.parent
        source, dest = scratch / "source", scratch / "dest"
        env = process.environ(
            PATH=f"{Path(go).parent}:{os.environ.get('PATH', '')}",
            GIT_TERMINAL_PROMPT="0",
            **golang.ENV,
            **golang.caches(scratch),
        )
        clones.clone(PIN, source)
        (source / "VERSION").write_text(f"{VERSION}\n")  # a clone without tags' describe
        build = source / "builddir"
        steps = (
            (
                ["./mconfig", *CONFIGURE, "-b", str(build), "-p", str(made.path)],
                "mconfig",
                f"install Go >= 1.25 and a C toolchain (apt-get install build-essential); "
                f"{go} is the Go it found",
            ),
            (["make", "-C", str(build), f"-j{os.cpu_count() or 1}"], "make", golang.PROXY_FIX),
            (
                ["make", "-C", str(build), "install", f"DESTDIR={dest}"],
                "make install",
                f"check the space free under {scratch}",
            ),
        )
        for command, what, fix in steps:
            process.run(
                command, f"apptainer {VERSION}: {what}", cwd=source, env=env, timeout=3600, fix=fix
            )
        os.replace(dest / made.path.relative_to("/"), work)

    with progress.step(f"building Apptainer {VERSION} from source (the project's; once)"):
        for stale in made.path.parent.glob("sid*"):  # the Debian sid root filesystem of before
            shutil.rmtree(stale, ignore_errors=True)
        record(made.build(fill))
        return made.path


def command(argv: list[str]) -> list[str]:
    """The command line that runs `apptainer argv` (as root: inside `userns.enter()`)."""
    program = built()
    if not program:
        raise ClimstackError(
            f"no `apptainer` on PATH and the provided one is not built yet ({entry().path})",
            fix=f"run {pins.PROJECT_ROOT}/bin/setup (it builds it in the user cache), or "
            "load your site's apptainer module",
        )
    return [str(program), *argv]


def main(argv=None) -> int:
    try:
        args = command(sys.argv[1:] if argv is None else argv)
        if os.geteuid() == 0 and "--sharens" in args:  # the ranks of one parent: one namespace
            userns.enter_with_siblings(SIBLINGS)
        elif os.geteuid() == 0:
            userns.enter()
    except ClimstackError as err:
        print(f"apptainer (climstack): error: {err}", file=sys.stderr)
        return err.exit_code
    os.execv(args[0], args)


if __name__ == "__main__":
    sys.exit(main())
