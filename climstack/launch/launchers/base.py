"""What every host launcher offers: how the host starts N ranks of a command."""

from abc import ABC, abstractmethod
from typing import ClassVar


class Launcher(ABC):
    """A host launcher (mpiexec, srun): the command line that starts the ranks."""

    #: as the registry names it
    name: ClassVar[str] = ""

    @abstractmethod
    def argv(
        self, ranks: int = 1, nodes: int = 1, extra=(), het_group: int | None = None
    ) -> list[str]:
        """The launcher's command for `ranks` ranks on `nodes` nodes (`extra`: options
        after its own; `het_group`: the component of a heterogeneous job, if any)."""

    def env(self) -> dict[str, str]:
        """Host variables it needs (none by default)."""
        return {}

    def step(self, components: list[tuple[list[str], str]]) -> str:
        """One job step of (launcher argv, per-rank command) components, joined by `:`
        in a single launch (MPMD: one MPI_COMM_WORLD)."""
        parts = [" ".join([*argv[1:], command]) for argv, command in components]
        return " ".join([*components[0][0][:1], " \\\n  : ".join(parts)])


class Given(Launcher):
    """A launcher command line as a user wrote it (its ranks in it), used as is; empty:
    the program runs alone, without a launcher."""

    def __init__(self, command=()):
        self.command = list(command)

    def argv(self, ranks=1, nodes=1, extra=(), het_group=None) -> list[str]:
        return [*self.command, *extra]
