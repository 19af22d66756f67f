"""`apptainer build` of a committed recipe with every network input local.

The recipe's build arguments point at what this machine holds: the cached Spack and
spack-packages clones (file://), a PEP 503 index of the clingo wheels, a Spack source
mirror, and the base image as `Bootstrap: localimage`: the Debian 12 base of `climstack
image` plus PyPI's MPICH 3.4.3 wheel and its scope (containers/local-image), because
MPICH's tarball cannot be downloaded here. Only Debian's archive is reached (apt).
"""

import sys
import tempfile
import time
from pathlib import Path

from climstack import pins
from climstack.common import atomic, process, progress, stamp
from climstack.image import build_args, image, sif
from climstack.launch.runtimes import apptainer
from climstack.stack import containers, environments
from climstack.stack.sources import git_archives

#: the user cache, bound into the build at a mount point every Debian image has
MOUNT = "/mnt"
#: an unprivileged build maps one uid only: apt cannot drop privileges to `_apt`
APT_SINGLE_UID = 'APT::Sandbox::User "root";\n'
CLINGO_PLATFORM = ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11")


def _inputs() -> Path:
    return pins.cache_dir() / "recipe-inputs"


def base_image() -> Path:
    """Squashfs of the Debian 12 base with MPICH 3.4.3 at /opt/mpich-3.4.3 and its scope."""
    key = stamp.digest(
        image.base_rootfs().name,
        image.WHEEL_MPICH,
        image.BASES["debian:12"].scope,
        image.WHEEL_SCOPE_IN_IMAGE,
        APT_SINGLE_UID,
    )
    final = _inputs() / f"debian12-mpich-{key}.sqfs"
    if final.is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent) as tmp:
        root = Path(tmp) / "root"
        with progress.step("the recipe's base: Debian 12 and PyPI's MPICH 3.4.3 (once)"):
            root.mkdir()
            process.run(["tar", "-xf", image.base_rootfs(), "-C", root], "unpacking the base")
            image.add_wheel_mpich(root)
            (root / "etc/apt/apt.conf.d/00climstack-single-uid").write_text(APT_SINGLE_UID)
            sif.squash(root, Path(tmp) / final.name).replace(final)
    return final


def clingo_index() -> Path:
    """A PEP 503 index (file://) of the clingo wheels for the base's Python 3.11."""
    clingo = next(
        line
        for line in (pins.PROJECT_ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("clingo==")
    )
    final = _inputs() / f"simple-{clingo.replace('==', '-')}"

    def fill(work: Path):
        wheels = work / "wheels"
        process.run(
            [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"]
            + [*CLINGO_PLATFORM, "-d", wheels, clingo],
            f"pip download of {clingo} for Python 3.11",
        )
        for wheel in sorted(wheels.glob("*.whl")):
            project = work / wheel.name.split("-")[0].lower().replace("_", "-")
            project.mkdir(exist_ok=True)
            wheel.rename(project / wheel.name)
            with open(project / "index.html", "a") as index:
                index.write(f'<a href="{wheel.name}">{wheel.name}</a>\n')
        wheels.rmdir()

    return atomic.directory(final, fill)


def arguments(slice_name: str = "probes") -> dict[str, str]:
    """Build arguments for the recipe, every one local (paths as seen inside the build)."""
    mirror = _inputs() / "source-mirror"  # the probes' one archive: Spack's compiler wrapper
    git_archives.place_compiler_wrapper(mirror)
    local = {
        "spack_git": pins.cache_dir() / pins.SPACK.cache_name,
        "spack_packages_git": pins.cache_dir() / pins.SPACK_PACKAGES.cache_name,
        "clingo_index": clingo_index(),
        "source_mirror": mirror,
    }
    return {
        **{
            key: f"file://{MOUNT}/{path.relative_to(pins.cache_dir())}"
            for key, path in local.items()
        },
        "bootstrap": "localimage",
        "base": str(base_image()),
        "scope": image.WHEEL_SCOPE_IN_IMAGE,
        "slice": slice_name,
    }


def command(values: dict[str, str], sif: Path, recipe: Path) -> list:
    """`apptainer build` with the user cache at MOUNT; run it from the project root."""
    args = [apptainer.on_this_machine(), "build", *apptainer.SQUASH]
    args += ["--bind", f"{pins.cache_dir()}:{MOUNT}"]
    args += [f"--build-arg={key}={value}" for key, value in values.items()]
    return [*args, sif, recipe.relative_to(pins.PROJECT_ROOT)]


def build(name: str, destination: Path) -> tuple[Path, float]:
    """The SIF of environment `name`'s committed recipe, built by Apptainer offline (reused
    while the rendered recipe, its %files and its base are unchanged); seconds it took."""
    recipe = environments.resolve(name) / containers.RECIPE
    values = arguments()
    rendered = build_args.render(recipe.read_text(), values, source=str(recipe))
    sources = [pins.PROJECT_ROOT / source for source, _ in image.recipe_files(rendered)]
    value = stamp.digest(rendered, *sources, *apptainer.SQUASH, length=64)
    with atomic.locked(destination):  # one builder at a time; the others reuse
        stamp_file = destination.with_name(destination.name + ".inputs")
        if destination.is_file() and stamp.current(stamp_file, value):
            return destination, 0.0
        destination.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        with tempfile.TemporaryDirectory(dir=destination.parent, prefix=".recipe-") as tmp:
            partial = Path(tmp) / destination.name
            with progress.step(f"apptainer build of {recipe.relative_to(pins.PROJECT_ROOT)}"):
                process.stream(
                    command(values, partial, recipe),
                    f"apptainer build of {recipe}",
                    cwd=pins.PROJECT_ROOT,
                    env=process.environ(APPTAINER_TMPDIR=tmp),
                    keep=lambda line: line.startswith(("INFO:", "FATAL:", "==> Installing")),
                )
            partial.replace(destination)
        atomic.write_text(stamp_file, value)
        return destination, time.monotonic() - start
