"""Which MPI ABI an executable is built for, against the plan's: the MPICH ABI
(libmpi.so.12) or the MPI-5 standard ABI (libmpi_abi.so.1), and what the standard ABI
asks of the host library besides the symbols (PMPI_* twins, a Fortran ABI). Part of
`climstack verify` (climstack.check.verify)."""

from pathlib import PurePosixPath

from climstack.bind import discover, elf, loader
from climstack.bind.plan import Plan
from climstack.bind.stages import LINKS_DIR
from climstack.check.verdict import Report

#: what each ABI's programs ask for
ABI_LIBRARIES = {
    abi: {name for spellings in names.values() for name in spellings}
    for abi, names in discover.ABIS.items()
}
ABI_TITLES = {
    "mpich": "MPICH ABI (libmpi.so.12)",
    "standard": "MPI-5 standard ABI (libmpi_abi.so.1)",
}


def abis_of(closure: loader.Closure) -> list[str]:
    """The MPI ABIs a closure loads (by the names it asks for)."""
    asked = set(closure.libraries) | set(closure.missing)
    return [abi for abi, names in ABI_LIBRARIES.items() if asked & names]


def check_abi(report: Report, plan: Plan, own: loader.Closure) -> bool:
    """Is the executable built for the ABI whose host library the plan binds? A program of
    the MPICH ABI run on an MPI-5 ABI library (or the reverse), or of Open MPI's own ABI,
    would load its own MPI, or none: refused before anything else about its MPI is
    checked. A program that asks for no MPI library (MPI linked in, or none) goes on to
    the link map's checks."""
    found = abis_of(own)
    report.abi = "+".join(found)
    asked = set(own.libraries) | set(own.missing)
    known = set().union(*ABI_LIBRARIES.values())
    foreign = [w for n, w in discover.FOREIGN_MPI.items() if n in asked and n not in known]
    if foreign and plan.abi not in found:
        report.problems.append(
            f"{report.executable} is built for {foreign[0]}, an ABI the plan's host MPI "
            f"({ABI_TITLES[plan.abi]}) cannot stand in for: rebuild it on an MPICH-ABI or "
            "MPI-5 ABI MPI, or run it in hybrid mode with its own MPI"
        )
        return False
    own_fortran = [n for n in elf.IMPLEMENTATION_FORTRAN if n in asked]
    if plan.abi == "standard" and own_fortran:
        report.problems.append(
            f"{report.executable} loads {own_fortran[0]}, an MPI implementation's own Fortran "
            "library: it calls that implementation's internals, which no MPI-5 ABI library "
            "exports; build the program with mpif's mpifort (libmpif.so.1, as the image's MOM6)"
        )
        return False
    if not found or (plan.abi in found and len(found) == 1):
        return True
    if len(found) > 1:
        why = "loads both MPI ABIs (libmpi.so.12 and libmpi_abi.so.1): rebuild it on one"
    else:
        fix = (
            "bind without --abi standard"
            if found[0] == "mpich"
            else "bind with --abi standard (`climstack bind SITE --abi standard`)"
        )
        why = (
            f"is built for the {ABI_TITLES[found[0]]} but the plan binds the host's "
            f"{ABI_TITLES[plan.abi]}: {fix}, or run it in hybrid mode"
        )
    report.problems.append(f"{report.executable} {why}")
    return False


def check_pmpi(report: Report, wanted: set, exports: set) -> None:
    """Every MPI_* function the application calls must have its PMPI_* twin (which tools
    interpose on) in the host library or what it loads."""
    profiled = sorted(f"P{s}" for s in wanted if s.startswith("MPI_") and s in exports)
    lacking = [s for s in profiled if s not in exports]
    if lacking:
        report.problems.append(
            f"the host's libmpi_abi.so.1 and the libraries it loads lack the PMPI_* twins of "
            f"{len(lacking)} functions the application calls ({', '.join(lacking[:5])}"
            f"{', ...' if len(lacking) > 5 else ''}): the standard ABI puts both in "
            "libmpi_abi.so.1 (MPICH 5.0.0-5.0.1 kept them in a libpmpi_abi of their own; "
            "use MPICH >= 5.0.2)"
        )


def check_standard_fortran(report: Report, plan: Plan, top, own) -> None:
    """A Fortran program on the standard ABI calls MPI through one Fortran layer over the C
    ABI: the image's mpif (libmpif.so.1, which needs nothing of the host but libmpi_abi's C
    symbols: its imports are checked with every other object's) or the host's Fortran ABI
    (libmpifort_abi.so.1, which only Intel MPI ships), not both in one process. (An
    implementation's own Fortran library is refused before: check_abi.)"""
    names = {*own.libraries, *own.missing}
    if elf.MPIF_SONAME in names:
        if "libmpifort_abi.so.1" in names:
            report.problems.append(
                f"{report.executable} loads both {elf.MPIF_SONAME} (mpif, the image's Fortran "
                "layer) and libmpifort_abi.so.1 (the host's): two Fortran MPI layers with their "
                "own handles and constants in one process, mixed; link one of them"
            )
        return
    importers = [top, *own.libraries.values()]
    fortran = "libmpifort_abi.so.1" in names or any(
        name.islower() and elf.MPI_SYMBOL.match(name)
        for lib in importers
        for name in lib.info.mpi_imports()
    )
    if fortran and "libmpifort_abi.so.1" not in plan.links:
        report.problems.append(
            f"{report.executable} calls MPI from Fortran but the host's MPI-5 ABI library "
            f"({plan.mpi.get('version') or 'the host MPI'}) has no Fortran ABI "
            "(libmpifort_abi.so.1; only Intel MPI ships one): build the program with mpif's "
            "mpifort (libmpif.so.1, as the image's MOM6), which needs no host Fortran library"
        )


def first_of(closure: loader.Closure, name: str):
    """The library `closure` loads for ABI name `name` (any of its spellings), if any."""
    names = {**discover.ABI_NAMES, **discover.STANDARD_NAMES}.get(name, (name,))
    return next(filter(None, (closure.get(n) for n in names)), None)


def check_all_mpi_from_host(report: Report, plan: Plan, planned_closure) -> None:
    """The loader must pick the plan's MPI library, and every MPI library beside it."""
    main = discover.MAIN_LIBRARY[plan.abi]
    pick = first_of(planned_closure, main)
    if pick is None or pick.path.parent != PurePosixPath(LINKS_DIR):
        report.problems.append(
            "under the plan the loader picks "
            f"{pick.path if pick else 'no ' + main} by {pick.how if pick else '-'}, "
            "not the host MPI"
        )
    for name in discover.ABIS[plan.abi]:  # all of MPI from the host, or the ABI is mixed
        lib = planned_closure.libraries.get(name)
        if lib and pick and lib.path.parent != pick.path.parent:
            report.problems.append(
                f"{name} comes from {lib.path} ({lib.how}) but "
                f"{main} from {pick.path}: mixed MPI libraries"
            )
