"""What the dynamic loader and the bind model need to know about one ELF file (pyelftools).

DT_NEEDED, DT_SONAME, DT_RPATH/DT_RUNPATH, the dynamic symbols it imports and exports, the
GNU symbol versions it needs and defines, and the MPI implementation's own version strings
(read from .rodata, never by running the library).
"""

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection, GNUVerSymSection

from climstack.bind import elf_facts
from climstack.errors import ClimstackError

#: the MPI standard's symbols: C (MPI_Send, PMPI_Send, MPIX_: MPICH extensions) and the
#: Fortran bindings as gfortran names them (mpi_send_, pmpi_send_)
MPI_SYMBOL = re.compile(r"^(P?MPIX?_[A-Z]|p?mpix?_[a-z])")
#: what the Fortran modules and mpif.h bring in beyond the bindings: gfortran's module
#: procedures and variables (`__mpi_f08_types_MOD_...`, `__mpi_sizeofs_MOD_...`), MPICH's
#: link constants of mpi_f08 (`MPIR_F08_MPI_IN_PLACE`), and the common blocks that hold
#: MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE (`mpipriv1_`, `mpiprivc_`, `mpifcmb5_`)
FORTRAN_SYMBOL = re.compile(r"^(__p?mpi\w*_MOD_|MPIR_F08_)")
COMMON_BLOCK = re.compile(r"^(mpipriv[0-9a-z]|mpifcmb[0-9a-z]+)_$")
#: mpif's Fortran bindings over the MPI-5 standard C ABI (its recipe: mpif in
#: site/container-mpi-abi/repo, beside the overlay MPICH)
MPIF_SONAME = "libmpif.so.1"
#: MPI implementations' own Fortran libraries: they call that implementation's internals
#: (MPIR_*, ompi_*), which no MPI-5 standard ABI library exports
IMPLEMENTATION_FORTRAN = (
    "libmpifort.so.12",
    "libmpichfort.so.12",
    "libmpi_mpifh.so.40",
    "libmpi_usempif08.so.40",
    "libmpi_usempi_ignore_tkr.so.40",
)


DF_1_NODEFLIB = 0x800  # elf.h


@dataclass
class Elf:
    path: Path
    machine: str = ""  # e_machine, e.g. EM_X86_64
    elfclass: int = 64
    soname: str = ""
    needed: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    interpreter: str = ""  # PT_INTERP: set for executables
    nodeflib: bool = False  # DT_FLAGS_1 DF_1_NODEFLIB: no cache or default directories
    imports: set[str] = field(default_factory=set)  # undefined dynamic symbols
    weak_imports: set[str] = field(default_factory=set)  # the undefined ones that may stay so
    exports: set[str] = field(default_factory=set)  # defined global/weak dynamic symbols
    objects: set[str] = field(default_factory=set)  # the exports that are data
    version_needs: dict[str, set[str]] = field(default_factory=dict)  # file -> {GLIBC_2.34,...}
    version_defs: set[str] = field(default_factory=set)
    import_versions: dict[str, str] = field(default_factory=dict)  # symbol -> version needed
    export_versions: dict[str, set[str]] = field(default_factory=dict)  # symbol -> versions

    def defines(self, symbol: str, version: str = "") -> bool:
        """Does it define `symbol` for an import of `version` ('' unversioned)? As ld.so's
        check_match binds: a versioned import to a definition of that version, or to a
        global one (no version of its own, or an object without version information)."""
        if symbol not in self.exports:
            return False
        versions = self.export_versions.get(symbol)
        return not (version and versions) or version in versions

    def mpi_imports(self) -> set[str]:
        """The MPI symbols it needs from an MPI library: the undefined ones, and in an
        executable the MPI data it holds copies of (copy relocations: mpipriv1_,
        MPIR_F08_MPI_IN_PLACE), which the MPI library must define."""
        copies = self.objects if self.interpreter else set()
        return {s for s in self.imports | copies if is_mpi_symbol(s)}

    def starts_mpi(self) -> bool:
        """Does it call MPI_Init(_thread) itself, in C or Fortran (its first rank waits there)?"""
        return any(s.lower().rstrip("_") in MPI_INIT for s in self.imports)

    def mpi_exports(self) -> set[str]:
        return {s for s in self.exports if is_mpi_symbol(s)}

    def compatible(self, other: "Elf") -> bool:
        """Could the loader load `other` into this file's process (same class and machine)?"""
        return (self.machine, self.elfclass) == (other.machine, other.elfclass)


#: the calls that start MPI (C's, and Fortran's symbols less their trailing underscores)
MPI_INIT = {"mpi_init", "mpi_init_thread"}


def is_mpi_symbol(name: str) -> bool:
    return bool(MPI_SYMBOL.match(name) or FORTRAN_SYMBOL.match(name) or COMMON_BLOCK.match(name))


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as stream:
            return stream.read(4) == b"\x7fELF"
    except OSError:
        return False


@lru_cache(maxsize=4096)
def _read_cached(path: Path, mtime_ns: int, size: int) -> Elf:
    if size < elf_facts.KEPT_FROM:
        return _parsed(path)
    return elf_facts.kept(path, _parsed, Elf)


def _parsed(path: Path) -> Elf:
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        info = Elf(path=path, machine=elf["e_machine"], elfclass=elf.elfclass)
        dynsym = versym = None
        names: dict[int, str] = {}  # version index -> version name
        for segment in elf.iter_segments():
            if segment["p_type"] == "PT_INTERP":
                info.interpreter = segment.get_interp_name()
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                _dynamic(section, info)
            elif section.name == ".dynsym":
                _symbols(section, info)
                dynsym = section
            elif isinstance(section, GNUVerNeedSection):
                for needed, aux in section.iter_versions():
                    auxes = list(aux)
                    info.version_needs[needed.name] = {a.name for a in auxes}
                    names.update((a["vna_other"], a.name) for a in auxes)
            elif isinstance(section, GNUVerDefSection):
                for verdef, aux in section.iter_versions():
                    auxes = list(aux)
                    info.version_defs.update(a.name for a in auxes)
                    if not verdef["vd_flags"] & 1:  # VER_FLG_BASE: the file's own, global
                        names[verdef["vd_ndx"]] = auxes[0].name
            elif isinstance(section, GNUVerSymSection):
                versym = section
        if versym is not None and dynsym is not None:
            _symbol_versions(dynsym, versym, names, info)
        return info


def _symbol_versions(dynsym, versym, names: dict, info: Elf) -> None:
    """Each import's required version and each export's versions (.gnu.version's index
    of a symbol, named by .gnu.version_r or .gnu.version_d; bit 15: hidden)."""
    for index, symbol in enumerate(dynsym.iter_symbols()):
        ndx = versym.get_symbol(index).entry["ndx"]
        name = names.get(ndx & 0x7FFF) if isinstance(ndx, int) else None
        if not name or not symbol.name:
            continue
        if symbol.name in info.imports and symbol["st_shndx"] == "SHN_UNDEF":
            info.import_versions[symbol.name] = name
        elif symbol.name in info.exports:
            info.export_versions.setdefault(symbol.name, set()).add(name)


def _dynamic(section: DynamicSection, info: Elf) -> None:
    for tag in section.iter_tags():
        kind = tag.entry.d_tag
        if kind == "DT_NEEDED":
            info.needed.append(tag.needed)
        elif kind == "DT_SONAME":
            info.soname = tag.soname
        elif kind == "DT_RPATH":
            info.rpath = [p for p in tag.rpath.split(":") if p]
        elif kind == "DT_RUNPATH":
            info.runpath = [p for p in tag.runpath.split(":") if p]
        elif kind == "DT_FLAGS_1":
            info.nodeflib = bool(tag.entry.d_val & DF_1_NODEFLIB)


def _symbols(section, info: Elf) -> None:
    for symbol in section.iter_symbols():
        if not symbol.name or symbol["st_info"]["bind"] not in ("STB_GLOBAL", "STB_WEAK"):
            continue
        if symbol["st_shndx"] == "SHN_UNDEF":
            info.imports.add(symbol.name)
            if symbol["st_info"]["bind"] == "STB_WEAK":
                info.weak_imports.add(symbol.name)
        elif symbol["st_info"]["type"] in (
            "STT_FUNC",
            "STT_OBJECT",
            "STT_GNU_IFUNC",
            "STT_COMMON",
            "STT_TLS",
        ):
            info.exports.add(symbol.name)
            if symbol["st_info"]["type"] in ("STT_OBJECT", "STT_COMMON"):
                info.objects.add(symbol.name)


def read(path: Path) -> Elf:
    """The ELF facts of `path` (followed if a symlink); ClimstackError if it is not ELF."""
    path = Path(path)
    try:
        stat = path.stat()
        if not is_elf(path):
            raise ClimstackError(
                f"{path} is not an ELF file", fix="pass the executable or shared library itself"
            )
        return _read_cached(path, stat.st_mtime_ns, stat.st_size)
    except PermissionError as err:
        raise ClimstackError(
            f"cannot read {path}: permission denied",
            fix="run as a user who can read it, or copy it somewhere readable",
        ) from err
    except (ELFError, ValueError, OSError) as err:
        raise ClimstackError(f"cannot read ELF file {path}: {err}") from err


def try_read(path: Path) -> Elf | None:
    try:
        return read(path)
    except ClimstackError:
        return None


def rodata_strings(path: Path, minimum: int = 3) -> list[str]:
    """Printable NUL-terminated strings of the read-only data sections, in file order."""
    found = []
    with open(path, "rb") as stream:
        for section in ELFFile(stream).iter_sections():
            if section.name.startswith(".rodata"):
                for raw in section.data().split(b"\0"):
                    text = raw.decode("latin-1")
                    if len(text) >= minimum and text.isprintable():
                        found.append(text)
    return found


_HDF5 = re.compile(r"^HDF5 library version: (\d+\.\d+\.\d+)")


def hdf5_version(path: Path) -> str | None:
    """The release of an HDF5 library (H5_lib_vers_info_g, `HDF5 library version: 1.14.4`),
    which its H5check_version compares with the headers an application was built with."""
    for text in rodata_strings(path):
        if match := _HDF5.match(text):
            return match.group(1)
    return None


@dataclass
class MpiVersion:
    vendor: str  # "MPICH", "Cray MPICH", "Intel MPI"
    version: str  # the vendor's version
    mpich_base: str  # the ANL MPICH release it is built on

    def __str__(self) -> str:
        if self.vendor == "MPICH":
            return f"MPICH {self.version}"
        return f"{self.vendor} {self.version} (ANL MPICH base {self.mpich_base})"


_RELEASE = re.compile(r"^\d+\.\d+(\.\d+)?((a|b|rc)\d*)?$")
_LIBTOOL_ABI = re.compile(r"^\d+:\d+:\d+$")
_CRAY = re.compile(r"CRAY MPICH version (\S+) \(ANL base (\S+)\)")
_INTEL = re.compile(r"^20\d\d\.\d+(\.\d+)?$")


def mpich_version(path: Path) -> MpiVersion | None:
    """Vendor, version and MPICH base of an MPICH-derived library, from its .rodata.

    MPICH's configure embeds, next to each other: the libtool ABI (`14:2:2`), the release
    date and the release (`4.0.2`); Intel MPI keeps the MPICH base (`3.4a2`) the same way;
    Cray MPICH says `CRAY MPICH version 8.1.23 (ANL base 3.4a2)`.
    """
    strings = rodata_strings(path)
    for text in strings:
        if match := _CRAY.search(text):
            return MpiVersion("Cray MPICH", match.group(1), match.group(2))
    base = ""
    for i, text in enumerate(strings):
        if _LIBTOOL_ABI.match(text):
            near = [s for s in strings[max(0, i - 3) : i + 4] if _RELEASE.match(s)]
            if near:
                base = near[-1]
                break
    if not base:
        return None
    if any("Intel(R) MPI Library" in s for s in strings):
        intel = next((s for s in strings if _INTEL.match(s)), "unknown")
        return MpiVersion("Intel MPI", intel, base)
    return MpiVersion("MPICH", base, base)


_OPEN_MPI = re.compile(r"^\d+\.\d+\.\d+((a|b|rc)\d+)?$")


def mpi_implementation(path: Path) -> str:
    """Which MPI a library is, from its .rodata: "MPICH 5.0.2", "Intel MPI 2021.18.1",
    "Open MPI 6.0.0rc2" (its format string and release sit side by side), else unknown."""
    if found := mpich_version(path):
        return f"{found.vendor} {found.version}"
    strings = rodata_strings(path)
    if "Open MPI v%d.%d.%d" in strings:
        release = next((s for s in strings if _OPEN_MPI.match(s)), "")
        return f"Open MPI {release}".rstrip()
    return "unknown MPI library"


#: calls every MPI program makes: an object that defines one and is no MPI library holds an
#: MPI of its own (linked in statically), which no bind plan can replace
CORE_MPI = ("MPI_Init", "PMPI_Init", "MPI_Init_thread", "PMPI_Init_thread", "mpi_init_")
#: what an MPI leaves in .rodata: MPICH's control variables (Intel's, Cray's too) and the
#: format strings of MPI_Get_library_version (MPICH, Open MPI)
_MPI_BANNERS = (b"MPIR_CVAR_", b"MPICH Version:", b"Open MPI v%d.%d.%d")


def static_mpi(info: Elf) -> str:
    """What shows that `info`'s file holds an MPI implementation itself ('' if nothing):
    a core MPI function it exports; in an executable also one in its .symtab, or an MPI's
    version banner in its .rodata (a stripped static link)."""
    for name in CORE_MPI:
        if name in info.exports and name not in info.objects:
            return f"defines {name}"
    if info.interpreter:
        return _static_in_executable(info.path, *_stat_key(info.path))
    return ""


def _stat_key(path: Path) -> tuple[int, int]:
    stat = Path(path).stat()
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=256)
def _static_in_executable(path: Path, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        table = elf.get_section_by_name(".symtab")
        for name in CORE_MPI if table else ():
            for symbol in table.get_symbol_by_name(name) or ():
                if symbol["st_shndx"] != "SHN_UNDEF" and symbol["st_info"]["type"] == "STT_FUNC":
                    return f"defines {name} (in its symbol table)"
        for section in elf.iter_sections():
            if section.name.startswith(".rodata"):
                data = section.data()
                for banner in _MPI_BANNERS:
                    if banner in data:
                        return f"holds an MPI library's banner {banner.decode()!r} (stripped)"
    return ""
