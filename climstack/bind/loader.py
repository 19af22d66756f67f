"""The dynamic loader's search rules (ld.so(8)), applied offline to a file-system view.

A view is a root directory (the host's `/`, a synthetic tree, or an image directory) plus
bind mounts (container path -> host path), so the same code answers "what would the host
load" and "what would the container load under this bind plan". Symlinks are followed
inside the view, with the loader's hop limit, so loops end.
"""

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from climstack.bind import elf
from climstack.errors import ClimstackError

#: glibc's own libraries: always the container's (the image's C library), never bound
GLIBC = {
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libresolv.so.2",
    "libnsl.so.1",
    "libanl.so.1",
    "libmvec.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "libBrokenLocale.so.1",
}
#: trusted directories of x86_64 glibc (after ld.so.cache / ld.so.conf)
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")
MAX_HOPS = 40  # symlink hops, as the kernel allows


class View:
    """Paths as a process inside `root` (with `binds`) sees them, mapped to host paths."""

    def __init__(self, root: Path = Path("/"), binds: dict[str, Path] | None = None):
        self.root = Path(root)
        # longest container path first, so nested binds win
        self.binds = sorted(
            ((PurePosixPath(k), Path(v)) for k, v in (binds or {}).items()),
            key=lambda item: len(item[0].parts),
            reverse=True,
        )

    def _host(self, path: PurePosixPath) -> Path:
        for inside, outside in self.binds:
            if path == inside or inside in path.parents:
                return outside / path.relative_to(inside)
        return self.root / path.relative_to("/")

    def resolve(self, path: str | PurePosixPath) -> tuple[PurePosixPath, Path] | None:
        """(canonical path inside the view, host path) following symlinks in the view;
        None if it does not exist or a symlink loops."""
        current = PurePosixPath("/")
        pending = list(PurePosixPath(os.path.normpath(str(path))).parts[1:])
        hops = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                current = current.parent
                continue
            candidate = current / part
            host = self._host(candidate)
            try:
                is_link = host.is_symlink()
            except PermissionError as err:
                raise ClimstackError(
                    f"cannot look into {host.parent} (needed for {path}): " "permission denied",
                    fix="run as a user who can read it, or ask the site " "to open it",
                ) from err
            if is_link:
                hops += 1
                if hops > MAX_HOPS:
                    return None
                target = PurePosixPath(os.readlink(host))
                pending = (
                    list(target.parts[1:] if target.is_absolute() else target.parts) + pending
                )
                current = PurePosixPath("/") if target.is_absolute() else current
                continue
            if not os.path.lexists(host) and not any(
                candidate in inside.parents for inside, _ in self.binds
            ):
                return None  # (a mount point's parents exist, as the runtime makes them)
            current = candidate
        return current, self._host(current)

    def is_dir(self, path: str) -> bool:
        found = self.resolve(path)
        return bool(found) and found[1].is_dir()

    def ld_so_conf(self) -> list[str]:
        """Directories of /etc/ld.so.conf and its `include` globs, in order (read once)."""
        if getattr(self, "_ld_so_conf", None) is None:
            self._ld_so_conf = self._read_ld_so_conf()
        return self._ld_so_conf

    def _read_ld_so_conf(self) -> list[str]:
        dirs: list[str] = []

        def parse(conf: str, depth: int = 0):
            found = self.resolve(conf)
            if not found or depth > 10 or not found[1].is_file():
                return
            for line in found[1].read_text(errors="replace").splitlines():
                line = line.split("#", 1)[0].strip()
                if line.startswith("include "):
                    for pattern in line.split()[1:]:
                        pattern = pattern if pattern.startswith("/") else f"/etc/{pattern}"
                        matches = glob.glob(str(self._host(PurePosixPath(pattern))))
                        host_root = self._host(PurePosixPath(pattern).parent)
                        for match in sorted(matches):
                            parse(
                                str(
                                    PurePosixPath(pattern).parent
                                    / Path(match).relative_to(host_root)
                                ),
                                depth + 1,
                            )
                elif line.startswith("/"):
                    dirs.append(line)

        parse("/etc/ld.so.conf")
        return dirs


@dataclass
class Library:
    name: str  # as DT_NEEDED asks for it
    path: PurePosixPath  # where the loader finds it, inside the view
    real: PurePosixPath  # after symlinks, inside the view
    host: Path  # the same file on the host
    needed_by: list[str] = field(default_factory=list)
    how: str = ""  # RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.conf, default
    info: elf.Elf | None = None


@dataclass
class Closure:
    root: Library
    libraries: dict[str, Library] = field(default_factory=dict)  # by needed name
    missing: dict[str, list[str]] = field(default_factory=dict)  # name -> who needs it
    skipped: set[str] = field(default_factory=set)  # glibc: the image's own

    def check(self) -> None:
        if self.missing:
            lines = [
                f"{name} (needed by {', '.join(sorted(set(who)))})"
                for name, who in sorted(self.missing.items())
            ]
            raise ClimstackError(
                f"the loader cannot find {len(lines)} libraries of {self.root.path}: "
                + "; ".join(lines),
                fix="add their directory to LD_LIBRARY_PATH (load the module), or list it "
                "under `library_path:` in the site's bind.yaml",
            )


def expand(entry: str, origin: PurePosixPath) -> str:
    """$ORIGIN, $LIB and $PLATFORM as ld.so expands them on x86_64."""
    for token, value in (("ORIGIN", str(origin)), ("LIB", "lib64"), ("PLATFORM", "x86_64")):
        entry = entry.replace("${" + token + "}", value).replace("$" + token, value)
    return entry


def search_order(
    requester: Library, chain_rpath: list[str], ld_library_path: list[str], view: View
) -> list[tuple[str, str]]:
    """(directory, rule) in the order ld.so tries them for a DT_NEEDED of `requester`."""
    info, origin = requester.info, requester.real.parent
    order: list[tuple[str, str]] = []
    if not info.runpath:  # DT_RPATH counts only without DT_RUNPATH, inherited down the chain
        order += [(expand(d, origin), "RPATH") for d in info.rpath]
        order += [(d, "RPATH") for d in chain_rpath]
    order += [(d, "LD_LIBRARY_PATH") for d in ld_library_path if d]
    order += [(expand(d, origin), "RUNPATH") for d in info.runpath]
    order += [(d, "ld.so.conf") for d in view.ld_so_conf()]
    order += [(d, "default") for d in DEFAULT_DIRS]
    return order


def find(
    name: str, requester: Library, chain_rpath: list[str], ld_library_path: list[str], view: View
) -> Library | None:
    if "/" in name:  # a DT_NEEDED with a slash is a path, no search
        candidates = [(name, "path")]
    else:
        candidates = [
            (f"{d.rstrip('/')}/{name}", rule)
            for d, rule in search_order(requester, chain_rpath, ld_library_path, view)
        ]
    for candidate, rule in candidates:
        found = view.resolve(candidate)
        if not found or not found[1].is_file():
            continue
        info = elf.try_read(found[1])
        if info and requester.info.compatible(info):  # ld.so skips other architectures
            return Library(name, PurePosixPath(candidate), found[0], found[1], how=rule, info=info)
    return None


def load(path: str, view: View) -> Library:
    found = view.resolve(path)
    if not found:
        raise ClimstackError(
            f"{path} does not exist (or is a symlink loop) in {view.root}",
            fix="check the path; inside an image give it as the image sees it",
        )
    info = elf.read(found[1])
    return Library(PurePosixPath(path).name, PurePosixPath(path), found[0], found[1], info=info)


def closure(
    path: str,
    view: View | None = None,
    ld_library_path: list[str] | None = None,
    stop: set[str] = frozenset(),
    preload: list[str] = (),
    main=None,
) -> Closure:
    """Breadth-first DT_NEEDED closure of `path` as ld.so would load it in `view`.

    glibc's libraries are recorded as skipped (the image provides them); names in `stop`
    are resolved but not descended into. `preload`: paths loaded first (ld.so --preload),
    a DT_NEEDED of their SONAME then satisfied; `main`: how ld.so reads the program
    (an Elf -> Elf, e.g. its DT_RPATH ignored).
    """
    view = view or View()
    ld_library_path = list(ld_library_path or [])
    top = load(path, view)
    if main:
        top.info = main(top.info)
    result = Closure(root=top)
    queue = [(top, list(top.info.rpath) if not top.info.runpath else [])]
    loaded = {top.info.soname or top.name}
    for early in preload:
        library = load(early, view)
        library.how = "preload"
        library.name = library.info.soname or library.name
        result.libraries[library.name] = library
        loaded.add(library.name)
        queue.append((library, []))
    while queue:
        requester, chain = queue.pop(0)
        for name in requester.info.needed:
            if name in GLIBC:
                result.skipped.add(name)
                continue
            if name in loaded or name in result.libraries:
                if name in result.libraries:
                    result.libraries[name].needed_by.append(str(requester.path))
                continue
            library = find(name, requester, chain, ld_library_path, view)
            if library is None:
                result.missing.setdefault(name, []).append(str(requester.path))
                continue
            library.needed_by.append(str(requester.path))
            result.libraries[name] = library
            loaded.add(name)
            if library.info.soname:
                loaded.add(library.info.soname)
            if name not in stop:
                inherited = chain + (
                    [expand(d, requester.real.parent) for d in requester.info.rpath]
                    if not requester.info.runpath
                    else []
                )
                queue.append((library, inherited if not library.info.runpath else []))
    return result
