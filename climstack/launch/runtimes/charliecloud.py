"""Charliecloud's unprivileged `ch-run` on an image directory."""

import os
import shlex
import uuid
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.launch.runtimes.apptainer import Apptainer
from climstack.launch.runtimes.base import Runtime


#: where a job step's working directory is bound when its ranks start there (job_lines)
HERE = "/mnt"


class Charliecloud(Runtime):
    name = "charliecloud"
    separators = ":"
    image_format = "directory"
    local = 1

    def exec_args(
        self, plan, image: str, command: list[str], join: int = 0, cwd: str | None = None
    ) -> list[str]:
        """`ch-run` of command in the image under the plan; `join` > 0: that many ranks of a
        node share one container (`--join`, a tag unique to this launch), which lets MPI use
        the single-copy shared-memory paths that separate user namespaces forbid."""
        self.check_bind_paths(plan)
        args = ["ch-run"]
        if join:
            args += [f"--join-ct={join}", f"--join-tag=climstack-{uuid.uuid4().hex[:12]}"]
        for src, dst in plan.binds:
            args.append(f"--bind={src}:{dst}")
        for key, value in plan.runtime_env(joined=bool(join)).items():
            args.append(f"--set-env={key}={value}")
        if cwd:  # ch-run starts in / otherwise
            args.append(f"--cd={cwd}")
        return [*args, image, "--", *command]

    def job_lines(
        self, plan, image: str, command: list[str], here: bool = False
    ) -> tuple[list[str], str]:
        """(lines before srun, the per-rank command): ch-run carries the plan itself; `here`:
        the step's directory bound at HERE and the start there (ch-run starts in /
        otherwise). Not at its own path: the directory is known only at run time, and
        ch-run cannot create a mount point in a read-only image; every image has /mnt."""
        ch_run, *rest = self.exec_args(plan, image, command)
        where = f' "--bind=$PWD:{HERE}" "--cd={HERE}"' if here else ""  # $PWD: at run time
        return [], f"{ch_run}{where} {shlex.join(rest)}"

    def exporter(self) -> Runtime:
        """Charliecloud has no variables for binds: Apptainer's exports instead."""
        return Apptainer()

    def check_image(self, plan, image: Path) -> None:
        """ch-run cannot create mount points in a read-only image directory: say which."""
        if not image.is_dir():
            return
        absent = [t for t in plan.mount_points() if not os.path.lexists(image / t.lstrip("/"))]
        if absent:
            raise ClimstackError(
                f"{image} lacks the mount points {', '.join(absent)}",
                fix=f"climstack bind {plan.site} --prepare-image {image} "
                "(creates empty directories, as ch-fromhost would)",
            )

    def prepare_image(self, plan, image: Path) -> list[str]:
        """The mount points, as empty directories and files (ch-run cannot create them,
        as ch-fromhost would); those made."""
        made = []
        for target in plan.mount_points():
            point = image / target.lstrip("/")
            source = next(src for src, dst in plan.binds if dst == target)
            if not os.path.lexists(point):
                if Path(source).is_dir():
                    point.mkdir(parents=True, exist_ok=True)
                else:
                    point.parent.mkdir(parents=True, exist_ok=True)
                    point.touch()
                made.append(target)
        return made

    def pull(self, reference: str, work: Path) -> Path:
        """`ch-image pull` into a storage under `work`; the image directory."""
        from climstack.launch import oci_images  # the registry client, only when pulling

        return oci_images.pull_charliecloud(reference, work / "ch-image")

    def program_in(self, image: Path, name: str) -> str:
        """Its path, on the PATH the pulled image's metadata sets (ch-run does not search)."""
        from climstack.launch import image_files

        return image_files.on_path(image, image, name)
