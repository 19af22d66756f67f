"""The search rules of a file system's own glibc, asked of its own programs rather than
assumed: its ld.so prints, in one `LD_DEBUG=libs` listing, the system search path, the
subdirectories it tries under every directory (glibc-hwcaps, and before glibc 2.37 the
legacy ones: tls, the platform, hwcap names) and what $LIB and $PLATFORM expand to; this
host's ldconfig reads its /etc/ld.so.cache (`ldconfig -p -C FILE`). The ld.so runs here,
on this host's kernel and CPU, as it would in a container (under a refused CDI spec
nothing of the image runs: View(ask=False)). Where it cannot run here (none, another
architecture, not executable), the model's defaults stand in and `Rules.source` says so.
"""

import os
import re
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError

#: the ELF interpreter of each machine, as PT_INTERP names it
INTERPRETERS = {
    "EM_X86_64": "/lib64/ld-linux-x86-64.so.2",
    "EM_AARCH64": "/lib/ld-linux-aarch64.so.1",
}
#: ldconfig's flag of each machine's libraries in `ldconfig -p` ("libc6,x86-64")
CACHE_FLAGS = {"EM_X86_64": "x86-64", "EM_AARCH64": "AArch64"}
#: the defaults when no ld.so can be asked: x86_64 RHEL's trusted directories, the cache
#: modelled as a scan of ld.so.conf's directories (what ldconfig would have cached)
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")
#: the directory whose expansion tells $LIB, $PLATFORM and the subdirectories
MARKED = "/@climstack-lib/$LIB/@climstack-platform/$PLATFORM/@climstack-end"
EXPANDED = re.compile(r"^/@climstack-lib/(.+)/@climstack-platform/(.+)/@climstack-end$")
SEARCH = re.compile(r"search path=(?P<dirs>.*?)\s+\((?P<why>[^)]+)\)\s*$")
CACHED = re.compile(r"^\s+(?P<name>\S+) \((?P<flags>[^)]*)\) => (?P<path>\S+)$")
#: an entry's hwcap in `ldconfig -p`: a glibc-hwcaps subdirectory, or legacy bits
HWCAP = re.compile(r'hwcap: (?:"(?P<named>[^"]+)"|0x(?P<bits>[0-9a-f]+))')
#: a dynamic string token as glibc takes it (elf/dl-load.c is_dst, _dl_dst_substitute):
#: ${NAME}, or $NAME not followed by a character of an identifier ($LIBX, $ORIGIN_ are
#: no tokens); a $ of no token stays as it is; one pass, left to right
TOKEN = re.compile(r"\$(?:\{(ORIGIN|PLATFORM|LIB)\}|(ORIGIN|PLATFORM|LIB)(?![A-Za-z0-9_]))")
#: ldconfig's bit of each legacy hwcap subdirectory (< 2.37 elf/ldconfig.c path_hwcap,
#: sysdeps/x86/dl-procinfo.c: hwcap names, platforms from bit 48, tls bit 63)
LEGACY_BITS = {"x86_64": 1, "avx512_1": 2, "haswell": 50, "xeon_phi": 51, "tls": 63}


@dataclass(frozen=True)
class Rules:
    system_dirs: tuple[str, ...] = DEFAULT_DIRS
    subdirs: tuple[str, ...] = ("",)  # tried under every directory, in order; "" itself
    lib: str = "lib64"
    platform: str = "x86_64"
    #: name -> [(glibc-hwcaps subdirectory or "", legacy hwcap bits, path)] in the cache's
    #: order; None: no cache read (modelled)
    cache: dict[str, list[tuple[str, int, str]]] | None = field(default=None, hash=False)
    source: str = "climstack's defaults"
    #: the rules that stood in for the glibc's own, each with why ('' for none): a verdict
    #: on them is the model's alone (check.verdict)
    stand_in: str = ""

    def cached(self, name: str) -> str | None:
        """The path ld.so takes from its cache for `name` (elf/dl-cache.c search_cache):
        the glibc-hwcaps entry of the highest priority it searches, whatever its directory;
        without one, the entry whose legacy bits it supports (legacy_bits). Of equals, the
        first in the cache's order (`ldconfig -p` keeps it: the most legacy bits first)."""
        entries = (self.cache or {}).get(name, [])
        named = [
            (self.subdirs.index(f"glibc-hwcaps/{hwcap}"), path)
            for hwcap, _, path in entries
            if hwcap and f"glibc-hwcaps/{hwcap}" in self.subdirs
        ]
        if named:  # the first of the best priority: ties go by the cache's order
            return min(named, key=lambda entry: entry[0])[1]
        legacy = self.legacy_bits
        return next((p for hwcap, bits, p in entries if not hwcap and not bits & ~legacy), None)

    @property
    def legacy_bits(self) -> int:
        """The legacy hwcap bits of cache entries ld.so takes: tls always, and those of the
        legacy subdirectories it searches (the platform, the hwcap names of this CPU)."""
        names = {
            p for s in self.subdirs if not s.startswith("glibc-hwcaps/") for p in s.split("/")
        }
        return sum(1 << bit for name, bit in LEGACY_BITS.items() if name in names | {"tls"})

    def in_system_dir(self, path: str) -> bool:
        """Is `path` under the system search path (what NODEFLIB forbids, cached or not)?"""
        return any(path.startswith(d.rstrip("/") + "/") for d in self.system_dirs)

    def expand(self, entry: str, origin: str) -> str:
        """$ORIGIN, $LIB and $PLATFORM (and their ${...} forms) as this ld.so expands them
        (TOKEN: glibc's _dl_dst_substitute)."""
        values = {"ORIGIN": origin, "LIB": self.lib, "PLATFORM": self.platform}
        return TOKEN.sub(lambda token: values[token[1] or token[2]], entry)


def of(host_ldso: Path | None, host_cache: Path | None, machine: str, why: str = "") -> Rules:
    """The rules of the ld.so at `host_ldso` (a file on this host, inside an image) and the
    cache at `host_cache` (None: the image has none); the defaults, saying why, where it
    cannot be asked."""
    if host_ldso is None:
        why = f"climstack's defaults: {why or 'no ld.so'}"
        return Rules(source=why, stand_in=why)
    stat = host_ldso.stat()
    cache_key = _stat(host_cache)
    return _asked(host_ldso, (stat.st_mtime_ns, stat.st_size), host_cache, cache_key, machine)


def _stat(path: Path | None):
    try:
        found = path.stat() if path else None
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size) if found else None


@lru_cache(maxsize=64)
def _asked(ldso: Path, _key, cache: Path | None, cache_key, machine: str) -> Rules:
    try:
        listing = process.run(
            [ldso, "--library-path", MARKED, "--list", ldso],
            f"{ldso} listing its search rules",
            # LD_PRELOAD, not --preload (glibc >= 2.30): a library it must search for
            env={"LD_DEBUG": "libs", "LD_PRELOAD": "libclimstack-probe.so", "PATH": os.defpath},
            timeout=30,
            check=False,
        )
    except (ClimstackError, OSError) as err:  # another architecture, not executable, hangs
        why = err.message if isinstance(err, ClimstackError) else str(err)
        return _defaults(f"{ldso} does not run here ({why})", cache, machine)
    paths = {
        m["why"]: m["dirs"].split(":")
        for m in map(SEARCH.search, listing.stderr.splitlines())
        if m
    }
    marked = paths.get("--library-path") or []
    expanded = EXPANDED.match(marked[-1]) if marked else None
    if not expanded or "system search path" not in paths:
        return _defaults(f"{ldso} printed no search path", cache, machine)
    base = marked[-1]
    subdirs = tuple(d[len(base) + 1 :] if d != base else "" for d in marked)
    system = paths["system search path"]
    dirs = tuple(system[i + len(subdirs) - 1] for i in range(0, len(system), len(subdirs)))
    entries, stand_in = _cache(cache, machine)
    source = f"the image's own ld.so ({ldso.name}) and " + (stand_in or "ld.so.cache")
    return Rules(dirs, subdirs, expanded[1], expanded[2], entries, source, stand_in)


def _defaults(why: str, cache: Path | None, machine: str) -> Rules:
    """The model's defaults where the image's ld.so could not be asked, and why."""
    entries, stand_in = _cache(cache, machine)
    why = f"climstack's defaults: {why}" + (f"; {stand_in}" if stand_in else "")
    return Rules(cache=entries, source=why, stand_in=why)


def _cache(cache: Path | None, machine: str) -> tuple[dict | None, str]:
    """(`ldconfig -p -C FILE`'s entries of this machine's libraries, the rule that stood in
    for them, '' if none): this host's ldconfig reads any glibc's cache file. No entries
    without a cache (as ld.so has none); where ldconfig is missing, None and the
    ld.so.conf scan named; where it cannot read the file, none and that named (ld.so
    ignores a cache it cannot read, but this host's ldconfig may not know its format)."""
    if cache is None or not cache.is_file():
        return {}, ""
    ldconfig = shutil.which("ldconfig") or shutil.which("ldconfig", path="/sbin:/usr/sbin")
    if not ldconfig:
        return None, (
            f"no ldconfig on this host to read {cache.name}: the directories of "
            "ld.so.conf scanned instead (what ldconfig would cache)"
        )
    listed = process.run(
        [ldconfig, "-p", "-C", cache], f"ldconfig reading {cache}", timeout=30, check=False
    )
    if listed.returncode != 0:
        return {}, (
            f"this host's ldconfig cannot read the image's {cache.name} (exit "
            f"{listed.returncode}): taken as absent"
        )
    flag = CACHE_FLAGS.get(machine, "")
    entries: dict[str, list[tuple[str, int, str]]] = {}
    for match in map(CACHED.match, listed.stdout.splitlines()):
        if match and flag in match["flags"]:
            hwcap = HWCAP.search(match["flags"])
            named, bits = (
                (hwcap["named"] or "", int(hwcap["bits"] or "0", 16)) if hwcap else ("", 0)
            )
            entries.setdefault(match["name"], []).append((named, bits, match["path"]))
    return entries, ""
