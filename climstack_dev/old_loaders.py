"""glibc dynamic loaders of several Debian releases, run explicitly as programs, and what
they accept: `--preload LIB`, and `--inhibit-rpath ''` (the empty name: the main program,
whose DT_RPATH is then ignored so that `--library-path DIR` wins).

- `loaders()`: suite -> (glibc version, its ld-linux-x86-64.so.2), each suite's `libc6`
  .deb unpacked (dpkg-deb -x) into its own cached tree; buster's is only on
  archive.debian.org, whose expired Release files need Check-Valid-Until=false.
- `rpath_program(directory)`: a program needing no libc (any ld.so runs it) whose
  DT_RPATH names one libwho.so while `--library-path` would name another.
- `measure()`: each loader's answer to four command lines; `python -m` prints it.
"""

import gzip
import re
import subprocess
import tempfile
from pathlib import Path

from climstack_dev import io_libraries

from climstack import pins
from climstack.common import atomic, process, stamp
from climstack.errors import ClimstackError

SUITES = ("buster", "bullseye", "bookworm", "trixie")
#: suites gone from the mirrors: their archive, and the keyring holding their keys
ARCHIVED = {
    "buster": (
        "http://archive.debian.org/debian",
        "/usr/share/keyrings/debian-archive-removed-keys.gpg",
    )
}
LOADER = "ld-linux-x86-64.so.2"

#: who() by a raw write(2): the library needs no libc
WHO_SOURCE = r"""
static const char message[] = "who: %s\n";
void who(void) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret)
                     : "a"(1L), "D"(1L), "S"(message), "d"(sizeof message - 1)
                     : "rcx", "r11", "memory");
}
"""
#: the main program's own entry point: who(), then exit(0) by syscall 60
PROG_SOURCE = r"""
void who(void);
void _start(void) {
    who();
    __asm__ volatile("syscall" : : "a"(60L), "D"(0L) : "rcx", "r11", "memory");
    for (;;) {}
}
"""
CFLAGS = ("-O2", "-fPIC", "-fno-stack-protector", "-nostdlib")


def _unpack_archived(suite: str, into: Path):
    """unpack_debs' download for a suite only the archive has: a private sources list
    naming it, and Release files whose Valid-Until is long past accepted."""
    uri, keyring = ARCHIVED[suite]
    with tempfile.TemporaryDirectory() as tmp:
        options = io_libraries._apt_options(Path(tmp), "/dev/null", suite)
        (Path(tmp) / "parts" / "suite.sources").write_text(
            f"Types: deb\nURIs: {uri}\nSuites: {suite}\nComponents: main\nSigned-By: {keyring}\n"
        )
        options += ["-o", "Acquire::Check-Valid-Until=false"]
        process.run(  # --error-on=any: an unreachable archive fails here, not later
            ["apt-get", *options, "update", "--error-on=any"], f"apt-get update ({suite}, {uri})"
        )
        process.run(
            ["apt-get", *options, "install", "--download-only", "--yes", "libc6"],
            f"downloading libc6 ({suite})",
            env=process.environ(DEBIAN_FRONTEND="noninteractive"),
            timeout=900,
        )
        for deb in sorted((Path(tmp) / "archives").glob("libc6_*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)


def _loader_tree(suite: str) -> Path:
    """The cached tree of `suite`'s libc6 (and what apt pulled with it)."""
    key = stamp.digest(suite, *ARCHIVED.get(suite, ()), "libc6", length=10)

    def fill(work: Path):
        if suite in ARCHIVED:
            _unpack_archived(suite, work)
        else:
            io_libraries.unpack_debs(["libc6"], work, suite=suite)

    return atomic.directory(pins.cache_dir() / "bind-tests" / f"loaders-{suite}-{key}", fill)


def _loader(tree: Path) -> Path:
    """ld-linux-x86-64.so.2 in the multiarch directory (/lib64's link is absolute: the
    host's); merged-/usr releases keep it under usr/lib."""
    for lib in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"):
        path = tree / lib / LOADER
        if path.exists() and path.resolve().is_relative_to(tree.resolve()):
            return path
    raise FileNotFoundError(f"no {LOADER} in {tree}")


def _version(tree: Path) -> str:
    """libc6's Debian version, from its changelog (ld.so --version is 2.33's)."""
    with gzip.open(tree / "usr/share/doc/libc6/changelog.Debian.gz", "rt") as changelog:
        return re.match(r"glibc \((\S+)\)", changelog.readline()).group(1)


def loaders(errors: dict | None = None) -> dict[str, tuple[str, Path]]:
    """suite -> (glibc's Debian version, its loader); a suite that cannot be downloaded is
    left out, its reason in `errors` when given."""
    found = {}
    for suite in SUITES:
        try:
            tree = _loader_tree(suite)
            found[suite] = (_version(tree), _loader(tree))
        except (ClimstackError, OSError) as error:
            if errors is not None:
                lines = str(error).strip().splitlines()
                errors[suite] = next((x for x in lines if x.startswith("E: ")), lines[-1])
    return found


def rpath_program(directory: Path) -> tuple[Path, Path, Path]:
    """(prog, rpath_dir, path_dir): two libwho.so (SONAME libwho.so) saying "who: rpath"
    and "who: path", and prog, linked against the first with DT_RPATH at its directory."""
    dirs = {name: directory / f"{name}-dir" for name in ("rpath", "path")}
    for name, lib_dir in dirs.items():
        lib_dir.mkdir(parents=True, exist_ok=True)
        source = lib_dir / "who.c"
        source.write_text(WHO_SOURCE % name)
        process.run(
            ["gcc", *CFLAGS, "-shared", "-Wl,-soname,libwho.so", "-o", lib_dir / "libwho.so"]
            + [source],
            f"compiling libwho.so ({name})",
        )
    source, prog = directory / "prog.c", directory / "prog"
    source.write_text(PROG_SOURCE)
    process.run(
        ["gcc", *CFLAGS, "-o", prog, source, f"-L{dirs['rpath']}", "-lwho"]
        + ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{dirs['rpath']}"],
        "linking prog",
    )
    return prog, dirs["rpath"], dirs["path"]


def _who(loader: Path, *arguments) -> dict:
    """Run `loader` on the arguments: its exit status and which libwho spoke (or why not)."""
    run = subprocess.run(
        [str(loader), *map(str, arguments)], capture_output=True, text=True, timeout=30
    )
    said = re.search(r"^who: (\w+)$", run.stdout, re.MULTILINE)
    return {
        "returncode": run.returncode,
        "who": said.group(1) if said else None,
        "error": run.stderr.strip().splitlines()[0] if run.stderr.strip() else "",
    }


def measure() -> dict[str, dict]:
    """suite -> glibc version and, per command line (library-path; inhibit-rpath '';
    inhibit-rpath naming prog's path, the control; preload), the loader's exit status and
    which libwho.so it loaded (or its error); or why the suite is missing."""
    errors: dict[str, str] = {}
    found = loaders(errors)
    results: dict[str, dict] = {suite: {"error": error} for suite, error in errors.items()}
    with tempfile.TemporaryDirectory() as tmp:
        prog, _, path_dir = rpath_program(Path(tmp))
        for suite, (version, loader) in found.items():
            results[suite] = {
                "version": version,
                "library-path": _who(loader, "--library-path", path_dir, prog),
                "inhibit-rpath": _who(
                    loader, "--inhibit-rpath", "", "--library-path", path_dir, prog
                ),
                "inhibit-other": _who(  # control: a name that is not the main program's
                    loader, "--inhibit-rpath", prog, "--library-path", path_dir, prog
                ),
                "preload": _who(loader, "--preload", path_dir / "libwho.so", prog),
            }
    return {suite: results[suite] for suite in SUITES if suite in results}


def _cell(result: dict) -> str:
    if result["who"]:
        return f"who: {result['who']} (rc {result['returncode']})"
    return f"rc {result['returncode']}: {result['error'][:60]}"


if __name__ == "__main__":
    columns = ("library-path", "inhibit-rpath", "inhibit-other", "preload")
    print(f"{'suite':9} {'glibc':18} " + " ".join(f"{c:24}" for c in columns))
    for suite, result in measure().items():
        if "error" in result:
            print(f"{suite:9} {'-':18} unavailable: {result['error']}")
            continue
        cells = " ".join(f"{_cell(result[c]):24}" for c in columns)
        print(f"{suite:9} {result['version']:18} {cells}")
