"""A pulled image's files and the PATH its config sets, read without running it, for the
gate (climstack.check.gate): a ch-image directory (its ch/metadata.json), a SIF (unpacked by
sif_image; Apptainer keeps the config's variables in .singularity.d/env), a podman image
(mounted with `podman image mount`, which needs root, and its config from `podman image
inspect`)."""

import json
import re
from contextlib import contextmanager
from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError
from climstack.launch import sif_image

#: Apptainer's copy of the OCI config's variables, one `export NAME="VALUE"` a line
SIF_ENV = ".singularity.d/env/10-docker2singularity.sh"
SIF_PATH = re.compile(r'^export PATH="(?:\$\{PATH:-)?([^"}]*)', re.MULTILINE)


@contextmanager
def files(image):
    """Yield a directory holding the image's files: an image directory, a SIF unpacked, or
    a podman image (a reference, not a path) mounted for the while."""
    if Path(image).exists():
        with sif_image.files(Path(image)) as tree:
            yield tree
        return
    if str(image).startswith(("/", ".")):  # a path, not a registry's reference
        raise ClimstackError(
            f"image {image} does not exist", fix="give the image directory or SIF it runs"
        )
    what = f"`podman image mount {image}`"
    fix = "pull it first (`podman pull`), as root (podman mounts images for root only)"
    mounted = process.run(["podman", "image", "mount", str(image)], what, fix=fix).stdout
    try:
        yield Path(mounted.strip())
    finally:
        process.run(["podman", "image", "unmount", str(image)], what, check=False)


def search_path(image, tree: Path) -> str:
    """The PATH the image's config sets ('' if none)."""
    metadata = tree / "ch" / "metadata.json"
    if metadata.is_file():
        return json.loads(metadata.read_text()).get("env", {}).get("PATH", "")
    if (tree / SIF_ENV).is_file():
        found = SIF_PATH.search((tree / SIF_ENV).read_text())
        return found.group(1) if found else ""
    if Path(image).exists():
        return ""
    listed = process.run(
        ["podman", "image", "inspect", "--format", "{{json .Config.Env}}", str(image)],
        f"`podman image inspect {image}`",
    ).stdout
    variables = dict(v.split("=", 1) for v in json.loads(listed or "null") or [] if "=" in v)
    return variables.get("PATH", "")


def on_path(image, tree: Path, name: str) -> str:
    """Where program `name` is in the image (`tree`: its files), on the PATH its config sets;
    a path is itself."""
    if name.startswith("/"):
        return name
    path = search_path(image, tree)
    for entry in path.split(":"):
        if entry.startswith("/") and (tree / entry.lstrip("/") / name).is_file():
            return f"{entry}/{name}"
    raise ClimstackError(
        f"no {name} on the PATH of {image} ({path or 'none set'})",
        fix="pull the image of a spec that installs it (its tag: NAME-VERSION-HASH.spack)",
    )
