"""MPICH's Hydra `mpiexec`: every rank on this host (Debian's mpiexec.mpich first)."""

import shutil

from climstack.errors import ClimstackError
from climstack.launch.launchers.base import Launcher

#: the commands looked for on PATH, first found wins
PROGRAMS = ("mpiexec.mpich", "mpiexec")


def on_path() -> str:
    found = next(filter(None, map(shutil.which, PROGRAMS)), None)
    if not found:
        raise ClimstackError("no MPICH `mpiexec` on PATH", fix="apt-get install mpich (bin/setup)")
    return found


class Mpiexec(Launcher):
    name = "mpiexec"

    def __init__(self, program: str | None = None):
        self.program = program  # default: found on PATH when launching

    def argv(self, ranks=1, nodes=1, extra=(), het_group=None) -> list[str]:
        return [self.program or on_path(), "-n", str(ranks), *extra]
