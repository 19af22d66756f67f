"""podman-hpc (NERSC), what Perlmutter runs: the plan as a podman-hpc module
(climstack.bind.podman_hpc) in a modules directory of the plan's, which
PODMANHPC_MODULES_DIR points podman-hpc at; `podman-hpc run --climstack-<site>` applies it
(its hook binds the rules, its `additional_args` carry the variables and namespaces). The
module's `shared_run` gives one container per node under srun: podman-hpc starts it and
`exec`s each rank of the node into it, so the ranks share the node's memory as on the host.
The image is a reference that `podman-hpc pull` has migrated to its shared store."""

import shlex
from pathlib import Path

from climstack.bind import podman_hpc
from climstack.errors import ClimstackError
from climstack.launch.runtimes.base import Runtime

PROGRAM = "podman-hpc"
MODULES_DIR = "PODMANHPC_MODULES_DIR"


class PodmanHpc(Runtime):
    name = "podman-hpc"
    separators = ":"  # a module's bind rule is host:container
    image_format = "reference"  # an image podman-hpc has pulled (and migrated)
    local = 0  # not on this machine: its storage and hooks are a centre's set-up

    def modules_dir(self, plan) -> Path:
        """The plan's modules directory, its module written (again if the plan changed)."""
        self.check_image(plan, "")
        directory = Path(plan.directory) / "podman-hpc"
        podman_hpc.write(plan, directory)
        return directory

    def _run(self, plan, where: list[str]) -> str:
        """`podman-hpc run` with the plan's module, up to the image."""
        return shlex.join([PROGRAM, "run", "--rm", f"--{podman_hpc.name_of(plan)}", *where])

    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd: str | None = None
    ) -> list[str]:
        """`podman-hpc run` of command in the image under the plan's module; under srun one
        container per node whatever `join` says (the module's `shared_run`)."""
        where = [f"--volume={cwd}:{cwd}", f"--workdir={cwd}"] if cwd else []
        return [
            "env",
            f"{MODULES_DIR}={self.modules_dir(plan)}",
            *shlex.split(self._run(plan, where)),
            str(image),
            *command,
        ]

    def job_lines(
        self, plan, image: str, command: list[str], here: bool = False
    ) -> tuple[list[str], str]:
        """(the export of the plan's modules directory, each rank's `podman-hpc run`);
        `here`: the step's directory bound at its own path, and the start there."""
        directory = self.modules_dir(plan)
        lines = [
            f"# climstack bind plan: site {plan.site}, mode {plan.mode}, as podman-hpc module "
            f"{podman_hpc.name_of(plan)}: one container per node (shared_run)",
            f"export {MODULES_DIR}={shlex.quote(str(directory))}",
        ]
        where = ' "--volume=$PWD:$PWD" "--workdir=$PWD"' if here else ""
        return lines, f"{self._run(plan, [])}{where} {shlex.join([str(image), *command])}"

    def check_image(self, plan, image) -> None:
        if not plan.directory:
            raise ClimstackError(
                "podman-hpc takes the plan as a module in the plan's directory: it has none",
                fix="write the plan with `climstack bind SITE --out DIR` and load DIR",
            )
