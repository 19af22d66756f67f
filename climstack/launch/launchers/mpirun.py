"""Open MPI's `mpirun` (PRRTE): every rank on this host. As root it must be allowed, and
more ranks than cores must be asked for (--oversubscribe: a 2-core machine runs 2+ ranks)."""

import os

from climstack.launch.launchers.base import Launcher


class Mpirun(Launcher):
    name = "mpirun"

    def __init__(self, program: str = "mpirun", oversubscribe: bool = True):
        self.program = program
        self.oversubscribe = oversubscribe

    def argv(self, ranks=1, nodes=1, extra=(), het_group=None) -> list[str]:
        args = [self.program, "-n", str(ranks)]
        args += ["--oversubscribe"] if self.oversubscribe else []
        args += ["--allow-run-as-root"] if os.geteuid() == 0 else []
        return [*args, *extra]
