"""The MPI verdicts of `climstack verify`, read off the link map of the process
(climstack.bind.loader) and its symbol bindings (climstack.bind.symbols): which file
provides each MPI symbol that any object of the process binds, whether every MPI library
loaded under a bind plan is the host's, and MPI that no plan can replace (linked in)."""

import re
from collections import Counter
from pathlib import PurePosixPath

from climstack.bind import elf, symbols
from climstack.bind.loader import Closure, Library
from climstack.check.verdict import Report

#: the files of an MPI implementation, by name or SONAME: MPICH's and its derivatives'
#: (libmpi, libmpich*, libmpifort, libmpicxx, Cray's libmpi_gnu_123), the MPI-5 ABI's
#: (libmpi_abi*, libpmpi_abi), mpif's libmpif, Open MPI's (libmpi_mpifh, libopen-pal)
MPI_LIBRARY = re.compile(r"^lib(p?mpi|mpich|open-pal|open-rte|open_mpi)[\w.+-]*\.so")


def is_fortran_layer(obj: Library) -> bool:
    """mpif's libmpif.so.1: Fortran bindings that import the C ABI (MPI_Init) and define the
    Fortran names (mpi_init_), part of the application; their C imports are the host
    library's to satisfy, as every other object's."""
    return obj.info.soname == elf.MPIF_SONAME and "MPI_Init" in obj.info.mpi_imports()


def is_mpi_library(obj: Library) -> bool:
    """An MPI implementation's file, by its name or SONAME (the program is never one)."""
    if obj.parent is None or is_fortran_layer(obj):
        return False
    names = (PurePosixPath(obj.name).name, obj.info.soname, obj.real.name)
    return any(MPI_LIBRARY.match(n) for n in names if n)


def from_host(obj: Library, binds) -> bool:
    """Is it a host file the plan binds in (under a bind's container path)?"""
    mounts = [PurePosixPath(dst) for _, dst in binds]
    return any(obj.real == m or m in obj.real.parents for m in mounts)


def where(obj: Library) -> str:
    """How the loader came to it: `RPATH of /app/lib/libapp.so`, `LD_LIBRARY_PATH`."""
    return f"{obj.how} of {obj.whose}" if obj.whose else obj.how


def statics(closure: Closure) -> list[str]:
    """The objects that are no MPI library yet hold an MPI (linked in statically)."""
    found = []
    for obj in closure.objects:
        if is_fortran_layer(obj):
            continue
        if not is_mpi_library(obj) and (why := elf.static_mpi(obj.info)):
            found.append(f"{obj.path} {why}")
    return found


def uses_mpi(closure: Closure) -> bool:
    """Does the process use MPI: an MPI library loaded or missing, an MPI import
    anywhere, or an MPI linked in?"""
    asked = {PurePosixPath(n).name for n in [*closure.libraries, *closure.missing]}
    return (
        any(MPI_LIBRARY.match(n) for n in asked)
        or any(obj.info.mpi_imports() for obj in closure.objects)
        or bool(statics(closure))
    )


def read(report: Report, closure: Closure) -> dict[str, symbols.Binding]:
    """The MPI symbols the application (every object that is no MPI library) binds, each
    with its provider; the counts and the unbound ones go into the report."""
    bindings = symbols.bindings(closure, elf.is_mpi_symbol)
    application = [obj for obj in closure.objects if not is_mpi_library(obj)]
    report.importers = [str(obj.real) for obj in application if obj.info.mpi_imports()]
    wanted = {
        symbol: binding
        for symbol, binding in bindings.items()
        if any(not is_mpi_library(i) for i in binding.importers)
        and not (binding.provider and not is_mpi_library(binding.provider))  # its own
    }
    report.imported = len(wanted)
    report.missing = sorted(s for s, b in wanted.items() if b.provider is None)
    report.providers = dict(
        Counter(str(b.provider.path) for b in bindings.values() if b.provider is not None)
    )
    return bindings


def check_bind(report: Report, plan, closure: Closure) -> set[str]:
    """Bind mode: every MPI library in the process is the host's, every MPI symbol any
    object binds is defined by the host's files, and no object holds an MPI of its own.
    The MPI symbols the application imports."""
    bindings = read(report, closure)
    if report.missing:
        report.problems.append(
            f"the host MPI lacks {len(report.missing)} MPI symbols the application "
            f"imports: {', '.join(report.missing)}"
        )
    report.problems += image_mpi(closure, plan, bindings)
    for found in statics(closure):
        report.problems.append(
            f"{found}: MPI linked into it, which no bind plan can replace (link the MPI "
            "as a shared library, or run it in hybrid mode)"
        )
    return {s for s, b in bindings.items() if any(not is_mpi_library(i) for i in b.importers)}


def image_mpi(closure: Closure, plan, bindings=None) -> list[str]:
    """Each MPI library of the image that loads under the plan, how, and how many MPI
    symbols of the process bind to it."""
    bindings = symbols.bindings(closure, elf.is_mpi_symbol) if bindings is None else bindings
    bound = Counter(b.provider.path for b in bindings.values() if b.provider is not None)
    host = any(is_mpi_library(o) and from_host(o, plan.binds) for o in closure.objects)
    return [
        f"under the plan the loader picks the image's own {obj.path} ({where(obj)}), not the "
        f"host MPI: {bound.get(obj.path, 0)} MPI symbols bind to it"
        + (" (mixed MPI libraries)" if host else "")
        for obj in closure.libraries.values()
        if is_mpi_library(obj) and not from_host(obj, plan.binds)
    ]
