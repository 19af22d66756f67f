"""Slurm job scripts that run a container in bind, hybrid or fabric mode.

One `srun` per job; a coupled model (ESM4: atmosphere and ocean as separate executables in
one MPI_COMM_WORLD) is a heterogeneous job whose components are joined by `:` in that
srun. Lessons built in (Gaea containers paper and our tests): heterogeneous steps hung
with `--export=NONE`, so the environment is exported (ALL) and the plan's settings are set
on the container, not left to the launcher; the executable must load the host MPI, so in
bind mode an image directory is checked with `climstack verify` before a script is written,
and with --parity the job first runs `climstack parity` on its first node; the MPI plugin is
the site's (cray_shasta on HPE Cray EX, pmi2 here).
"""

import shlex
from dataclasses import dataclass

from climstack.bind.plan import Plan
from climstack.check import parity
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.jobs import rendering
from climstack.launch import launch, launchers, runtimes
from climstack.pins import PROJECT_ROOT


@dataclass
class Component:
    nodes: int
    ntasks: int
    command: list[str]

    @classmethod
    def parse(cls, spec: str) -> "Component":
        """'NODESxTASKS command args...', e.g. '1x4 /opt/view/bin/ocean.exe -n 5'."""
        shape, _, command = spec.strip().partition(" ")
        try:
            nodes, ntasks = (int(n) for n in shape.lower().split("x"))
        except ValueError as err:
            raise ClimstackError(
                f"component {spec!r}: expected 'NODESxTASKS command'",
                fix="e.g. --component '1x2 /opt/view/bin/atmos.exe'",
            ) from err
        example = "e.g. --component '1x2 /opt/view/bin/atmos.exe'"
        if not command.strip():
            raise ClimstackError(f"component {spec!r} has no command", fix=example)
        if nodes < 1 or ntasks < nodes:
            raise ClimstackError(
                f"component {spec!r}: {nodes} nodes and {ntasks} tasks (at least 1 node, and "
                "a task on every node)",
                fix=example,
            )
        try:
            return cls(nodes, ntasks, shlex.split(command))
        except ValueError as err:  # an unclosed quote
            raise ClimstackError(f"component {spec!r}: {err}", fix=example) from err


def script(
    site: sites.Site,
    plan: Plan,
    image: str,
    components: list[Component],
    job_name: str = "climstack",
    export: str = "ALL",
    extra: list[str] = (),
    parity_native: str = "",
    parity_probe: str = parity.DEFAULT_PROBE,
    share: bool = True,
) -> str:
    """The job script; `share` False: each rank its own container (see launch.job_step)."""
    config = site.slurm
    het = len(components) > 1
    if het and export.upper() == "NONE":
        raise ClimstackError(
            "heterogeneous job steps hang with --export=NONE (seen on Gaea)",
            fix="keep the default --export=ALL; the plan sets the "
            "container's environment itself",
        )
    note = f"# bind plan: site {plan.site}, mode {plan.mode}, runtime {plan.runtime}" + (
        f", host MPI {plan.mpi.get('version')}" if plan.mpi else ""
    )
    parity_line = ""
    if parity_native:  # on the first node, 2 ranks, the same launcher as the job
        preflight = launchers.get("srun", mpi=config["mpi"])
        launcher = " ".join(preflight.argv(2, 1, ["--overcommit"], 0 if het else None))
        parity_line = shlex.join(
            [
                str(PROJECT_ROOT / "bin" / "climstack"),
                "parity",
                f"--plan={plan.directory}",
                f"--image={image}",
                f"--native={parity_native}",
                f"--probe={parity_probe}",
                f"--launcher={launcher}",
            ]
        )
    shapes = [(c.ntasks, c.nodes, c.command) for c in components]
    before, step = launch.job_step(
        plan, runtimes.get(plan.runtime), srun(site), image, shapes, share=share
    )
    return rendering.render(
        "climstack.jobs",
        "job.sh.j2",
        preamble=preamble(site, components, job_name, export, extra, note),
        parity=parity_line,
        before=before,
        step=step,
    )


def preamble(
    site: sites.Site, components, job_name: str, export="ALL", extra=(), note: str = ""
) -> list[str]:
    """The #SBATCH lines of a job (a het group per component) and its first commands
    (templates/preamble.sh.j2); `note`: a comment after `set -euo pipefail`."""
    config = site.slurm
    directives = [f"--{key}={value}" for key, value in config["directives"].items()]
    text = rendering.render(
        "climstack.jobs",
        "preamble.sh.j2",
        job_name=job_name,
        export=export,
        components=components,
        directives=[*directives, *config["extra_directives"], *extra],
        note=note,
        setup=config["setup"],
    )
    return text.splitlines()


def srun(site: sites.Site) -> launchers.Launcher:
    """The site's srun: its MPI plugin, every task bound to cores."""
    return launchers.get("srun", mpi=site.slurm["mpi"], options=["--cpu-bind=cores"])


def srun_options(site: sites.Site, component: Component, het_group: int | None = None) -> str:
    """The site's srun options for one component (of het group `het_group`)."""
    argv = srun(site).argv(component.ntasks, component.nodes, het_group=het_group)
    return " ".join(argv[1:])
