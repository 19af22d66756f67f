"""Charliecloud's unprivileged `ch-run` on an image directory."""

import os
import shlex
import uuid
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.launch.runtimes import check_bind_paths

NAME = "charliecloud"
SEPARATORS = ":"


def exec_args(plan, image: str, command: list[str], join: int = 0) -> list[str]:
    """`ch-run` of command in the image under the plan; `join` > 0: that many ranks of a
    node share one container (`--join`, a tag unique to this launch), which lets MPI use
    the single-copy shared-memory paths that separate user namespaces forbid."""
    check_bind_paths(plan, SEPARATORS)
    args = ["ch-run"]
    if join:
        args += [f"--join-ct={join}", f"--join-tag=climstack-{uuid.uuid4().hex[:12]}"]
    for src, dst in plan.binds:
        args.append(f"--bind={src}:{dst}")
    for key, value in plan.runtime_env(joined=bool(join)).items():
        args.append(f"--set-env={key}={value}")
    return [*args, image, "--", *command]


def job_lines(plan, image: str, command: list[str]) -> tuple[list[str], str]:
    """(lines before srun, the per-rank command): ch-run carries the plan itself."""
    return [], shlex.join(exec_args(plan, image, command))


def check_image(plan, image: Path) -> None:
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
