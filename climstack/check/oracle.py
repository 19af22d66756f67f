"""The loader as oracle: the image's own ld.so lists what it loads for a program under the
plan (its binds, environment and RPATH remedy) without running any of the program's code
(LD_TRACE_LOADED_OBJECTS=1, or `ld.so --list` where the remedy runs the program through
ld.so), and that list is compared with the model's link map (climstack.bind.loader)."""

import os
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from climstack.bind import loader
from climstack.common import process
from climstack.errors import ClimstackError
from climstack.launch import launch, runtimes

#: a line of ld.so's list: `name => path (0x...)`, `name => not found`, `path (0x...)`
LINE = re.compile(r"^\s*(?P<name>\S+)(?: => (?P<path>.+?))?(?: \(0x[0-9a-f]+\))?\s*$")
#: where `ld.so --list` stops at a library it cannot find (LD_TRACE lists it `not found`)
STOPPED = re.compile(r"error while loading shared libraries: (\S+): cannot open shared object")
#: what a runtime of image directories mounts over (ch-run needs them to exist)
SYSTEM_MOUNTS = ("dev", "proc", "sys", "tmp", "home", "mnt")
#: the answers of an ld.so that was asked and listed
ASKED = ("agrees", "disagrees")
REPORT_BUG = "a bug of climstack's loader model: please report it with this output"


@dataclass
class Listing:
    objects: dict[str, str | None]  # name -> path (None: not found)
    stopped: str = ""  # the library whose absence stopped `ld.so --list`


def listing(text: str, errors: str = "") -> Listing:
    """What ld.so lists (the C library's own objects and the vDSO left out, as the model
    leaves them out), or the library it stopped at (`ld.so --list` stops at the first it
    cannot find; LD_TRACE_LOADED_OBJECTS lists it `not found` and goes on)."""
    stopped = STOPPED.search(errors)
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        match = LINE.match(line)
        if not match or "statically linked" in line or "not a dynamic" in line:
            continue
        name, path = match["name"], match["path"]
        base = PurePosixPath(name).name
        if base in loader.GLIBC or base.startswith(("linux-vdso", "linux-gate")):
            continue
        found[name] = None if path == "not found" else (path or name)
    return Listing(found, stopped[1] if stopped else "")


def modelled(closure: loader.Closure) -> dict[str, str | None]:
    """The model's answer in the listing's terms: name -> the path it was found at."""
    # a name one object did not find and a later one did: listed found, as ld.so's trace
    found: dict[str, str | None] = dict.fromkeys(
        n for n in closure.missing if n not in loader.GLIBC
    )
    found.update({n: str(lib.path) for n, lib in closure.libraries.items()})
    return found


def differences(closure: loader.Closure, listed: Listing, view: loader.View) -> list[str]:
    """Where the model and ld.so disagree, comparing the files (symlinks followed)."""
    if listed.stopped:
        first = next(iter(closure.missing), "")
        if first == listed.stopped:
            return []
        ours = f"{first} is the first library not found" if first else "every library is found"
        return [f"the model says {ours}, ld.so stops at {listed.stopped} (not found)"]

    def real(path):  # a relative path (an empty LD_LIBRARY_PATH entry's) as ld.so names it
        found = view.resolve(path) if path and path.startswith("/") else None
        return str(found[0]) if found else path

    model, lines = modelled(closure), []
    for name in sorted(set(model) | set(listed.objects)):
        ours = model.get(name, "(not loaded)")
        its = listed.objects.get(name, "(not loaded)")
        if real(ours) != real(its):
            lines.append(
                f"{name}: the model says {ours or 'not found'}, ld.so {its or 'not found'}"
            )
    return lines


def command(plan, image: Path, executable: str, interpreter: str) -> list[str]:
    """The program's argv asking ld.so for the list instead of running it (the remedy's
    ld.so gets --list; a program run directly gets LD_TRACE_LOADED_OBJECTS)."""
    argv = launch.remedied(plan, image, [executable])
    if argv[0] == interpreter and len(argv) > 1:
        return [argv[0], "--list", *argv[1:]]
    return argv


def ask(
    plan, image: Path, tree: Path, executable: str, closure: loader.Closure, through: str = ""
) -> tuple[str, list[str]]:
    """("agrees" | "not asked: why" | ..., [problems]) of running the image's ld.so under
    the plan with the plan's runtime and comparing its list with `closure`; `image` as the
    runtime takes it, `tree` its files. A library (`executable`, as a dlopen would load it)
    is listed by `ld.so --list` of the ld.so `through`, its program's interpreter."""
    runtime = runtimes.get(plan.runtime)
    interpreter = through or closure.root.info.interpreter or ""
    if not interpreter:
        return "not asked: the program has no ELF interpreter (not dynamically linked)", []
    target = Path(image)
    if runtime.image_format == "directory" and not target.is_dir():
        target = Path(tree)  # a SIF for a runtime of directories: its files, unpacked here
        for point in SYSTEM_MOUNTS:  # left out of the unpacked SIF (device nodes), or absent
            (target / point).mkdir(exist_ok=True)
        runtime.prepare_image(plan, target)
    if through:
        argv = [through, "--list", executable]
    else:
        argv = command(plan, target, executable, interpreter)
    traced = replace(plan, env={**plan.env, "LD_TRACE_LOADED_OBJECTS": "1"})
    host = runtime.exec_args(traced, str(target), argv)
    if not (shutil.which(host[0]) or Path(host[0]).is_file()):
        return f"not asked: no {host[0]} on this host", []
    try:
        runtime.check_image(plan, target)
        proc = process.run(
            host,
            f"the image's ld.so listing {executable}",
            env={**os.environ, **runtime.env(False)},
            timeout=120,
            check=False,
        )
    except ClimstackError as err:
        return "failed", [f"the image's ld.so could not be asked: {err.message} (fix: {err.fix})"]
    listed = listing(proc.stdout, proc.stderr)
    if proc.returncode and not (listed.objects or listed.stopped):
        tail = (proc.stderr or proc.stdout).strip()[-400:]
        return "failed", [f"the image's ld.so could not list {executable}: {tail}"]
    planned = loader.View(Path(tree), {dst: Path(src) for src, dst in plan.binds})
    lines = differences(closure, listed, planned)
    if lines:
        return "disagrees", [
            f"the image's own ld.so disagrees with climstack's model of it ({REPORT_BUG}): "
            + "; ".join(lines)
        ]
    return "agrees", []
