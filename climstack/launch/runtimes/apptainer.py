"""Apptainer: `apptainer exec -B ... --env ...`, or APPTAINER_BIND and APPTAINERENV_*
exports in a job (with the SINGULARITY* spellings too, which Apptainer also reads).
On this machine without a system `apptainer`, the one the project provides (bin/apptainer,
climstack.launch.sid_apptainer); a Cray site's own everywhere else."""

import shlex
import shutil

from climstack.launch.runtimes import check_bind_paths
from climstack.pins import PROJECT_ROOT

NAME = "apptainer"
SEPARATORS = ",:"
#: the command, and the prefixes of the variables it reads (first wins)
PROGRAM, PREFIXES = "apptainer", ("APPTAINER", "SINGULARITY")
PROVIDED = PROJECT_ROOT / "bin" / "apptainer"


def on_this_machine() -> str:
    """The system's apptainer, else the one the project provides."""
    return PROGRAM if shutil.which(PROGRAM) else str(PROVIDED)


def program(plan, name: str = PROGRAM) -> str:
    """The command a plan runs: this machine's for site local, else the site's own."""
    return on_this_machine() if name == PROGRAM and plan.site == "local" else name


def exports(plan, prefixes=PREFIXES) -> str:
    """Shell exports that carry the plan to every `<runtime> exec` of a job."""
    check_bind_paths(plan, SEPARATORS)
    binds = ",".join(f"{src}:{dst}" for src, dst in plan.binds)
    lines = [f"# climstack bind plan: site {plan.site}, mode {plan.mode}"]
    for prefix in prefixes:
        lines.append(f"export {prefix}_BIND={shlex.quote(binds)}")
        for key, value in plan.runtime_env().items():
            lines.append(f"export {prefix}ENV_{key}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def exec_args(plan, image: str, command: list[str], name=PROGRAM) -> list[str]:
    check_bind_paths(plan, SEPARATORS)
    args = [program(plan, name), "exec"]
    for src, dst in plan.binds:
        args += ["-B", f"{src}:{dst}"]
    for key, value in plan.runtime_env().items():
        args += ["--env", f"{key}={value}"]
    return [*args, image, *command]


def job_lines(plan, image: str, command: list[str], name=PROGRAM, prefixes=PREFIXES):
    """(lines before srun, the per-rank command): the exports carry the plan."""
    lines = exports(plan, prefixes).splitlines()
    return lines, shlex.join([program(plan, name), "exec", image, *command])


def check_image(plan, image) -> None:
    """Apptainer creates missing mount points itself."""
