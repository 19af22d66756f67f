"""Will an executable (on the host or in an image) run on the host MPI under a bind plan?

Reads, without running anything, the whole link map of the process inside the image with
the plan's binds and LD_LIBRARY_PATH, under the plan's RPATH remedy (climstack.bind.loader),
and from it (climstack.check.mpi_map): which file provides each MPI symbol any object binds
(C, the Fortran bindings, gfortran's module procedures, MPICH's link constants and common
blocks), that every MPI library loaded is the host's and no object holds an MPI of its own;
that the executable's ABI is the plan's, the MPICH base of both sides (the image's no newer
than the host's; the standard ABI has none), the glibc symbol versions the bound host
libraries need from the image's C library. An RPATH that keeps the host MPI out is refused
with the remedies whose own link map would run it on the host MPI. Where the plan's runtime
is at hand, the image's own ld.so is asked for its list and must agree (check.oracle).
Then, with --run, runs it (mpi-probe) and compares what it loaded with the plan.
"""

import re
from pathlib import Path, PurePosixPath

from climstack.bind import discover, elf, loader, remedy
from climstack.bind.plan import Plan
from climstack.bind.stages import LINKS_DIR
from climstack.check import abi_checks, family_check, mpi_map, oracle, rpath_advice
from climstack.check import spack_provenance, wrapper_check
from climstack.check.verdict import Report
from climstack.cray import mpich_base
from climstack.common import process
from climstack.common.versions import release
from climstack.launch import launch, launchers, runtimes

WATCHED = ("libmpi.so.12", "libmpi_abi.so.1", "libxpmem.so.0")
#: Apptainer's own library directory, which it adds to LD_LIBRARY_PATH: first before 1.5
#: (and in SingularityCE), last since 1.5.0 (after the image's own entries)
APPTAINER_LIBS = "/.singularity.d/libs"
FORTRAN_MPI = discover.ABI_NAMES["libmpifort.so.12"]


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


def check(
    executable: str,
    plan: Plan | None,
    image: Path | None = None,
    runtime_image=None,
    ask: bool = True,
) -> Report:
    """The report for `executable` (a path inside `image`, or on the host without one).
    `runtime_image`: the image as its runtime takes it (a directory or a SIF; `image` is
    its files): the image's own ld.so is then asked too (climstack.check.oracle); `ask`
    False: nothing of the image runs, not even for its search rules (glibc_rules)."""
    root = image or Path("/")
    plain = loader.View(root, ask=ask)  # the image as built
    binds = {dst: Path(src) for src, dst in plan.binds} if plan else {}
    planned = loader.View(root, binds, ask=ask) if plan else plain
    report = Report(executable, remedy=plan.rpath_remedy if plan else "")
    if left := left_to_runtime(plan):  # nothing is checked against a search order unknown
        report.problems += left
        report.oracle = "not asked: the plan was refused"
        return report
    path = plan.library_path if plan else []
    top = _read_executable(report, executable, plain)
    rules = plain.glibc(top.info.machine)
    report.rules, report.rules_stand_in = rules.source, rules.stand_in
    libc = loader.find_one("libc.so.6", top, plain)
    glibc = remedy.glibc_of(libc.info if libc else None)
    report.glibc = ".".join(map(str, glibc)) if glibc else ""
    own = _image_side(report, executable, plain)
    planned_closure = _planned_side(
        report, executable, planned, path, rpath_advice.under(plan, report.remedy, own)
    )
    uses_mpi = mpi_map.uses_mpi(own)
    host_libs = []  # the host MPI's libraries and what they load from the plan
    wrapped = None  # libmpiwrapper's link map (the standard ABI through mpi_abi_wrapper)
    if not plan:
        mpi_map.read(report, own)
        report.unchecked.append(
            "no --plan: nothing is checked against a host MPI (write one with "
            "`climstack bind SITE --out DIR`, then pass --plan DIR)"
        )
    elif plan.mode == "bind" and uses_mpi and abi_checks.check_abi(report, plan, own):
        host_libs += _host_mpi(report, plan, planned)
        wanted = mpi_map.check_bind(report, plan, planned_closure)
        if plan.abi == "standard":
            abi_checks.check_pmpi(report, wanted, report_exports(host_libs))
            abi_checks.check_standard_fortran(report, plan, top, own)
            if plan.wrapped:
                wrapped = wrapper_check.check(report, plan, planned, top.info.interpreter)
                host_libs += [wrapped.root, *wrapped.libraries.values()]
        else:
            _check_bases(report)
            _check_fortran(report, plan, own, planned_closure)
        rpath_advice.check(report, plan, executable, own, planned, path, glibc)
    elif not uses_mpi and not plan.families:  # a serial NetCDF program may bind
        report.problems.append(
            f"{executable} does not use MPI (no MPI library in its link map, no MPI symbol "
            "imported by it or any library it loads)"
        )
    if plan:
        report.families, found = family_check.check(plan, own, planned_closure)
        report.problems += found
        host_libs += [
            lib
            for lib in planned_closure.libraries.values()
            if lib.path.parent == PurePosixPath(LINKS_DIR)
        ]
    _check_glibc(report, host_libs, top, plain if image else None)
    if plan and runtime_image is not None:
        report.oracle, found = oracle.ask(plan, runtime_image, root, executable, planned_closure)
        report.problems += found
        if wrapped is not None and top.info.interpreter and report.oracle in oracle.ASKED:
            wrapper_check.confirm(report, plan, runtime_image, root, wrapped, top.info.interpreter)
    elif not report.oracle:
        where = "the image's runtime was not given" if image else "no --image"
        report.oracle = f"not asked: {where}, so no real ld.so listed the link map"
    return report


def left_to_runtime(plan: Plan | None) -> list[str]:
    """Why the plan is refused, if it binds libraries at APPTAINER_LIBS and leaves their
    search to the runtime: which library wins then depends on the runtime's release and the
    image's own LD_LIBRARY_PATH, not on the plan."""
    relied = [
        f"{src} at {dst}"
        for src, dst in (plan.binds if plan else [])
        if PurePosixPath(dst).is_relative_to(APPTAINER_LIBS)
    ]
    if not relied or APPTAINER_LIBS in plan.library_path:
        return []
    return [
        f"the plan binds {', '.join(relied)} and leaves its search to the runtime: Apptainer "
        f"puts {APPTAINER_LIBS} on LD_LIBRARY_PATH first before 1.5 but last since 1.5.0, "
        "after the image's own entries, so an image that sets LD_LIBRARY_PATH keeps its own "
        f"libraries (bind them at {LINKS_DIR} on the plan's LD_LIBRARY_PATH, as `climstack "
        f"bind` writes, or name {APPTAINER_LIBS} in it)"
    ]


def report_exports(host_libs) -> set:
    return set().union(*(lib.info.mpi_exports() for lib in host_libs))


def _read_executable(report: Report, executable: str, plain: loader.View):
    """Its ELF as loaded; DT_NEEDED, RPATH and RUNPATH reported."""
    top = loader.load(executable, plain)
    report.needed, report.rpath, report.runpath = top.info.needed, top.info.rpath, top.info.runpath
    report.starts_mpi = top.info.starts_mpi()
    return top


def _image_side(report: Report, executable: str, plain: loader.View) -> loader.Closure:
    """The link map the image makes without the plan; its MPI reported: its library's
    version, or, where the image holds none, the MPI its Spack spec names."""
    own = loader.closure(executable, plain)
    own_mpi = abi_checks.first_of(own, "libmpi.so.12")
    if own_mpi and (version := elf.mpich_version(own_mpi.host)):
        report.image_mpi, report.image_base = str(version), version.mpich_base
    elif not own_mpi and (built := spack_provenance.built_against(plain.root, executable)):
        report.image_mpi, report.image_base = built
    return own


def _planned_side(
    report: Report, executable: str, planned: loader.View, path, under: dict
) -> loader.Closure:
    """The link map under the plan (and its RPATH remedy); the loader's picks, what it
    misses and the symbol versions the plan's libraries lack, reported."""
    planned_closure = loader.closure(executable, planned, path, **under)
    for name in WATCHED:
        library = abi_checks.first_of(planned_closure, name)
        if library:
            report.picks[name] = {
                "path": str(library.path),
                "rule": library.how,
                "whose": library.whose,
                "host": str(library.host.resolve()),
            }
    for name, who in planned_closure.missing.items():
        report.problems.append(f"the loader finds no {name} (needed by {', '.join(who)})")
    report.version_missing = version_mismatches(planned_closure)
    for line in report.version_missing:
        report.problems.append(f"symbol version {line}")
    return planned_closure


def _host_mpi(report: Report, plan: Plan, planned) -> list:
    """The host MPI's libraries (and what they load from the plan), its version, and how
    many MPI symbols they export."""
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
    report.exported = len(report_exports(host_libs))
    return host_libs


def _check_bases(report: Report) -> None:
    """MPICH keeps its ABI backward only: a program built on a newer series may pass
    handles or datatypes (MPI-4's MPI_ERRORS_ABORT) an older library does not know, with
    no symbol to catch it. The image's MPICH base must not be newer than the host's."""
    unknown = [  # a base without major.minor ('unknown', '5') cannot be compared
        side
        for side, base in (("the image's", report.image_base), ("the host's", report.host_base))
        if len(release(base)) < 2
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


def _check_glibc(report: Report, host_libs: list, top, plain: loader.View | None) -> None:
    """The GLIBC_* versions the bound host libraries need from the image's C library (in
    an image, `plain`; none on the host)."""
    libc = loader.find_one("libc.so.6", top, plain) if plain is not None else None
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


def loaded_mismatch(plan: Plan, probe: dict[str, str]) -> str:
    """Why the MPI library the probe says it loaded is not the host's that the plan binds
    ('' when it is): a link of the plan's links directory, or the host file behind one."""
    loaded = probe.get("loaded", "")
    if not loaded:
        return "the program printed no `loaded:` line, so what it loaded is unknown"
    names = set(discover.ABIS[plan.abi]) | {n for s in discover.ABIS[plan.abi].values() for n in s}
    links = {f"{LINKS_DIR}/{name}" for name in plan.links if name in names}
    if loaded in links or loaded in {plan.links[name] for name in plan.links if name in names}:
        return ""
    return (
        f"it loaded {loaded}, not the host MPI the plan binds ({', '.join(sorted(links))}): "
        "what ran is not what was verified"
    )


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
