"""Remedies for an executable whose DT_RPATH reaches its own MPI (seed 001).

DT_RPATH is searched before LD_LIBRARY_PATH, so the bound host MPI never loads. Each remedy
runs the executable unchanged, in an unchanged image, through the image's own ld.so:

- preload: `ld.so --preload "LIBS"` loads the plan's MPI libraries first (glibc >= 2.30);
  the DT_NEEDED of the same SONAME is then already satisfied, whoever's RPATH asks.
- inhibit: `ld.so --inhibit-rpath '' --library-path LINKS` ignores the executable's own
  DT_RPATH *and* DT_RUNPATH (the empty name is the main program's; a path does not match
  it): a library found only through the program's RUNPATH is then lost.
- runpath: a copy of the executable with DT_RPATH rewritten to DT_RUNPATH (patchelf),
  in the plan directory bound at REMEDY_DIR, runs in place of the original.
"""

import shutil
from dataclasses import replace
from pathlib import Path, PurePosixPath

from climstack.bind import discover, elf
from climstack.common import process, stamp
from climstack.errors import ClimstackError

REMEDIES = ("preload", "inhibit", "runpath")
#: where the plan directory's patched copies are bound in the container
REMEDY_DIR = "/opt/climstack/bind/remedy"
#: the oldest glibc whose ld.so takes the option: --preload is new in glibc 2.30 (its
#: NEWS); `--inhibit-rpath ''` measured from 2.31 on (climstack_dev/old_loaders.py: 2.31,
#: 2.36, 2.41; no older loader is reachable here)
NEEDS_GLIBC = {"preload": (2, 30), "inhibit": (2, 31)}
DEFAULT_INTERPRETER = "/lib64/ld-linux-x86-64.so.2"


def check_name(name: str | None) -> None:
    if name and name not in REMEDIES:
        raise ClimstackError(f"unknown --rpath-remedy {name}", fix=f"one of {', '.join(REMEDIES)}")


def glibc_of(libc: elf.Elf | None) -> tuple[int, ...] | None:
    """The newest GLIBC_x.y a C library defines: its release."""
    versions = [
        tuple(int(x) for x in v[len("GLIBC_") :].split("."))
        for v in (libc.version_defs if libc else ())
        if v.startswith("GLIBC_2")
    ]
    return max(versions, default=None)


def why_not(how: str, glibc: tuple | None, rpath_in: list[str], executable: str) -> str:
    """Why remedy `how` cannot help here ('' when it can): the image's glibc too old, or
    the RPATH that reaches the MPI is a library's, which only preload overrides."""
    if how in NEEDS_GLIBC:
        needed = NEEDS_GLIBC[how]
        if glibc is None:
            return "the image's glibc version is unknown"
        if glibc < needed:
            return (
                f"the image's glibc {'.'.join(map(str, glibc))} is older than "
                f"{'.'.join(map(str, needed))}, whose ld.so first takes the option"
            )
    others = [who for who in rpath_in if who != executable]
    if how in ("inhibit", "runpath") and others:
        return f"the RPATH is in {', '.join(others)}, not in the executable"
    return ""


def as_loaded(how: str | None, info: elf.Elf) -> elf.Elf:
    """The executable as ld.so reads it under the remedy: runpath's copy has DT_RUNPATH
    where the original has DT_RPATH (preload and inhibit change the search instead:
    loader.closure's `preload` and `inhibit`)."""
    if how == "runpath" and info.rpath and not info.runpath:
        return replace(info, rpath=[], runpath=list(info.rpath))
    return info


def preloads(plan, needed: set[str]) -> list[str]:
    """The plan's MPI libraries (in its links directory) that the executable's closure
    loads under any of their names: libmpi, and libmpifort only for Fortran programs."""
    links = plan.library_path[0]
    return [
        f"{links}/{next((n for n in names if n in needed), abi)}"  # as the program spells it
        for abi, names in discover.ABI_NAMES.items()
        if abi in plan.links and (abi == "libmpi.so.12" or needed & set(names))
    ]


def wrap(plan, argv: list[str], needed: set[str], interpreter: str) -> list[str]:
    """`argv` run the remedy's way (runpath: `argv` already names the patched copy)."""
    if plan.rpath_remedy == "preload":
        return [interpreter, "--preload", " ".join(preloads(plan, needed)), *argv]
    if plan.rpath_remedy == "inhibit":
        path = ":".join(plan.library_path)
        return [interpreter, "--inhibit-rpath", "", "--library-path", path, *argv]
    return argv


def patched_copy(plan, tree: Path, executable: str) -> str:
    """A copy of `executable` (read from the image files `tree`) whose DT_RPATH is now
    DT_RUNPATH, in the plan directory; its path in the container (the executable's own
    when it has no DT_RPATH to rewrite)."""
    from climstack.bind import loader

    found = loader.View(tree).resolve(executable)
    if not found:
        raise ClimstackError(
            f"{executable} is not in the image {tree}", fix="give its path inside the image"
        )
    info = elf.read(found[1])
    if not info.rpath or info.runpath:  # LD_LIBRARY_PATH comes first already
        return executable
    name = f"{stamp.digest(found[1].read_bytes(), length=10)}-{PurePosixPath(executable).name}"
    copy = Path(plan.directory) / "remedy" / name
    if not copy.exists():
        origin = str(PurePosixPath(executable).parent)  # the copy lives elsewhere
        dirs = [d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for d in info.rpath]
        work = copy.with_name(f".{name}.part")
        shutil.copy2(found[1], work)
        process.run(
            ["patchelf", "--set-rpath", ":".join(dirs), str(work)],
            f"rewriting the RPATH of a copy of {executable}",
            fix="apt-get install patchelf (bin/setup)",
        )
        work.rename(copy)
    return f"{REMEDY_DIR}/{name}"
