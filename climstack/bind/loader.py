"""The dynamic loader's search rules (ld.so(8), glibc's elf/dl-load.c), applied offline
to a file-system view (climstack.bind.view): the link map of a process, every object from
where and by which rule, so the same code answers "what would the host load" and "what
would the container load under this bind plan, with this remedy". Tested against the real
ld.so (tests/test_loader_oracle.py); `climstack verify` asks the image's own ld.so too.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from climstack.bind import elf
from climstack.bind.view import View
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
#: search_order's entry for ld.so's cache (a file, not a directory): glibc_rules.Rules.cached
CACHE = "(ld.so.cache)"


@dataclass
class Library:
    name: str  # as DT_NEEDED asks for it
    path: PurePosixPath  # where the loader finds it, inside the view
    real: PurePosixPath  # after symlinks, inside the view
    host: Path  # the same file on the host
    needed_by: list[str] = field(default_factory=list)
    how: str = ""  # RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.conf, default, preload
    info: elf.Elf | None = None
    parent: "Library | None" = field(default=None, repr=False)  # glibc's l_loader
    origin: PurePosixPath | None = None  # $ORIGIN: the directory it was found in
    whose: str = ""  # the object whose DT_RPATH or DT_RUNPATH found it

    def own_origin(self) -> PurePosixPath:
        return self.origin or self.path.parent


@dataclass
class Closure:
    root: Library
    libraries: dict[str, Library] = field(default_factory=dict)  # by needed name, load order
    missing: dict[str, list[str]] = field(default_factory=dict)  # name -> who needs it
    skipped: set[str] = field(default_factory=set)  # glibc: the image's own
    aliases: dict[str, str] = field(default_factory=dict)  # other name -> libraries key

    def get(self, name: str) -> "Library | None":
        """The object loaded for DT_NEEDED `name`, whatever name it was loaded under."""
        if name in self.libraries:
            return self.libraries[name]
        if name in self.aliases:
            return self.libraries.get(self.aliases[name], self.root)
        return next((o for o in self.libraries.values() if o.info.soname == name), None)

    @property
    def objects(self) -> list[Library]:
        """The link map in load order (glibc's global scope): the program first."""
        return [self.root, *self.libraries.values()]

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
                "under `bind: library_path:` in the site's site.yaml",
            )


@dataclass(frozen=True)
class Rules:
    """How ld.so was started: `ld_library_path` (or --library-path), its entries as given
    (an empty one is the working directory `cwd`); `inhibit`: the program's own DT_RPATH
    *and* DT_RUNPATH ignored (`--inhibit-rpath ''`: glibc's cache_rpath checks the list
    for both); `explicit`: run as `ld.so PROGRAM`, so $ORIGIN of the program is the
    directory it was named in, not /proc/self/exe's."""

    ld_library_path: tuple[str, ...] = ()
    inhibit: bool = False
    explicit: bool = False
    cwd: str = "/"


def _rpath(obj: Library, root: Library, rules: Rules, system) -> list[str]:
    """An object's own DT_RPATH as searched: none when it has DT_RUNPATH (glibc then drops
    DT_RPATH when it reads the dynamic section) or when it is inhibited."""
    if obj.info.runpath or (rules.inhibit and obj is root):
        return []
    return [system.expand(d, str(obj.own_origin())) for d in obj.info.rpath]


def search_order(
    requester: Library, root: Library, rules: Rules, view: View
) -> list[tuple[str, str, str]]:
    """(directory, rule, whose) in the order ld.so tries them for a DT_NEEDED of
    `requester` (glibc's _dl_map_object): without its own DT_RUNPATH, the DT_RPATH of it and
    of every object up its chain of loaders to the program; LD_LIBRARY_PATH ($ORIGIN: the
    program's); its own DT_RUNPATH; the cache (CACHE: for a NODEFLIB requester, none of
    its entries in a system directory); the system search path, unless the requester is
    NODEFLIB. `whose`: the object whose
    DT_RPATH or DT_RUNPATH names the directory. Each directory is tried with the image's
    hwcaps subdirectories first (find)."""
    system = view.glibc(root.info.machine)
    order: list[tuple[str, str, str]] = []
    if not requester.info.runpath:
        obj = requester
        while obj is not None:
            order += [(d, "RPATH", str(obj.path)) for d in _rpath(obj, root, rules, system)]
            obj = obj.parent
    origin = str(root.own_origin())
    order += [(system.expand(d, origin), "LD_LIBRARY_PATH", "") for d in rules.ld_library_path]
    if not (rules.inhibit and requester is root):
        mine, whose = str(requester.own_origin()), str(requester.path)
        order += [(system.expand(d, mine), "RUNPATH", whose) for d in requester.info.runpath]
    order.append((CACHE, "ld.so.cache", ""))  # a NODEFLIB requester: not its system dirs
    if not requester.info.nodeflib:
        order += [(d, "default", "") for d in system.system_dirs]
    return order


def candidates(name: str, requester, root, rules: Rules, view: View):
    """(path, rule, whose) of every file ld.so tries for `name`, in order."""
    if "/" in name:  # a DT_NEEDED with a slash is a path, no search
        yield name, "path", ""
        return
    system = view.glibc(root.info.machine)
    for directory, rule, whose in search_order(requester, root, rules, view):
        if directory == CACHE:
            if system.cache is not None:
                path = system.cached(name)
                if path and not (requester.info.nodeflib and system.in_system_dir(path)):
                    yield path, rule, whose
                continue
            for conf in view.ld_so_conf():  # no cache read: what ldconfig would cache
                yield f"{conf.rstrip('/')}/{name}", "ld.so.conf", ""
            continue
        for sub in system.subdirs:  # relative (an empty entry too): named so, found in cwd
            yield os.path.join(directory, sub, name), rule, whose


def find(name: str, requester: Library, root: Library, rules: Rules, view: View) -> Library | None:
    for candidate, rule, whose in candidates(name, requester, root, rules, view):
        found = view.resolve(os.path.join(rules.cwd, candidate))
        if not found or not found[1].is_file():
            continue
        info = elf.try_read(found[1])
        if info and requester.info.compatible(info):  # ld.so skips other architectures
            path = PurePosixPath(os.path.normpath(candidate))
            library = Library(name, path, found[0], found[1], how=rule, info=info)
            library.parent, library.whose = requester, whose
            return library
    return None


def find_one(name: str, requester: Library, view: View, ld_library_path=()) -> Library | None:
    """Where `requester` (loaded alone) would find `name`."""
    return find(name, requester, requester, Rules(tuple(ld_library_path)), view)


def load(path: str, view: View) -> Library:
    found = view.resolve(path)
    if not found:
        raise ClimstackError(
            f"{path} does not exist (or is a symlink loop) in {view.root}",
            fix="check the path; inside an image give it as the image sees it",
        )
    info = elf.read(found[1])
    return Library(PurePosixPath(path).name, PurePosixPath(path), found[0], found[1], info=info)


def _same_file(host: Path, objects) -> "Library | None":
    """A loaded object that is this very file (glibc compares device and inode)."""
    try:
        stat = host.stat()
    except OSError:
        return None
    for obj in objects:
        try:
            other = obj.host.stat()
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (stat.st_dev, stat.st_ino):
            return obj
    return None


def closure(
    path: str,
    view: View | None = None,
    ld_library_path: list[str] | None = None,
    stop: set[str] = frozenset(),
    preload: list[str] = (),
    main=None,
    inhibit: bool = False,
    explicit: bool = False,
    cwd: str = "/",
) -> Closure:
    """The link map of `path` as ld.so builds it in `view`: breadth first, each DT_NEEDED
    searched by the rules of its requester (search_order), a name already loaded (as a
    DT_NEEDED name or a SONAME) or a file already loaded not loaded again.

    glibc's libraries are recorded as skipped (the image provides them); names in `stop`
    are resolved but not descended into. `preload`: paths loaded first (ld.so --preload);
    `main`: how ld.so reads the program (an Elf -> Elf: the RUNPATH copy); `inhibit`,
    `explicit`: see Rules.
    """
    view = view or View()
    entries = tuple(ld_library_path or ())
    entries = entries if ":".join(entries) else ()  # an empty LD_LIBRARY_PATH is none
    rules = Rules(entries, inhibit, explicit or inhibit or bool(preload), cwd)
    top = load(path, view)
    if main:
        top.info = main(top.info)
    top.origin = top.path.parent if rules.explicit else top.real.parent
    result = Closure(root=top)
    queue = [top]
    names = {top.info.soname} - {""}  # what a DT_NEEDED matches without a search
    for early in preload:
        library = load(early, view)
        library.how, library.parent = "preload", top
        library.name = early
        result.libraries[early] = library
        names |= {library.info.soname} - {""}
        queue.append(library)
    while queue:
        requester = queue.pop(0)
        for name in requester.info.needed:
            if name in GLIBC:  # the image's own: only a NODEFLIB object can miss them
                missed = requester.info.nodeflib and not find(name, requester, top, rules, view)
                if missed and name not in result.skipped:
                    result.missing.setdefault(name, []).append(str(requester.path))
                result.skipped.add(name)
                continue
            known = _loaded(result, name, names)
            if known is not None:
                known.needed_by.append(str(requester.path))
                continue
            library = find(name, requester, top, rules, view)
            if library is None:
                result.missing.setdefault(name, []).append(str(requester.path))
                continue
            same = _same_file(library.host, result.objects)
            if same is not None:  # another name of a loaded file
                result.aliases[name] = same.name
                same.needed_by.append(str(requester.path))
                continue
            library.needed_by.append(str(requester.path))
            result.libraries[name] = library
            names |= {library.info.soname} - {""}
            if name not in stop:
                queue.append(library)
    return result


def _loaded(result: Closure, name: str, names: set[str]) -> "Library | None":
    """The loaded object a DT_NEEDED `name` matches (its first name, an alias, a SONAME)."""
    if name in result.libraries:
        return result.libraries[name]
    if name in result.aliases:
        return result.libraries.get(result.aliases[name], result.root)
    if name in names:
        for obj in result.objects:
            if obj.info.soname == name:
                result.aliases[name] = obj.name
                return obj
    return None
