"""Find the host's MPICH-ABI MPI: an explicit prefix, the module environment
(CRAY_MPICH_DIR, LD_LIBRARY_PATH), or the MPI external of the site's merged Spack config;
and, for fabric mode, the host's libfabric."""

import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from climstack.bind import elf, families, loader
from climstack.errors import ClimstackError
from climstack.inputs import sites

#: the MPICH ABI's libraries, and what else the same library is called on the host
ABI_NAMES = {
    "libmpi.so.12": ("libmpi.so.12", "libmpich.so.12"),
    "libmpifort.so.12": ("libmpifort.so.12", "libmpichfort.so.12"),
    "libmpicxx.so.12": ("libmpicxx.so.12", "libmpichcxx.so.12"),
}
#: other MPI ABIs, recognised to refuse them with the reason
FOREIGN_MPI = {"libmpi.so.40": "Open MPI (libmpi.so.40)", "libmpi_abi.so.1": "the MPI-5 ABI"}
LIB_SUBDIRS = ("lib-abi-mpich", "lib", "lib64", "lib/x86_64-linux-gnu")
MODULE_VARIABLES = ("CRAY_MPICH_DIR", "CRAY_MPICH_PREFIX", "MPICH_DIR", "I_MPI_ROOT")
MPI_EXTERNALS = ("cray-mpich", "mpich", "intel-oneapi-mpi")


@dataclass
class HostMpi:
    """The host MPI's libraries (inside the host view) and where the claim came from."""

    libraries: dict[str, str]  # ABI name -> path of the host file that provides it
    source: str
    version: str = ""
    prefix: str = ""


def find_in_prefix(prefix: str, view: loader.View, source: str) -> HostMpi:
    tried = []
    for sub in LIB_SUBDIRS:
        libdir = f"{prefix.rstrip('/')}/{sub}"
        tried.append(libdir)
        if not view.is_dir(libdir):
            continue
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


def discover(
    view: loader.View,
    prefix: str | None = None,
    site: sites.Site | None = None,
    environ: dict | None = None,
    flavour: str | None = None,
) -> HostMpi:
    """The host MPI: an explicit prefix, else the module environment, else the site scope
    (the `flavour` build beside its external: `ofi/gnu/9.1` -> `ofi/cray/10.0`)."""
    if prefix:
        return find_in_prefix(prefix, view, "--prefix")
    environ = os.environ if environ is None else environ
    for variable in MODULE_VARIABLES:
        if environ.get(variable):
            return find_in_prefix(environ[variable], view, f"${variable}")
    for directory in filter(None, environ.get("LD_LIBRARY_PATH", "").split(":")):
        if any(view.resolve(f"{directory}/{n}") for n in ABI_NAMES["libmpi.so.12"]):
            return find_in_prefix(str(PurePosixPath(directory).parent), view, "LD_LIBRARY_PATH")
    if site:
        external = site.external_prefix(*MPI_EXTERNALS)
        if external:
            where = site.origin(external)
            if flavour:
                external = families.reflavour(external, flavour, view)
            return find_in_prefix(external, view, where)
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
