"""Apptainer: `apptainer exec -B ... --env ...`, or APPTAINER_BIND and APPTAINERENV_*
exports in a job (with the SINGULARITY* spellings too, which Apptainer also reads).
On this machine without a system `apptainer`, the one the project builds (bin/apptainer,
climstack.launch.provided_apptainer: 1.5.3); a Cray site's own everywhere else."""

import shlex
import shutil
from pathlib import Path

from climstack.launch.runtimes.base import Runtime
from climstack.pins import PROJECT_ROOT

PROGRAM = "apptainer"
PROVIDED = PROJECT_ROOT / "bin" / "apptainer"
#: how `apptainer build` squashes the SIFs climstack builds: gzip, which every Apptainer
#: and SingularityCE mounts, at level 1 instead of mksquashfs's 9 (a 735 MB image here:
#: 15 s instead of 62 s, for a SIF 9% larger, 285 MB instead of 261 MB)
SQUASH = ("--mksquashfs-args", "-comp gzip -Xcompression-level 1")


def on_this_machine() -> str:
    """The system's apptainer, else the one the project provides."""
    return PROGRAM if shutil.which(PROGRAM) else str(PROVIDED)


class Apptainer(Runtime):
    name = "apptainer"
    separators = ",:"
    image_format = "sif"
    local = 2
    #: the command, and the prefixes of the variables it reads (first wins)
    command = PROGRAM
    prefixes = ("APPTAINER", "SINGULARITY")
    #: the option by which the ranks one parent starts (a node's, under srun or mpiexec)
    #: share one container and one image mount (Apptainer >= 1.3; `bench scale` measured it
    #: flat per rank where one mount per rank is not); None: the runtime has none. Only for
    #: MPI programs: a follower joins the first rank's container, which must still run, and
    #: an MPI program's first rank waits in MPI_Init for every other (docs/performance.md)
    sharing = "--sharens"

    def program(self, plan) -> str:
        """The command a plan runs: this machine's for site local, else the site's own."""
        return (
            on_this_machine() if self.command == PROGRAM and plan.site == "local" else self.command
        )

    def exports(self, plan) -> str:
        """Shell exports that carry the plan to every `<runtime> exec` of a job."""
        self.check_bind_paths(plan)
        binds = ",".join(f"{src}:{dst}" for src, dst in plan.binds)
        lines = [f"# climstack bind plan: site {plan.site}, mode {plan.mode}"]
        for prefix in self.prefixes:
            lines.append(f"export {prefix}_BIND={shlex.quote(binds)}")
            for key, value in plan.runtime_env().items():
                lines.append(f"export {prefix}ENV_{key}={shlex.quote(value)}")
        return "\n".join(lines) + "\n"

    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd: str | None = None
    ) -> list[str]:
        """`<runtime> exec` with the binds and variables as options; `join` > 0: the node's
        ranks share one container (`sharing`), else one container per rank."""
        self.check_bind_paths(plan)
        args = [self.program(plan), "exec", *self._shared(join > 0)]
        for src, dst in plan.binds:
            args += ["-B", f"{src}:{dst}"]
        for key, value in plan.runtime_env().items():
            args += ["--env", f"{key}={value}"]
        if cwd:
            args += ["--pwd", cwd]
        return [*args, image, *command]

    def job_lines(
        self, plan, image: str, command: list[str], here: bool = False, share: bool = True
    ) -> tuple[list[str], str]:
        """(lines before srun, the per-rank command): the exports carry the plan; `here`:
        start in the step's directory (Apptainer binds it by default); `share`: the ranks of
        a node share one container (`sharing`: an MPI program's)."""
        lines = self.exports(plan).splitlines()
        where = ' "--pwd=$PWD"' if here else ""  # expanded at run time
        rest = shlex.join([image, *command])
        program = [self.program(plan), "exec", *self._shared(share)]
        return lines, f"{shlex.join(program)}{where} {rest}"

    def _shared(self, share: bool) -> list[str]:
        return [self.sharing] if share and self.sharing else []

    def env(self, home: bool = True) -> dict[str, str]:
        """Without the home: the plan binds nothing under $HOME, where it would mount it."""
        return {} if home else {f"{self.prefixes[0]}_NO_HOME": "1"}

    def pull(self, reference: str, work: Path) -> Path:
        """`apptainer pull docker://` into a SIF named after the tag."""
        from climstack.launch import oci_images  # the registry client, only when pulling

        sif = work / (reference.rsplit(":", 1)[-1] + ".sif")
        return oci_images.pull_apptainer(on_this_machine(), reference, sif)
