"""Will an executable (on the host or in an image) run on the host MPI under a bind plan?

Reads, without running anything: DT_NEEDED, RPATH vs RUNPATH, which libmpi.so.12 (or, for
the MPI-5 standard ABI, libmpi_abi.so.1) and libxpmem.so.0 the loader would pick inside the
image with the plan's binds and LD_LIBRARY_PATH (under the plan's RPATH remedy, if any),
that the executable's ABI is the plan's, the MPICH base of both sides (the image's no newer
than the host's; the standard ABI has none), the glibc symbol versions the bound host
libraries need from the image's C library, and the symbol check: every MPI symbol the
executable and its MPI-using libraries import (C, the Fortran bindings, gfortran's module
procedures, MPICH's link constants and common blocks) must be exported by the host MPI
(and, on the standard ABI, its PMPI_* twin). An RPATH that keeps the
host MPI out is refused with the remedies that would apply. Then, with --run, runs it
(mpi-probe) under the plan to show which MPI really loaded.
"""

import re
from pathlib import Path, PurePosixPath

from climstack.bind import discover, elf, loader, remedy
from climstack.bind.plan import LINKS_DIR, Plan
from climstack.check import abi_checks, family_check
from climstack.check.verdict import Report, render  # noqa: F401 (verify.render)
from climstack.cray import mpich_base
from climstack.common import process
from climstack.launch import launch, launchers, runtimes

WATCHED = ("libmpi.so.12", "libmpi_abi.so.1", "libxpmem.so.0")
FORTRAN_MPI = discover.ABI_NAMES["libmpifort.so.12"]
ALL_MPI_NAMES = {
    name for names in discover.ABIS.values() for spellings in names.values() for name in spellings
}


def _glibc_versions(libraries, libc: elf.Elf | None) -> list[str]:
    """GLIBC_* versions the bound host libraries need that the image's libc lacks."""
    if libc is None:
        return []
    needed = set()
    for info in libraries:
        for file, versions in info.version_needs.items():
            if file in ("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2"):
                needed |= {v for v in versions if v.startswith("GLIBC_")}
    return sorted(
        needed - libc.version_defs, key=lambda v: [int(x) for x in re.findall(r"\d+", v)]
    )


def version_mismatches(closure: loader.Closure) -> list[str]:
    """GNU symbol versions (FABRIC_1.9, ...) that loaded objects need from a library the plan
    supplies (in LINKS_DIR) but that library does not define: ld.so refuses to start."""
    supplied = {
        name: lib
        for name, lib in closure.libraries.items()
        if lib.path.parent == PurePosixPath(LINKS_DIR)
    }
    found = []
    for lib in [closure.root, *closure.libraries.values()]:
        for name, versions in lib.info.version_needs.items():
            if name in supplied:
                lacking = versions - supplied[name].info.version_defs
                found += [f"{v} of {name} (needed by {lib.path})" for v in sorted(lacking)]
    return found


def check(executable: str, plan: Plan | None, image: Path | None = None) -> Report:
    """The report for `executable` (a path inside `image`, or on the host without one)."""
    root = image or Path("/")
    plain = loader.View(root)  # the image as built
    planned = loader.View(root, {dst: Path(src) for src, dst in plan.binds}) if plan else plain
    path = plan.library_path if plan else []

    report = Report(executable, remedy=plan.rpath_remedy if plan else "")
    top, uses_mpi = _read_executable(report, executable, plain, plan)
    libc = loader.find("libc.so.6", top, [], [], plain)
    glibc = remedy.glibc_of(libc.info if libc else None)
    report.glibc = ".".join(map(str, glibc)) if glibc else ""
    own, wanted = _image_side(report, executable, top, plain)
    planned_closure = _planned_side(
        report, executable, planned, path, _under(plan, report.remedy, own)
    )
    host_libs = []  # the host MPI's libraries and what they load from the plan
    if plan and plan.mode == "bind" and uses_mpi and abi_checks.check_abi(report, plan, own):
        host_libs += _host_mpi(report, plan, planned_closure, planned, wanted)
        if plan.abi == "mpich":
            _check_bases(report)
            _check_fortran(report, plan, own, planned_closure)
        else:
            abi_checks.check_standard_fortran(report, plan, top, own)
        _check_rpath(report, plan, top, own, planned, path, glibc)
    if plan:
        report.families, found = family_check.check(plan, own, planned_closure)
        report.problems += found
        host_libs += [
            lib
            for lib in planned_closure.libraries.values()
            if lib.path.parent == PurePosixPath(LINKS_DIR)
        ]
    _check_glibc(report, host_libs, top, plain if image else None)
    return report


def _read_executable(report: Report, executable: str, plain: loader.View, plan) -> tuple:
    """(its ELF as loaded, whether it uses MPI); DT_NEEDED, RPATH and RUNPATH reported."""
    top = loader.load(executable, plain)
    report.needed, report.rpath, report.runpath = top.info.needed, top.info.rpath, top.info.runpath
    names = set(discover.ABI_NAMES["libmpi.so.12"]) | {"libmpi_abi.so.1"}
    uses_mpi = bool(names & set(top.info.needed)) or bool(top.info.mpi_imports())
    if not uses_mpi and not (plan and plan.families):  # a serial NetCDF program may bind
        report.problems.append(
            f"{executable} does not use MPI (no libmpi.so.12 or libmpi_abi.so.1 in DT_NEEDED)"
        )
    return top, uses_mpi


def _under(plan: Plan | None, how: str, own: loader.Closure) -> dict:
    """The loader's arguments for the program run under RPATH remedy `how`."""
    if not (plan and how):
        return {}
    if how == "preload":
        return {"preload": remedy.preloads(plan, set(own.libraries))}
    return {"main": lambda info: remedy.as_loaded(how, info)}


def _image_side(report: Report, executable: str, top, plain: loader.View) -> tuple:
    """(the closure the image loads without the plan, the MPI symbols it imports that the
    image does not define); the image's MPI and the MPI-using files reported."""
    own = loader.closure(executable, plain)
    own_mpi = abi_checks.first_of(own, "libmpi.so.12")
    if own_mpi and (version := elf.mpich_version(own_mpi.host)):
        report.image_mpi, report.image_base = str(version), version.mpich_base
    mpi_files = {lib.real for lib in own.libraries.values() if lib.info.mpi_exports()}
    importers = [top] + [
        lib
        for lib in own.libraries.values()
        if lib.real not in mpi_files and lib.info.mpi_imports()
    ]
    report.importers = [str(lib.real) for lib in importers]
    wanted = set().union(*(lib.info.mpi_imports() for lib in importers))
    wanted -= set().union(
        *(lib.info.exports for lib in own.libraries.values() if lib.real not in mpi_files)
    )  # defined by the image itself
    report.imported = len(wanted)
    return own, wanted


def _planned_side(
    report: Report, executable: str, planned: loader.View, path, under: dict
) -> loader.Closure:
    """The closure under the plan (and its RPATH remedy); the loader's picks, what it
    misses and the symbol versions the plan's libraries lack, reported."""
    planned_closure = loader.closure(executable, planned, path, **under)
    for name in WATCHED:
        library = abi_checks.first_of(planned_closure, name)
        if library:
            report.picks[name] = {
                "path": str(library.path),
                "rule": library.how,
                "host": str(library.host.resolve()),
            }
    for name, who in planned_closure.missing.items():
        report.problems.append(f"the loader finds no {name} (needed by {', '.join(who)})")
    report.version_missing = version_mismatches(planned_closure)
    for line in report.version_missing:
        report.problems.append(f"symbol version {line}")
    return planned_closure


def _host_mpi(report: Report, plan: Plan, planned_closure, planned, wanted: set) -> list:
    """Bind mode: is all of MPI the host's, and does it export every MPI symbol the
    application imports (and, for the standard ABI, its PMPI_* twin, which tools
    interpose on)? The host MPI's libraries (and what they load from the plan)."""
    abi_checks.check_all_mpi_from_host(report, plan, planned_closure)
    host_libs = []
    for name in (n for n in discover.ABIS[plan.abi] if n in plan.links):
        host = loader.closure(f"{LINKS_DIR}/{name}", planned, plan.library_path)
        host_libs += [host.root] + [
            lib for lib in host.libraries.values() if lib.path.parent == PurePosixPath(LINKS_DIR)
        ]
    main = discover.MAIN_LIBRARY[plan.abi]
    host = loader.closure(f"{LINKS_DIR}/{main}", planned, plan.library_path)
    version = elf.mpich_version(host.root.host) if plan.abi == "mpich" else None
    report.host_mpi = str(version) if version else plan.mpi.get("version", "")
    report.host_base = version.mpich_base if version else ""
    exports = set().union(*(lib.info.mpi_exports() for lib in host_libs))
    report.exported = len(exports)
    report.missing = sorted(wanted - exports)
    if report.missing:
        report.problems.append(
            f"the host MPI lacks {len(report.missing)} MPI symbols the application "
            f"imports: {', '.join(report.missing)}"
        )
    if plan.abi == "standard":
        abi_checks.check_pmpi(report, wanted, exports)
    return host_libs


def _check_bases(report: Report) -> None:
    """MPICH keeps its ABI backward only: a program built on a newer series may pass
    handles or datatypes (MPI-4's MPI_ERRORS_ABORT) an older library does not know, with
    no symbol to catch it. The image's MPICH base must not be newer than the host's."""
    unknown = [
        side
        for side, base in (("the image's", report.image_base), ("the host's", report.host_base))
        if not base
    ]
    if unknown:
        report.problems.append(
            f"cannot tell the MPICH base of {' and '.join(unknown)} MPI (no MPICH version "
            "string in the library): no proof that the executable's MPI is not newer than "
            "the host's (check the image's `mpichversion` against the host's by hand)"
        )
    elif mpich_base.newer_series(report.image_base, report.host_base):
        report.problems.append(
            f"the executable's MPI ({report.image_mpi}) is of a newer MPICH series than the "
            f"host's ({report.host_mpi}): MPICH's ABI holds backward only, so handles and "
            "datatypes it passes may be unknown to the host library (rebuild the image on "
            f"an MPICH {mpich_base.series(report.host_base)}.x, the site's pin that "
            "`climstack containerize` names)"
        )


def _check_fortran(report: Report, plan: Plan, own, planned_closure) -> None:
    """A Fortran MPI program needs the host's Fortran library (libmpifort.so.12 or
    libmpichfort.so.12) and one Fortran runtime (libgfortran SONAME) in the process."""
    needs = [name for name in FORTRAN_MPI if name in own.libraries]
    if needs and not any(name in plan.links for name in FORTRAN_MPI):
        report.problems.append(
            f"the executable needs {needs[0]} (Fortran MPI) but the host MPI has no Fortran "
            f"library ({' or '.join(FORTRAN_MPI)}): its own would run beside the host's C "
            "library (bind a host MPI with Fortran bindings)"
        )
    runtimes = sorted(
        {
            soname
            for name, lib in planned_closure.libraries.items()
            if (soname := lib.info.soname or name).startswith("libgfortran.so.")
        }
    )
    if len(runtimes) > 1:
        report.problems.append(
            f"two Fortran runtimes would load ({', '.join(runtimes)}): the executable's "
            "and the host MPI's Fortran library were built by different gfortran releases"
        )


def _rpath_holders(top, own: loader.Closure) -> list[str]:
    """The files whose DT_RPATH (searched before LD_LIBRARY_PATH) reaches an MPI library."""
    holders = []
    for lib in [top, *own.libraries.values()]:
        if lib.info.rpath and not lib.info.runpath:
            reaches = [n for n in lib.info.needed if n in ALL_MPI_NAMES]
            if reaches:
                holders.append(str(lib.path))
    return holders


def _check_rpath(report, plan, top, own, planned, path, glibc) -> None:
    """An executable (or a library) whose DT_RPATH reaches its own MPI keeps the host MPI
    out: name each remedy that would run it on the host MPI, or why it would not."""
    holders = _rpath_holders(top, own)
    if not holders:
        return
    for how in remedy.REMEDIES:
        why = remedy.why_not(how, glibc, holders, str(top.path))
        if not why:
            trial = loader.closure(str(top.path), planned, path, **_under(plan, how, own))
            pick = abi_checks.first_of(trial, discover.MAIN_LIBRARY[plan.abi])
            if not pick or pick.path.parent != PurePosixPath(LINKS_DIR):
                why = f"under it the loader still picks {pick.path if pick else 'no libmpi'}"
        report.remedies[how] = why
    applying = [how for how, why in report.remedies.items() if not why]
    if report.remedy:
        if report.remedies[report.remedy]:
            report.problems.append(
                f"--rpath-remedy {report.remedy} does not apply: {report.remedies[report.remedy]}"
            )
        return
    where = f"DT_RPATH of {', '.join(holders)}"
    if applying:
        report.problems.append(
            f"{where}: searched before LD_LIBRARY_PATH, so the image's own MPI wins over the "
            f"bound host MPI (relink with --enable-new-dtags, or bind with --rpath-remedy "
            f"{' | '.join(applying)})"
        )
    else:
        report.problems.append(
            f"{where}: searched before LD_LIBRARY_PATH, so the image's own MPI wins, and no "
            "remedy applies (relink with --enable-new-dtags, or run it in hybrid mode with "
            "its own MPI: `climstack bind SITE --mode hybrid`)"
        )


def _check_glibc(report: Report, host_libs: list, top, plain: loader.View | None) -> None:
    """The GLIBC_* versions the bound host libraries need from the image's C library (in
    an image, `plain`; none on the host)."""
    libc = loader.find("libc.so.6", top, [], [], plain) if plain is not None else None
    report.glibc_missing = _glibc_versions(
        [lib.info for lib in host_libs], libc.info if libc else None
    )
    if report.glibc_missing:
        report.problems.append(
            f"the bound host libraries need {', '.join(report.glibc_missing)} from the "
            "image's C library, which lacks them (use an image with a newer glibc)"
        )


PROBE_KEYS = ("library", "loaded", "ranks", "pingpong", "abi")


def parse_probe(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        key, _, value = line.partition(": ")
        if key in PROBE_KEYS:
            found[key] = value.strip()
    return found


def run_probe(
    plan: Plan,
    image: Path,
    executable: str,
    launcher: list[str],
    timeout: int = 120,
    env: dict | None = None,
) -> process.CompletedProcess:
    """Run `executable` inside the image under the plan, started by `launcher` (host)."""
    return launch.launch(
        plan,
        runtimes.get(plan.runtime),
        launchers.given(launcher),
        image,
        [executable],
        env=env,
        timeout=timeout,
        check=False,
        what=f"{executable} in {image} under {plan.runtime}",
    )
