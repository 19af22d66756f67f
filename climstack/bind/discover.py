"""Find the host's MPI of an ABI (the MPICH ABI, libmpi.so.12; or the MPI-5 standard ABI,
libmpi_abi.so.1): an explicit prefix, the module environment (CRAY_MPICH_DIR,
LD_LIBRARY_PATH), or the MPI external of the site's merged Spack config; and, for fabric
mode, the host's libfabric."""

import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from climstack.bind import abi_wrapper, elf, families, loader
from climstack.errors import ClimstackError
from climstack.inputs import sites

#: the MPICH ABI's libraries, and what else the same library is called on the host
ABI_NAMES = {
    "libmpi.so.12": ("libmpi.so.12", "libmpich.so.12"),
    "libmpifort.so.12": ("libmpifort.so.12", "libmpichfort.so.12"),
    "libmpicxx.so.12": ("libmpicxx.so.12", "libmpichcxx.so.12"),
}
#: the MPI-5 standard ABI's libraries (their SONAMEs), and what else distributions call the
#: same file: Debian's libmpi_abi_mpich.so.1 and libmpi_abi_openmpi.so.1 (SONAME
#: libmpi_abi.so.1, chosen between by update-alternatives); only Intel MPI has the Fortran one
STANDARD_NAMES = {
    "libmpi_abi.so.1": ("libmpi_abi.so.1", "libmpi_abi_mpich.so.1", "libmpi_abi_openmpi.so.1"),
    "libmpifort_abi.so.1": ("libmpifort_abi.so.1",),
}
#: the ABIs a plan can bind: its name -> the libraries, and the one every program needs
ABIS = {"mpich": ABI_NAMES, "standard": STANDARD_NAMES}
MAIN_LIBRARY = {"mpich": "libmpi.so.12", "standard": "libmpi_abi.so.1"}
#: other MPI ABIs, recognised to refuse them with the reason
FOREIGN_MPI = {"libmpi.so.40": "Open MPI (libmpi.so.40)", "libmpi_abi.so.1": "the MPI-5 ABI"}
LIB_SUBDIRS = ("lib-abi-mpich", "lib", "lib64", "lib/x86_64-linux-gnu")
MODULE_VARIABLES = ("CRAY_MPICH_DIR", "CRAY_MPICH_PREFIX", "MPICH_DIR", "I_MPI_ROOT")
MPI_EXTERNALS = ("cray-mpich", "mpich", "intel-oneapi-mpi", "openmpi")


@dataclass
class HostMpi:
    """The host MPI's libraries (inside the host view) and where the claim came from."""

    libraries: dict[str, str]  # ABI name -> path of the host file that provides it
    source: str
    version: str = ""
    prefix: str = ""
    abi: str = "mpich"
    wrapper: dict | None = None  # the standard ABI through mpi_abi_wrapper (bind.abi_wrapper)


class NoStandardAbi(ClimstackError):
    """The host MPI has no MPI-5 standard ABI library of its own."""


def _lib_dirs(prefix: str, view: loader.View, tried: list[str]):
    """The library directories of `prefix` that exist in the view, each named in `tried`."""
    for sub in LIB_SUBDIRS:
        libdir = f"{prefix.rstrip('/')}/{sub}"
        tried.append(libdir)
        if view.is_dir(libdir):
            yield libdir


def find_in_prefix(prefix: str, view: loader.View, source: str, abi: str = "mpich") -> HostMpi:
    if abi == "standard":
        return find_standard(prefix, view, source)
    tried: list[str] = []
    for libdir in _lib_dirs(prefix, view, tried):
        found = {}
        for abi, candidates in ABI_NAMES.items():
            for name in candidates:
                if view.resolve(f"{libdir}/{name}"):
                    found[abi] = f"{libdir}/{name}"
                    break
        if "libmpi.so.12" in found:
            mpi = HostMpi(found, source, prefix=prefix)
            host_file = view.resolve(found["libmpi.so.12"])[1]
            if not os.access(host_file, os.R_OK):
                raise ClimstackError(
                    f"{host_file} is not readable",
                    fix="run as a user who can read the MPI library",
                )
            version = elf.mpich_version(host_file)
            mpi.version = str(version) if version else "unknown MPICH-ABI library"
            return mpi
        for name, what in FOREIGN_MPI.items():
            if view.resolve(f"{libdir}/{name}"):
                raise ClimstackError(
                    f"{libdir}/{name}: the host MPI at {prefix} ({source}) is {what}, not the "
                    "MPICH ABI (libmpi.so.12): an application built against MPICH cannot run "
                    "on it",
                    fix="point at an MPICH-ABI MPI: Cray MPICH, MPICH, Intel MPI, MVAPICH",
                )
    raise ClimstackError(
        f"no libmpi.so.12 or libmpich.so.12 under {prefix} ({source}); "
        f"looked in {', '.join(tried)}",
        fix="give the MPI's installation prefix (the one holding lib/)",
    )


def _standard_files(libdir: str, view: loader.View) -> dict[str, str]:
    """Host file -> the name it was found by, for every file in `libdir` whose SONAME is
    libmpi_abi.so.1: by its SONAME's name, or by a distribution's (any version suffix)."""
    found: dict[str, str] = {}
    listing = view.resolve(libdir)
    names = sorted(p.name for p in listing[1].iterdir()) if listing else []
    spellings = STANDARD_NAMES["libmpi_abi.so.1"]
    for name in names:
        if not any(name == s or name.startswith(s + ".") for s in spellings):
            continue
        resolved = view.resolve(f"{libdir}/{name}")
        info = resolved and elf.try_read(resolved[1])
        if info and info.soname == "libmpi_abi.so.1":
            found.setdefault(str(resolved[0]), f"{libdir}/{name}")
    return found


def find_standard(prefix: str, view: loader.View, source: str) -> HostMpi:
    """The host's MPI-5 standard ABI library under `prefix`: its libmpi_abi.so.1 (where
    several implementations are installed, the one that name resolves to, as the loader
    would take it), and Intel's Fortran ABI library beside it."""
    tried: list[str] = []
    for libdir in _lib_dirs(prefix, view, tried):
        files = _standard_files(libdir, view)
        if not files:
            continue
        chosen = view.resolve(f"{libdir}/libmpi_abi.so.1")
        if chosen:
            path = f"{libdir}/libmpi_abi.so.1"
        elif len(files) == 1:
            (path,) = files.values()
        else:
            raise ClimstackError(
                f"{libdir} holds {len(files)} MPI-5 ABI libraries ({', '.join(sorted(files))}) "
                "and no libmpi_abi.so.1 naming one",
                fix="choose one (update-alternatives --config libmpi_abi.so.1 on Debian), or "
                "pass --prefix of a directory holding only it",
            )
        libraries = {"libmpi_abi.so.1": path}
        if view.resolve(f"{libdir}/libmpifort_abi.so.1"):
            libraries["libmpifort_abi.so.1"] = f"{libdir}/libmpifort_abi.so.1"
        implementation = elf.mpi_implementation(view.resolve(path)[1])
        return HostMpi(libraries, source, implementation, prefix, "standard")
    early = [f"{d}/libmpi_abi.so.0" for d in tried if view.resolve(f"{d}/libmpi_abi.so.0")]
    raise NoStandardAbi(
        f"the host MPI at {prefix} ({source}) has no MPI-5 standard ABI library "
        f"(libmpi_abi.so.1, {', '.join(STANDARD_NAMES['libmpi_abi.so.1'][1:])}); looked in "
        + ", ".join(tried)
        + (
            f"; {early[0]} is MPICH 5.0.0 or 5.0.1's, named .so.0 by a configure bug "
            "(fixed in MPICH 5.0.2), and its PMPI_* are in a libpmpi_abi no other MPI has"
            if early
            else ""
        ),
        fix=f"bind mpi_abi_wrapper over it (`spack install {abi_wrapper.PACKAGE}` against this "
        "MPI, then --wrapper PREFIX or its module)"
        + (", or use MPICH >= 5.0.2" if early else "")
        + "; or run the MPICH-ABI image on an MPICH-ABI host (bind without --abi standard), "
        "or the image's own MPI (--mode hybrid); MPI-5 ABI libraries: MPICH >= 5.0.2, Intel "
        "MPI >= 2021.18, Open MPI >= 6",
    )


#: a host MPI's own library, by ABI, as mpi_abi_wrapper's libmpiwrapper is linked to one
OWN_NAMES = ("libmpi.so.12", "libmpich.so.12", "libmpi.so.40")


def through_wrapper(wrapper: abi_wrapper.Wrapper, prefix: str, view: loader.View, source: str):
    """The standard ABI of the host MPI at `prefix` (which has none of its own) through
    `wrapper`: its libmpi_abi.so bound as libmpi_abi.so.1, its libmpiwrapper.so, and the
    host MPI's own library, which must be of the ABI the wrapper is built against."""
    tried: list[str] = []
    for libdir in _lib_dirs(prefix, view, tried):
        # the library the wrapper is linked to, else one of its ABI, else another MPI's
        ranked = sorted(
            OWN_NAMES, key=lambda n: (n != wrapper.wraps, not abi_wrapper.matches(wrapper, n))
        )
        own = next((n for n in ranked if view.resolve(f"{libdir}/{n}")), None)
        if own is None:
            continue
        path = f"{libdir}/{own}"
        version = elf.mpi_implementation(view.resolve(path)[1])
        if not abi_wrapper.matches(wrapper, own):
            raise ClimstackError(
                abi_wrapper.mismatch(wrapper, own, f"at {prefix} ({source}, {version})"),
                fix=abi_wrapper.FIX,
            )
        if elsewhere := abi_wrapper.own_mpi_elsewhere(wrapper, path, view):
            raise ClimstackError(
                f"{wrapper.back} ({wrapper.source}) loads {elsewhere}, not the host MPI at "
                f"{prefix} ({source}, {version}): it is built against another MPI "
                "installation, which its DT_RPATH names ahead of any LD_LIBRARY_PATH",
                fix=abi_wrapper.FIX,
            )
        libraries = {
            "libmpi_abi.so.1": wrapper.front,
            abi_wrapper.BACK: wrapper.back,
            wrapper.wraps: path,
        }
        described = {
            "prefix": wrapper.prefix,
            "source": wrapper.source,
            "wraps": wrapper.wraps,
            "mpi": version,
        }
        return HostMpi(
            libraries, source, f"{version} through mpi_abi_wrapper", prefix, "standard", described
        )
    raise ClimstackError(
        f"no MPI library ({', '.join(OWN_NAMES)}) under {prefix} ({source}) for mpi_abi_wrapper "
        f"to wrap; looked in {', '.join(tried)}",
        fix="give the MPI's installation prefix (the one holding lib/)",
    )


def discover(
    view: loader.View,
    prefix: str | None = None,
    site: sites.Site | None = None,
    environ: dict | None = None,
    flavour: str | None = None,
    abi: str = "mpich",
    wrapper: str | None = None,
) -> HostMpi:
    """The host MPI of `abi`: an explicit prefix, else the module environment, else the site
    scope (the `flavour` build beside its external: `ofi/gnu/9.1` -> `ofi/cray/10.0`). The
    standard ABI of a host MPI without one comes through mpi_abi_wrapper (bind.abi_wrapper):
    the one `wrapper` names (also over a host MPI that has the ABI), or one found."""
    environ = os.environ if environ is None else environ
    mpi_prefix, source = locate(view, prefix, site, environ, flavour, abi)
    if abi == "standard" and wrapper:
        return through_wrapper(
            abi_wrapper.read(wrapper, view, "--wrapper"), mpi_prefix, view, source
        )
    try:
        return find_in_prefix(mpi_prefix, view, source, abi)
    except NoStandardAbi:
        found = abi_wrapper.find(view, None, environ, site)
        if found is None:
            raise
        return through_wrapper(found, mpi_prefix, view, source)


def locate(view, prefix, site, environ, flavour, abi) -> tuple[str, str]:
    """(the host MPI's prefix, where it was found)."""
    if prefix:
        return prefix, "--prefix"
    for variable in MODULE_VARIABLES:
        if environ.get(variable):
            return environ[variable], f"${variable}"
    # the ABI's own library, else (standard: for mpi_abi_wrapper) the MPI's own
    directories = list(filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")))
    for names in (ABIS[abi][MAIN_LIBRARY[abi]], OWN_NAMES if abi == "standard" else ()):
        for directory in directories:
            if any(view.resolve(f"{directory}/{n}") for n in names):
                return str(PurePosixPath(directory).parent), "LD_LIBRARY_PATH"
    if site:
        external = site.external_prefix(*MPI_EXTERNALS)
        if external:
            where = site.origin(external)
            if flavour:
                external = families.reflavour(external, flavour, view)
            return external, where
    raise ClimstackError(
        "no host MPI found: no --prefix, no CRAY_MPICH_DIR or MPI in "
        "LD_LIBRARY_PATH, no MPI external in the site scope",
        fix="`module load cray-mpich`, or pass --prefix /path/to/mpi",
    )


def find_fabric(view: loader.View, site: sites.Site | None, prefix: str | None) -> str:
    """Path of the host's libfabric.so.1 (fabric mode)."""
    prefix = prefix or (site and site.external_prefix("libfabric"))
    if not prefix:
        raise ClimstackError(
            "fabric mode needs the host's libfabric",
            fix="add a libfabric external to the site scope or pass " "--fabric-prefix",
        )
    for sub in ("lib64", "lib", "lib/x86_64-linux-gnu", ""):  # Cray, others, Debian
        candidate = f"{prefix.rstrip('/')}/{sub}/libfabric.so.1".replace("//", "/")
        if view.resolve(candidate):
            return candidate
    raise ClimstackError(
        f"no libfabric.so.1 under {prefix}", fix="give the libfabric prefix holding lib64/ or lib/"
    )
