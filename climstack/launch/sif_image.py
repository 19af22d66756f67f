"""A SIF's root filesystem as a directory, for the checks that read files (verify): its
squashfs partition, found with `apptainer sif list`, unpacked with unsquashfs. Works for
any SIF, ours or built elsewhere, without mounting it."""

import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from climstack.common import process
from climstack.errors import ClimstackError
from climstack.launch.runtimes import apptainer

#: a row of `apptainer sif list`: ID |GROUP |LINK |SIF POSITION (start-end) |TYPE
PARTITION = re.compile(r"^\s*\d+\s*\|\S+\s*\|\S+\s*\|(\d+)-\d+\s*\|FS \(Squashfs/\*System/")


def rootfs_offset(sif: Path) -> int:
    listing = process.run(
        [apptainer.on_this_machine(), "sif", "list", sif], f"`apptainer sif list {sif}`"
    ).stdout
    for line in listing.splitlines():
        found = PARTITION.match(line)
        if found:
            return int(found.group(1))
    raise ClimstackError(
        f"{sif} has no squashfs root filesystem partition (an encrypted or " "ext3 SIF?)",
        fix="give the image directory, or a SIF with a "
        "squashfs root filesystem (apptainer build's default)",
    )


@contextmanager
def files(image: Path):
    """Yield a directory holding the image's files: itself, or the SIF unpacked."""
    if image.is_dir():
        yield image
        return
    if not shutil.which("unsquashfs"):
        raise ClimstackError(
            f"reading {image} needs unsquashfs", fix="apt-get install squashfs-tools (bin/setup)"
        )
    offset = rootfs_offset(image)
    with tempfile.TemporaryDirectory(prefix="climstack-sif-") as tmp:
        tree = Path(tmp) / "rootfs"
        # device nodes are left out: an unprivileged user cannot create them
        process.run(
            [
                "unsquashfs",
                "-q",
                "-no-progress",
                "-no-xattrs",
                "-o",
                offset,
                "-d",
                tree,
                "-excludes",
                image,
                "dev",
            ],
            f"unpacking the root filesystem of {image}",
        )
        yield tree
