"""Slurm's `srun`, with the site's MPI plugin (cray_shasta on HPE Cray EX, pmi2 here)."""

from climstack.launch.launchers.base import Launcher


class Srun(Launcher):
    name = "srun"

    def __init__(self, mpi: str | None = None, options=()):
        self.mpi = mpi  # the --mpi plugin
        self.options = list(options)  # before the shape, e.g. --cpu-bind=cores

    def argv(self, ranks=1, nodes=1, extra=(), het_group=None) -> list[str]:
        args = ["srun", *([f"--mpi={self.mpi}"] if self.mpi else []), *self.options]
        args += [f"--nodes={nodes}", f"--ntasks={ranks}", *extra]
        return args + ([f"--het-group={het_group}"] if het_group is not None else [])
