"""Part of `climstack verify`: the program run under an RPATH remedy (climstack.bind.remedy),
as the loader model takes it, and the advice when a DT_RPATH keeps the host MPI out: each
remedy named only where the link map under it runs the program on the host MPI, with
nothing of its own MPI left and no library gone missing."""

from climstack.bind import loader, remedy
from climstack.bind.plan import Plan
from climstack.check import mpi_map


def under(plan: Plan | None, how: str, own: loader.Closure) -> dict:
    """The loader's arguments for the program run under RPATH remedy `how`: preload and
    inhibit run it through ld.so (explicitly); runpath runs the RUNPATH copy."""
    if not (plan and how):
        return {}
    if how == "preload":
        return {"preload": remedy.preloads(plan, set(own.libraries))}
    if how == "inhibit":
        return {"inhibit": True}
    return {"main": lambda info: remedy.as_loaded(how, info)}


def _rpath_holders(closure: loader.Closure, plan: Plan) -> list[str]:
    """The objects whose DT_RPATH (searched before LD_LIBRARY_PATH) found an MPI library of
    the image under the plan."""
    return sorted(
        {
            lib.whose
            for lib in closure.libraries.values()
            if lib.how == "RPATH"
            and mpi_map.is_mpi_library(lib)
            and not mpi_map.from_host(lib, plan.binds)
        }
    )


def check(report, plan, executable, own, planned, path, glibc) -> None:
    """An executable (or a library) whose DT_RPATH reaches its own MPI keeps the host MPI
    out: name each remedy that would run it on the host MPI (its whole link map checked
    under the remedy, libraries that then go missing included), or why it would not."""
    plain_plan = loader.closure(executable, planned, path) if report.remedy else None
    holders = _rpath_holders(plain_plan or loader.closure(executable, planned, path), plan)
    if not holders:
        return
    for how in remedy.REMEDIES:
        why = remedy.why_not(how, glibc, holders, executable)
        if not why:
            trial = loader.closure(executable, planned, path, **under(plan, how, own))
            lost = [f"the loader finds no {name}" for name in trial.missing]
            why = "; ".join(lost + mpi_map.image_mpi(trial, plan))
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
