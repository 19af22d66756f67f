"""Build a SIF, with Apptainer itself, from the image directory that `climstack image` made.

The definition is the recipe's final stage with `Bootstrap: localimage`: its %labels,
%environment, %runscript, %test and %help as they are, and its %post without the lines that
install OS packages (the image has them). The image directory is squashed first with every
file owned by root: an unprivileged `apptainer build` cannot copy files owned by other
users, nor device nodes, out of a directory.
"""

import re
from pathlib import Path

from climstack.common import cache, process, progress, stamp
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.launch.runtimes import apptainer
from climstack.stack import containers, environments, recipes

#: %post lines of the final stage that install OS packages
OS_PACKAGE_LINE = re.compile(r"DEBIAN_FRONTEND|apt-get|/var/lib/apt/lists")
KEPT = ("post", "environment", "runscript", "test", "help", "labels")
#: left out of the squashed image: devices come from the host, apt's lists are not needed
EXCLUDED = ("dev/*", "var/cache/apt/*", "var/lib/apt/lists/*")


def squash(directory: Path, output: Path) -> Path:
    """An uncompressed squashfs of `directory`, every file owned by root (a localimage)."""
    process.run(
        ["mksquashfs", directory, output, "-all-root", "-noappend", "-quiet", "-no-progress"]
        + ["-noI", "-noD", "-noF", "-noX", "-wildcards", "-e", *EXCLUDED],
        f"mksquashfs of {directory}",
        fix="apt-get install squashfs-tools (bin/setup)",
    )
    return output


def definition(recipe_text: str, squashed: str) -> str:
    """The recipe's final stage from the image `squashed`: its KEPT sections, %post without
    the lines that install OS packages."""
    final = recipes.stages(recipe_text)[-1]
    body = ""
    for section in filter(None, map(final.section, KEPT)):
        lines = section.body.splitlines(keepends=True)
        if section.name == "post":
            lines = [line for line in lines if not OS_PACKAGE_LINE.search(line)]
        body += f"%{section.name}\n{''.join(lines).strip(chr(10))}\n\n"
    return f"Bootstrap: localimage\nFrom: {squashed}\n\n{body}"


def build(
    name: str, destination: Path, image_dir: Path | None = None, twin: Path | None = None
) -> Path:
    """The SIF of environment `name` (reused while its image and recipe are unchanged; a SIF
    `twin`, by default the one at the default destination, made from the same is copied)."""
    recipe_text = containers.recipe(environments.resolve(name))
    image_dir = image_dir or image.build(name, image.default_destination(name))
    image_stamp = image.inputs_stamp(image_dir)
    if not image_stamp.is_file():
        raise ClimstackError(
            f"{image_dir} is not an image `climstack image` made (no {image_stamp})",
            fix=f"climstack image {name} {image_dir}",
        )
    # the image's inputs, not its path: the same image anywhere makes the same SIF
    key = stamp.digest(recipe_text, image_stamp.read_text().strip(), *apptainer.SQUASH, length=64)
    entry = cache.Entry(destination, key)
    # a SIF made from the same inputs elsewhere (the tests' own beside the user's) is copied
    return entry.build(
        lambda sif: _apptainer_build(recipe_text, image_dir, sif),
        twin=twin or default_destination(name),
    )


def _apptainer_build(recipe_text: str, image_dir: Path, sif: Path) -> None:
    """Squash `image_dir` and build `sif` from it with the recipe's final stage."""
    work = sif.parent
    squashed = work / "image.sqfs"
    with progress.step(f"squashing {image_dir}"):
        squash(image_dir, squashed)
    (work / "image.def").write_text(definition(recipe_text, str(squashed)))
    with progress.step(f"apptainer build {sif.name} (runs the recipe's %test)"):
        process.run(
            [apptainer.on_this_machine(), "build", *apptainer.SQUASH, sif, work / "image.def"],
            "apptainer build of the SIF",
            timeout=1800,
            env=process.environ(APPTAINER_TMPDIR=work),
        )


def default_destination(name: str) -> Path:
    return image.default_destination(name).with_suffix(".sif")
