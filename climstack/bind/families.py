"""Host library families beyond MPI (netcdf, hdf5, adios2, pnetcdf): where the host's build lives
(an explicit prefix, the module environment, the site's Spack externals), which PrgEnv
flavour it is, and every name an application may ask for each of its libraries by.

Library names differ by builder: Spack's `libhdf5.so.200`, Cray's
`libhdf5_parallel_gnu_91.so.200`, Debian's `libhdf5_serial.so.103`, a wheel's
`libhdf5-a6e30693.so.310.4.0`. Dropping the build tags leaves the library (`libhdf5`),
whose name with the SONAME major (`libhdf5.so.200`) is linked beside the SONAME.
"""

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from climstack.bind import elf, loader
from climstack.common import versions
from climstack.errors import ClimstackError
from climstack.inputs import sites

#: PrgEnv flavour -> the directory names Cray gives its builds (`<pkg>/<v>/<dir>/<compiler v>`)
FLAVOURS = {"gnu": ("gnu",), "cray": ("crayclang", "cray", "cce"), "aocc": ("aocc",)}
#: Cray's PE_ENV (set by `module load PrgEnv-*`) -> flavour
PE_ENV = {"GNU": "gnu", "CRAY": "cray", "AOCC": "aocc"}
#: name parts that say which build a library is, not which library
_BUILD_TAG = re.compile(
    r"^(serial|parallel|mpi|mpich|openmpi|gnu|cray|crayclang|cce|aocc|intel|nvidia|amd|\d+)$"
)
_WHEEL_HASH = re.compile(r"-[0-9a-f]{8}$")  # auditwheel's suffix
LIB_SUBDIRS = ("lib64", "lib", "lib/x86_64-linux-gnu", "")


@dataclass(frozen=True)
class Family:
    name: str
    libraries: dict  # frozenset of name parts -> the library's plain name
    externals: tuple[str, ...]  # Spack package names of the site's externals
    variables: tuple[str, ...]  # module-environment variables holding a prefix
    symbols: re.Pattern  # the API's symbols (C and gfortran's Fortran names)
    soversion: int = 1  # the parts of a file name's version that are its ABI (ADIOS2: 2.10)


def _parts(*names: str) -> frozenset:
    return frozenset(names)


FAMILIES = {
    "netcdf": Family(
        "netcdf",
        {_parts("libnetcdf"): "libnetcdf", _parts("libnetcdff"): "libnetcdff"},
        ("netcdf-c", "netcdf-fortran", "cray-netcdf-hdf5parallel", "cray-netcdf"),
        ("CRAY_NETCDF_HDF5PARALLEL_PREFIX", "CRAY_NETCDF_PREFIX", "NETCDF_DIR", "NETCDF_ROOT"),
        re.compile(r"^(nc_|nf_|nf90_|__netcdf_MOD_)"),
    ),
    "hdf5": Family(
        "hdf5",
        {
            _parts("libhdf5"): "libhdf5",
            _parts("libhdf5", "hl"): "libhdf5_hl",
            _parts("libhdf5", "fortran"): "libhdf5_fortran",
            _parts("libhdf5", "hl", "fortran"): "libhdf5hl_fortran",
            _parts("libhdf5", "cpp"): "libhdf5_cpp",
            _parts("libhdf5", "hl", "cpp"): "libhdf5_hl_cpp",
        },
        ("hdf5", "cray-hdf5-parallel", "cray-hdf5"),
        ("CRAY_HDF5_PARALLEL_PREFIX", "CRAY_HDF5_PREFIX", "HDF5_DIR", "HDF5_ROOT"),
        re.compile(r"^(H5|__h5\w*_MOD_)"),
    ),
    # ADIOS2: SOVERSION major.minor (libadios2_core_mpi.so.2.10); its MPI libraries are
    # libraries of their own beside the serial ones, and FFS, ATL, DILL, EVPath and enet are
    # built in as libadios2_<name>
    "adios2": Family(
        "adios2",
        {
            _parts("libadios2", *part.split("_")): f"libadios2_{part}"
            for part in (
                "core",
                "core_mpi",
                "c",
                "c_mpi",
                "cxx11",
                "cxx11_mpi",
                "fortran",
                "fortran_mpi",
                "h5vol",
                "ffs",
                "atl",
                "dill",
                "evpath",
                "enet",
                "perfstubs",
            )
        },  # fmt: skip
        ("adios2",),
        ("ADIOS2_DIR", "ADIOS2_ROOT"),
        re.compile(r"^(adios2_|_ZN6adios2|__adios2_\w*_MOD_)"),
        soversion=2,
    ),
    "pnetcdf": Family(
        "pnetcdf",
        {_parts("libpnetcdf"): "libpnetcdf"},
        ("parallel-netcdf", "cray-parallel-netcdf"),
        ("CRAY_PARALLEL_NETCDF_PREFIX", "PNETCDF_DIR"),
        re.compile(r"^(ncmpi_|nfmpi_)"),
    ),
}


def get(name: str) -> Family:
    if name not in FAMILIES:
        raise ClimstackError(
            f"unknown library family {name!r}",
            fix=f"one of {', '.join(FAMILIES)} (the MPI family is always bound)",
        )
    return FAMILIES[name]


def classify(soname: str) -> tuple[str, str, str] | None:
    """(family, plain name, SONAME major) of a library file name, or None."""
    stem, dot, version = soname.partition(".so")
    if not dot:
        return None
    parts = _WHEEL_HASH.sub("", stem).split("_")
    if parts[0].endswith("hl") and parts[0] != "hl":  # libhdf5hl_fortran
        parts[:1] = [parts[0][:-2], "hl"]
    parts = [re.sub(r"^(serial|mpich|openmpi|parallel)hl$", "hl", p) for p in parts]
    key = frozenset(p for p in parts if not _BUILD_TAG.match(p))
    numbers = version.lstrip(".").split(".")
    for exact in (frozenset(parts), key):  # a library named for its MPI first (ADIOS2's)
        for family in FAMILIES.values():
            if exact in family.libraries:
                major = ".".join(numbers[: family.soversion])
                return family.name, family.libraries[exact], major
    return None


def flavour_of(prefix: str) -> str | None:
    """The PrgEnv flavour of a Cray build prefix (`.../<flavour dir>/<compiler version>`)."""
    parts = PurePosixPath(prefix).parts
    for flavour, dirs in FLAVOURS.items():
        if any(p in dirs for p in parts[-2:]):
            return flavour
    return None


def reflavour(prefix: str, flavour: str, view: loader.View) -> str:
    """The `flavour` build beside a Cray build prefix: `<pkg>/<v>/gnu/9.1` ->
    `<pkg>/<v>/crayclang/<newest>`. Prefixes outside Cray's layout are kept."""
    current = flavour_of(prefix)
    if current in (None, flavour):
        return prefix
    base = PurePosixPath(prefix).parent.parent
    tried = []
    for directory in FLAVOURS[flavour]:
        tried.append(f"{base}/{directory}/*")
        found = view.resolve(f"{base}/{directory}")
        if found and found[1].is_dir():
            builds = sorted(
                (p.name for p in found[1].iterdir() if p.is_dir()), key=versions.sort_key
            )
            if builds:
                return f"{base}/{directory}/{builds[-1]}"
    raise ClimstackError(
        f"no {flavour} build beside {prefix}: looked in {', '.join(tried)}",
        fix=f"load the PrgEnv-{flavour} modules, or pass the build's prefix with --with",
    )


@dataclass
class HostFamily:
    name: str
    source: str  # where the prefix came from
    prefixes: list[str]
    flavour: str | None
    libraries: dict  # link name (SONAME and plain name + major) -> host path in the view
    version: str = ""  # HDF5: the library's own version (.rodata)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "prefixes": self.prefixes,
            "flavour": self.flavour,
            "version": self.version,
            "libraries": self.libraries,
        }


def _lib_dirs(prefix: str) -> list[str]:
    return [f"{prefix.rstrip('/')}/{sub}".rstrip("/") or "/" for sub in LIB_SUBDIRS]


def _libraries(family: Family, prefix: str, view: loader.View) -> dict[str, str]:
    """Link name -> path of each of the family's libraries in the prefix's first lib dir
    holding any; ClimstackError if two builds of one library are there."""
    for directory in _lib_dirs(prefix):
        found = view.resolve(directory)
        if not found or not found[1].is_dir():
            continue
        by_plain: dict[str, dict[str, str]] = {}  # plain name -> SONAME -> path
        for entry in sorted(found[1].iterdir()):
            known = classify(entry.name)
            resolved = known and known[0] == family.name and view.resolve(found[0] / entry.name)
            info = elf.try_read(entry) if resolved else None
            if info is not None:
                soname = info.soname or entry.name
                by_plain.setdefault(known[1], {}).setdefault(soname, str(resolved[0]))
        links = {}
        for plain, builds in by_plain.items():
            if len(builds) > 1:
                raise ClimstackError(
                    f"{directory} holds {len(builds)} builds of {plain}: "
                    f"{', '.join(sorted(builds))}",
                    fix=f"pass the prefix of one build: --with {family.name}=PREFIX",
                )
            ((soname, path),) = builds.items()
            links[soname] = path
            major = (classify(soname) or ("", "", ""))[2]
            if major:
                links.setdefault(f"{plain}.so.{major}", path)
        if links:
            return links
    return {}


def find(
    name: str,
    view: loader.View,
    site: sites.Site | None,
    environ: dict,
    flavour: str | None = None,
    prefix: str | None = None,
) -> HostFamily:
    """The host's build of family `name`: `prefix` (several joined by `:`, as a family's
    libraries may live in several prefixes: Spack's netcdf-c and netcdf-fortran), else the
    module environment, else the site's externals (moved to `flavour`'s build beside them)."""
    family = get(name)
    if prefix:
        prefixes, source = prefix.split(":"), f"--with {name}={prefix}"
    elif variable := next((v for v in family.variables if environ.get(v)), None):
        prefixes, source = [environ[variable]], f"${variable}"
    else:
        found = [site.external_prefix(p) for p in family.externals] if site else []
        prefixes = list(dict.fromkeys(p for p in found if p))
        if not prefixes:
            raise ClimstackError(
                f"the site {site.name if site else '-'} provides no {name}: no external "
                f"{', '.join(family.externals)} in its packages.yaml (Spack's merged config) "
                f"and none of ${', $'.join(family.variables)} is set",
                fix=f"`module load` the site's {name} module, add the external, or pass "
                f"--with {name}=PREFIX",
            )
        source = site.origin(prefixes[0])
        if flavour:
            prefixes = [reflavour(p, flavour, view) for p in prefixes]
    libraries: dict[str, str] = {}
    for each in prefixes:
        found = _libraries(family, each, view)
        if not found:
            raise ClimstackError(
                f"{each} ({source}) holds no {name} library "
                f"({', '.join(sorted(set(family.libraries.values())))}); looked in "
                + ", ".join(_lib_dirs(each)),
                fix=f"give the prefix of the {name} installation (the one holding lib/)",
            )
        for link, path in found.items():
            libraries.setdefault(link, path)
    host = HostFamily(name, source, prefixes, flavour_of(prefixes[0]), libraries)
    hdf5 = next((p for n, p in libraries.items() if n.startswith("libhdf5.so.")), None)
    if hdf5:  # its plain-name link: the C library
        host.version = elf.hdf5_version(view.resolve(hdf5)[1]) or ""
    return host


def requested(flavour: str | None, config: dict, environ: dict) -> str | None:
    """The PrgEnv flavour: given, else site.yaml's, else the loaded PrgEnv's ($PE_ENV)."""
    return flavour or config.get("flavour") or PE_ENV.get(environ.get("PE_ENV", "").upper())


def parse_with(values: list[str]) -> dict[str, str | None]:
    """`--with netcdf,hdf5=/prefix` (repeatable) -> {family: prefix or None}."""
    chosen: dict[str, str | None] = {}
    for value in values or []:
        for item in filter(None, (v.strip() for v in value.split(","))):
            name, _, prefix = item.partition("=")
            get(name)
            if prefix and not all(part.startswith("/") for part in prefix.split(":")):
                raise ClimstackError(
                    f"--with {item}: each prefix must be an absolute path",
                    fix=f"--with {name}=/path/to/{name} (several: /one:/other)",
                )
            chosen[name] = prefix or None
    return chosen


def mismatch_warning(family: HostFamily, mpi_prefix: str) -> str | None:
    """A flavour mix (GNU libraries with the CCE MPI, ...): warned, as it can work."""
    mpi = flavour_of(mpi_prefix) if mpi_prefix else None
    if family.flavour and mpi and family.flavour != mpi:
        return (
            f"the host's {family.name} is the {family.flavour} build ({family.prefixes[0]}) "
            f"but the MPI is the {mpi} build ({mpi_prefix}): the C interfaces are one ABI "
            "and ARCHER2's guide runs such mixes, but Fortran modules and compiler runtimes "
            f"differ between PrgEnvs; pass --flavour {mpi} (or {family.flavour}) to match"
        )
    return None
