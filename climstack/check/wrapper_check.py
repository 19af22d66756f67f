"""The standard ABI through mpi_abi_wrapper (climstack.bind.abi_wrapper): what `verify`
checks of the half the program's link map does not show. libmpi_abi dlopens libmpiwrapper
from $MPI_ABI_WRAPPER_LIB with RTLD_DEEPBIND, so libmpiwrapper's own link map (itself, then
its libraries breadth first) must be the host MPI the plan binds, of the ABI the wrapper
was built against, and define every MPI symbol libmpiwrapper imports: one it lacks would
resolve to libmpi_abi's own entry point, which calls back into the wrapper. The image's
ld.so lists that link map too (`ld.so --list`) and must agree (check.oracle)."""

from pathlib import Path

from climstack.bind import abi_wrapper, loader, symbols
from climstack.bind.plan import Plan
from climstack.bind.stages import LINKS_DIR
from climstack.check import oracle
from climstack.check.verdict import Report

BACK = f"{LINKS_DIR}/{abi_wrapper.BACK}"


def check(report: Report, plan: Plan, planned: loader.View, through: str) -> loader.Closure:
    """Refuse what would not run (a wrapper of another MPI, an import the host MPI lacks);
    the wrapper's link map under the plan, for the oracle."""
    if plan.env.get(abi_wrapper.VARIABLE) != BACK:
        report.problems.append(
            f"the plan sets {abi_wrapper.VARIABLE}={plan.env.get(abi_wrapper.VARIABLE, '')!r}, "
            f"not {BACK}: libmpi_abi would dlopen another libmpiwrapper than the one bound, or "
            "none (write the plan again with `climstack bind SITE --abi standard`)"
        )
    closure = loader.closure(BACK, planned, plan.library_path)
    host = next(
        (name for name in plan.mpi.get("libraries", {}) if name in abi_wrapper.WRAPPED), ""
    )
    linked = [name for name in closure.root.info.needed if name in abi_wrapper.WRAPPED]
    built = linked[0] if linked else "no MPI library"
    if not host or built not in abi_wrapper.WRAPPED or not abi_wrapper.same_abi(built, host):
        report.problems.append(
            f"{BACK} (= {closure.root.host}) is built against "
            f"{abi_wrapper.WRAPPED.get(built, built)} ({built}), but the plan's host MPI "
            f"{plan.mpi.get('wrapper', {}).get('mpi', '')} is "
            f"{abi_wrapper.WRAPPED.get(host, 'of no ABI it knows')} ({host or '-'}): "
            f"{abi_wrapper.FIX}"
        )
        return closure
    loaded, bound_mpi = closure.get(built), planned.resolve(f"{LINKS_DIR}/{host}")
    if loaded and bound_mpi and loaded.host.resolve() != bound_mpi[1].resolve():
        report.problems.append(
            f"under the plan {BACK} loads {built} from {loaded.path} (by its {loaded.how}) "
            f"= {loaded.host}, not the host MPI the plan binds ({bound_mpi[1]}): it is built "
            f"against another MPI installation; {abi_wrapper.FIX}"
        )
    wanted = abi_wrapper.imports(closure.root.info)
    bound = symbols.bindings(closure, lambda symbol: symbol in wanted)
    lacking = sorted(s for s, b in bound.items() if b.provider is None)
    if lacking:
        report.problems.append(
            f"the host MPI ({plan.mpi.get('wrapper', {}).get('mpi', '')}) lacks "
            f"{len(lacking)} MPI symbols {BACK} imports ({', '.join(lacking[:6])}"
            f"{', ...' if len(lacking) > 6 else ''}): the wrapper was built against another "
            f"MPI release; {abi_wrapper.FIX}"
        )
    report.wrapper = {
        "library": str(closure.root.host),
        "built_against": built,
        "imports": len(wanted),
        "lacking": len(lacking),
    }
    return closure


def confirm(report: Report, plan: Plan, runtime_image, tree: Path, closure, through: str):
    """The image's own ld.so lists libmpiwrapper's link map under the plan, as the dlopen
    loads it; a disagreement, or a failure, is a problem."""
    answer, found = oracle.ask(plan, runtime_image, tree, BACK, closure, through=through)
    report.wrapper["oracle"] = answer
    report.problems += found
