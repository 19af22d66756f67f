"""The bind plan as a podman-hpc module (NERSC's format, modules.d/*.yaml): `podman-hpc run
--<cli_arg>` sets its `env` variable, which makes podman-hpc's OCI hook bind each `bind` rule
(`host:container`) into the container, and adds its `additional_args` to `podman run`: the
plan's variables, the MPI launcher's, and the host's IPC and PID namespaces (as its own
`mpich` module). Made from the Plan alone, as the CDI spec (bind.cdi)."""

import re
from pathlib import Path

import yaml

from climstack.bind.plan import Plan
from climstack.common import atomic
from climstack.errors import ClimstackError

#: the launchers' variables a rank needs from the host (Slurm, PALS, Hydra's PMI)
LAUNCHER_ENV = ("SLURM_*", "PALS_*", "PMI_*")
#: podman-hpc's own MPI modules, which bind another MPI
CONFLICTS = ["mpich", "openmpi-pmi2", "openmpi-pmix", "cuda-mpich"]


def name_of(plan: Plan) -> str:
    site = re.sub(r"[^a-z0-9]+", "-", Path(plan.site).name.lower()).strip("-")
    return f"climstack-{site or 'site'}"


def module_of(plan: Plan) -> dict:
    """The module: name, cli_arg, help, env, conflicts, shared_run, additional_args, bind."""
    for pair in plan.binds:
        for path in pair:
            if ":" in path:
                raise ClimstackError(
                    f"bind path {path!r} contains ':', which a podman-hpc bind rule "
                    "(host:container) cannot carry",
                    fix="move or link it to a path without ':', or use --format cdi",
                )
    name = name_of(plan)
    args = [f"--env={pattern}" for pattern in LAUNCHER_ENV]
    args += [
        f"--env={key}={value}" for key, value in sorted(plan.runtime_env(joined=True).items())
    ]
    args += ["--ipc=host", "--pid=host"]
    return {
        "name": name,
        "cli_arg": name,
        "help": f"climstack bind plan: site {plan.site}, {plan.mode} mode "
        f"({plan.mpi.get('version', 'the image MPI')})",
        "env": f"ENABLE_{name.upper().replace('-', '_')}",
        "conflicts": list(CONFLICTS),
        "shared_run": True,  # one container per node, its ranks joined (as `bench` runs)
        "additional_args": args,
        "bind": [f"{src}:{dst}" for src, dst in plan.binds]
        + [f"{node}:{node}" for node in plan.devices],
    }


def write(plan: Plan, directory: Path) -> Path:
    """The module file in `directory` (a modules.d), named after the module."""
    module = module_of(plan)
    directory.mkdir(parents=True, exist_ok=True)
    return atomic.write_text(
        directory / f"{module['name']}.yaml",
        f"# written by `climstack bind {plan.site} --format podman-hpc`\n"
        + yaml.safe_dump(module, sort_keys=False, width=1000),
    )
