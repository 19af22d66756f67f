"""What every container runtime offers: the one type the rest of climstack talks to.

A runtime module defines a subclass with a `name` (the registry, climstack.launch.runtimes,
finds it). Code outside runtimes/ asks a runtime what it does (its attributes and methods)
and never branches on its name.
"""

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from climstack.errors import ClimstackError


class Runtime(ABC):
    """A container runtime: how a bind plan becomes its command line, a job's lines, and
    what it needs of an image."""

    #: as --runtime, site.yaml's `runtime:` and plan.json name it
    name: ClassVar[str] = ""
    #: characters its bind syntax cannot carry in a path
    separators: ClassVar[str] = ""
    #: what it runs: "sif" (a SIF made from the image directory), "directory" or "reference"
    #: (an image in the runtime's own store)
    image_format: ClassVar[str] = "sif"
    #: > 0: this machine runs it (container-smoke, bench local), in this order
    local: ClassVar[int] = 0
    #: the plan's binds are read-only (a CDI spec's): a run's directory is the start
    #: directory's own writable mount (exec_args' cwd), not a bind of the plan
    read_only_binds: ClassVar[bool] = False
    #: a killed launch can leave its containers (and their monitor) running behind it
    outlives_its_launch: ClassVar[bool] = False
    #: the option by which the ranks of a node share one container in a job (Apptainer's
    #: --sharens), which its job_lines then take a `share` keyword for; None: none
    sharing: ClassVar[str | None] = None

    def check_bind_paths(self, plan) -> None:
        """Refuse paths the runtime's bind syntax cannot express."""
        for pair in plan.binds:
            for path in pair:
                if any(s in path for s in self.separators):
                    raise ClimstackError(
                        f"bind path {path!r} contains one of {self.separators!r}, "
                        "which the runtime's bind syntax cannot express",
                        fix="move or link it to a path without them",
                    )

    @abstractmethod
    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd: str | None = None
    ) -> list[str]:
        """The host command that runs `command` in `image` under the plan, one rank's;
        `join` > 0: that many ranks of a node may share one container, where the runtime
        can (otherwise it is ignored); `cwd`: the working directory in the container."""

    def launch_args(
        self, plan, image: str, launcher: list[str], command: list[str], join: int = 0,
        cwd: str | None = None,
    ) -> list[str]:  # fmt: skip
        """The host command line that starts `launcher` (its argv for the ranks) with each
        rank running `command` in the image: by default the launcher, then exec_args."""
        return [*launcher, *self.exec_args(plan, image, command, join=join, cwd=cwd)]

    @abstractmethod
    def job_lines(
        self, plan, image: str, command: list[str], here: bool = False
    ) -> tuple[list[str], str]:
        """(lines before the job step, the per-rank command) of a job script; `here`: the
        command starts in the step's working directory ($PWD at run time), bound in. A
        runtime with `sharing` also takes `share` (default True: a node's ranks share one
        container; False for a program that is not MPI's)."""

    def share_option(self, share: bool) -> dict:
        """job_lines' keyword for `share`: given only to turn sharing off, and only where the
        runtime has `sharing` (a plug-in written before it still writes jobs)."""
        return {} if share or not self.sharing else {"share": False}

    def exporter(self) -> "Runtime":
        """The runtime whose `exports` carry this one's plan in a job's environment
        (`climstack bind --format env`): itself, unless it has no variables for binds."""
        return self

    def exports(self, plan) -> str:
        """Shell exports that carry the plan to every container of a job."""
        raise ClimstackError(
            f"{self.name} has no environment variables for binds",
            fix="--format args (its command line) or json",
        )

    def check_image(self, plan, image: Path) -> None:
        """Refuse an image the plan cannot run in (by default every image can)."""

    def prepare_image(self, plan, image: Path) -> list[str]:
        """Make what the runtime cannot make itself in the image (mount points); made."""
        return []

    def env(self, home: bool = True) -> dict[str, str]:
        """Host variables its command needs; `home` False: without the user's home."""
        return {}

    def pull(self, reference: str, work: Path) -> Path:
        """Pull an OCI image into `work` as this runtime runs it; its path."""
        raise ClimstackError(
            f"{self.name} cannot pull images here", fix="pull it with the site's tools"
        )

    def program_in(self, image: Path, name: str) -> str:
        """How a command names program `name` of a pulled image (default: on its PATH)."""
        return name
