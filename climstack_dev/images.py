"""The tests' own copies of a project image and its SIF, in the user cache under a name that
carries the key of the image's inputs: two runs of the suite from checkouts whose inputs
differ (a developer's beside CI's) never replace each other's image mid-run, and runs of
the same inputs share one. The user's image (`climstack image`'s default destination) is
left alone; copies older than a day of other inputs are removed."""

import shutil
import time
from pathlib import Path

from climstack import pins
from climstack.image import image

STALE_S = 24 * 3600


def _prune(keep: Path) -> None:
    for other in keep.parent.glob(f"{keep.name.rsplit('-', 1)[0]}-*"):
        if (
            other != keep
            and other.suffix != ".sif"
            and time.time() - other.stat().st_mtime > STALE_S
        ):
            shutil.rmtree(other, ignore_errors=True)
            Path(f"{other}.sif").unlink(missing_ok=True)


def image_dir(name: str) -> Path:
    """Where the tests build (or copy) the image of environment `name`."""
    directory = pins.cache_dir() / "images" / f"tests-{name}-{image.inputs_key(name)[:12]}"
    _prune(directory)
    return directory


def sif_path(name: str) -> Path:
    return Path(f"{image_dir(name)}.sif")
