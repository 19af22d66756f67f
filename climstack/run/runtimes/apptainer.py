"""Apptainer (and SingularityCE, which reads the SINGULARITY* spellings)."""

import shlex

from climstack.run.runtimes import check_bind_paths

NAME = "apptainer"
SEPARATORS = ",:"


def exports(plan) -> str:
    """Shell exports that carry the plan to every `apptainer exec` of a job."""
    check_bind_paths(plan, SEPARATORS)
    binds = ",".join(f"{src}:{dst}" for src, dst in plan.binds)
    lines = [f"# climstack bind plan: site {plan.site}, mode {plan.mode}"]
    for prefix in ("APPTAINER", "SINGULARITY"):
        lines.append(f"export {prefix}_BIND={shlex.quote(binds)}")
        for key, value in plan.runtime_env().items():
            lines.append(f"export {prefix}ENV_{key}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def exec_args(plan, image: str, command: list[str]) -> list[str]:
    check_bind_paths(plan, SEPARATORS)
    args = ["apptainer", "exec"]
    for src, dst in plan.binds:
        args += ["-B", f"{src}:{dst}"]
    for key, value in plan.runtime_env().items():
        args += ["--env", f"{key}={value}"]
    return [*args, image, *command]


def job_lines(plan, image: str, command: list[str]) -> tuple[list[str], str]:
    """(lines before srun, the per-rank command): the exports carry the plan."""
    return exports(plan).splitlines(), shlex.join(["apptainer", "exec", image, *command])


def check_image(plan, image) -> None:
    """Apptainer creates missing mount points itself."""
