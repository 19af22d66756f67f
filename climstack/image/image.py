"""Build, on this machine, an image directory equivalent to a recipe's final stage.

Apptainer is not installable here, so the stand-in is an unprivileged Charliecloud image:
a Debian 12 root filesystem (mmdebstrap; the recipe's base is debian:12 too) holding the
recipe's %files at the same places, in which our Spack installs the container environment's
slice `all` (the climate stack with its Fortran side, the benchmarks, the probes and MOM6)
into the recipe's prefixes (/opt/software, view /opt/views/view), then links libxpmem.so.0
exactly as the recipe's %post does, keeping each executable as built, without it, under
NOXPMEM (the benchmarks' bind-noxpmem control). The differences: MPICH is PyPI's
relocatable mpich wheel with the Fortran bindings of the same MPICH series added
(climstack.image.mpich_fortran), declared external (containers/local-image), because
upstream tarballs cannot be downloaded here; the sources come from the offline routes
(site/offline; the source mirror, which Debian's byte-identical orig tarballs fill;
netcdf-fortran as the image's own copy of the develop tree).
"""

import hashlib
import os
import shutil
import sys
from pathlib import Path

import yaml

from climstack import pins
from climstack import spack as gateway
from climstack.common import cache, process, progress, stamp, wheels
from climstack.errors import ClimstackError
from climstack.image import mpich_fortran
from climstack.stack import bench_sources, containers, develop_trees, environments, recipes

BASE_PACKAGES = (
    "build-essential",
    "gfortran",  # the Fortran side: HDF5's and NetCDF's bindings, benchio, FMS, MOM6
    "autoconf",  # MOM6's ac/ build runs autoreconf
    "automake",
    "m4",
    "python3",
    "python3-pyelftools",
    "patchelf",
    "file",
    "ca-certificates",
    "binutils",
    "cmake",
    "pkgconf",
    "zlib1g-dev",
    "libbz2-dev",
)
WHEEL_MPICH = "3.4.3"
WHEEL_SCOPE = pins.PROJECT_ROOT / "containers" / "local-image"
WHEEL_SCOPE_IN_IMAGE = "/opt/climstack/containers/local-image"  # ../local-image of IMAGE_ENV
IMAGE_ENV = "/opt/climstack/containers/env"
VIEW = "/opt/views/view"
#: the offline routes of the benchmarks' sources, copied to the same place under /opt/climstack
OFFLINE_SCOPE = pins.PROJECT_ROOT / "site" / "offline"
#: where the executables live as built, before libxpmem.so.0 is linked (their image path below)
NOXPMEM = "/opt/climstack/noxpmem"
#: all of environments/stack.yaml (image_specs): the climate stack, the benchmarks, the probes
#: and the model, as the recipe's `slice` argument
SLICE = {"CLIMSTACK_IMAGE_SLICE": "all"}
#: where the image keeps its copy of the develop trees (netcdf-fortran): Spack builds in a
#: develop tree, so the image's build must not share the local environment's
DEVELOP_TREES = "/opt/climstack/dev-sources"
#: the image environment's mirror of earlier image builds' binaries (builds_mirror)
BUILDS_MIRROR = "image-builds"
#: what the build stage leaves beside the view; a change rebuilds cached images
STAGE_OUTPUTS = ("/opt/climstack/environment-hash", f"{IMAGE_ENV}/environment_modifications.sh")


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise ClimstackError(f"`{tool}` not found", fix=f"apt-get install {package} (bin/setup)")
    return path


def base_rootfs() -> Path:
    """A cached Debian 12 root filesystem tarball with the build tools the slice needs."""
    key = stamp.digest(*BASE_PACKAGES, length=12)
    entry = cache.Entry(pins.cache_dir() / "images" / f"debian12-{key}.tar", key)
    if entry.current():
        return entry.path
    _need("mmdebstrap", "mmdebstrap")

    def fill(tarball: Path):
        include = f"--include={','.join(BASE_PACKAGES)}"
        command = ["mmdebstrap", "--variant=apt", include, "bookworm", tarball]
        process.run(command, "mmdebstrap of Debian 12", timeout=1800)

    with progress.step("mmdebstrap of the Debian 12 base (once)"):
        return entry.build(fill)


def mpich_wheel(version: str = WHEEL_MPICH) -> Path:
    """PyPI's mpich wheel, downloaded once into the user cache (wheels/mpich-VERSION-wheel/)."""
    entry = cache.Entry(pins.cache_dir() / "wheels" / f"mpich-{version}-wheel", version)

    def download(work: Path):
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", work]
        process.run([*pip, f"mpich=={version}"], f"download of PyPI mpich {version}")

    return next(entry.build(download).glob(f"mpich-{version}-*.whl"))


def add_wheel_mpich(root: Path) -> None:
    """PyPI's MPICH wheel at /opt/mpich-<v> of a root filesystem with its Fortran bindings,
    and the scope declaring it external at WHEEL_SCOPE_IN_IMAGE."""
    shutil.copytree(WHEEL_SCOPE, root / WHEEL_SCOPE_IN_IMAGE.lstrip("/"))
    prefix = root / f"opt/mpich-{WHEEL_MPICH}"
    wheels.pip_install(mpich_wheel(), prefix)
    mpich_fortran.install(prefix)


def recipe_files(recipe_text: str) -> list[tuple[str, str]]:
    """(source, destination) of the recipe's build-stage %files section."""
    return recipes.files(recipe_text)


def slice_manifest(recipe_text: str) -> str:
    """The recipe's embedded spack.yaml plus the wheel MPICH and offline sources' scopes
    (the slice is SLICE)."""
    manifest = yaml.safe_load(containers.embedded_manifest(recipe_text))
    # first: highest precedence
    manifest["spack"]["include"][:0] = ["../local-image", "../../site/offline"]
    mirrors = manifest["spack"].setdefault("mirrors", {})
    mirrors[BUILDS_MIRROR] = {"url": str(builds_mirror()), "signed": False}
    develop = manifest["spack"].setdefault("develop", {})
    develop.update(develop_trees.develop_section(image_tree()))
    return yaml.safe_dump(manifest, sort_keys=False)


def image_tree() -> Path:
    """Where the image holds its copy of netcdf-fortran's develop tree: named by the
    pristine tree (package and the orig tarball's digest), so another source or a copy
    made another way is another spec (its dev_path), never an older binary."""
    return Path(DEVELOP_TREES) / develop_trees.source_tree().name


def builds_mirror() -> Path:
    """The buildcache of what image builds compiled (HDF5 takes minutes): an image rebuilt
    for a change elsewhere installs the same specs from it in seconds."""
    return pins.cache_dir() / "image-buildcache"


def _ch_run(image: Path, *command: str, cwd: str = "/") -> process.CompletedProcess:
    """Run a command in the image with our Spack, Python and caches bound at their paths."""
    binds = sorted({pins.cache_dir(), pins.PROJECT_ROOT, Path(sys.base_prefix)})
    args = ["ch-run", "-w", "-c", cwd, *(f"--bind={path}:{path}" for path in binds), str(image)]
    env = {**os.environ, **SLICE}
    return process.run([*args, "--", *command], f"`{command[0]}` in the image", env=env)


def _stamp(recipe_text: str) -> str:
    """Digest of everything the image is made from: recipe, its %files, the wheel scope."""
    sources = [pins.PROJECT_ROOT / source for source, _ in recipe_files(recipe_text)]
    return stamp.digest(
        recipe_text,
        WHEEL_MPICH,
        *STAGE_OUTPUTS,
        *sources,
        WHEEL_SCOPE,
        OFFLINE_SCOPE,
        Path(mpich_fortran.__file__),
        develop_trees.NETCDF_FORTRAN.sha256,
        str(image_tree()),
        *SLICE.values(),
        length=64,
    )


def inputs_key(name: str) -> str:
    """The key of everything the image of environment `name` is made from."""
    return _stamp(containers.recipe(environments.resolve(name)))


def build(name: str, destination: Path, force: bool = False, twin: Path | None = None) -> Path:
    """Build (or reuse, when its inputs are unchanged) the image directory of `name`; an
    image `twin` (default: the one at the default destination) built from the same inputs
    is copied instead."""
    _need("ch-run", "charliecloud")
    env_dir = environments.resolve(name)
    recipe_text = containers.recipe(env_dir)
    entry = cache.Entry(destination, _stamp(recipe_text), inside=INPUTS_STAMP)
    if not force and entry.current():
        return destination
    if (
        destination.exists()
        and not entry.stamp.is_file()
        and (not destination.is_dir() or any(destination.iterdir()))
    ):  # replacing it would delete whatever it is
        raise ClimstackError(
            f"{destination} exists and is not an image this command built (no {entry.stamp})",
            fix="give a new or empty directory, or remove that one yourself",
        )

    def fill(work: Path):
        work.mkdir()
        with progress.step("unpacking the Debian 12 base and the recipe's %files"):
            process.run(["tar", "-xf", base_rootfs(), "-C", work], "unpacking the root filesystem")
            for source, target in recipe_files(recipe_text):  # the recipe's %files, same places
                copy = shutil.copytree if (pins.PROJECT_ROOT / source).is_dir() else shutil.copy2
                (work / target.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                copy(pins.PROJECT_ROOT / source, work / target.lstrip("/"))
            add_wheel_mpich(work)
            shutil.copytree(OFFLINE_SCOPE, work / "opt/climstack/site/offline")
            pristine = develop_trees.source_tree()  # never built in: no host objects
            shutil.copytree(pristine, work / str(image_tree()).lstrip("/"), symlinks=True)
        env_in_image = work / IMAGE_ENV.lstrip("/")
        env_in_image.mkdir(parents=True)
        (env_in_image / "spack.yaml").write_text(slice_manifest(recipe_text))

        spack = str(gateway.SPACK)
        with progress.step("concretizing the image's environment in ch-run"):
            _ch_run(work, spack, "-e", IMAGE_ENV, "concretize", "--fresh")
        bench_sources.fill(env_in_image, bench_sources.local_mirror())  # the slice's sources
        with progress.step(f"installing the slice {SLICE['CLIMSTACK_IMAGE_SLICE']} in ch-run"):
            _ch_run(work, spack, "-e", IMAGE_ENV, "install", "--fail-fast")
        with progress.step("keeping the builds for the next image (spack buildcache push)"):
            push = ["buildcache", "push", "--unsigned", "--update-index", BUILDS_MIRROR]
            _ch_run(work, spack, "-e", IMAGE_ENV, *push)
        stub = _ch_run(work, spack, "-e", IMAGE_ENV, "location", "-i", "xpmem-stub").stdout.strip()
        _ch_run(  # the image's Python (python3-pyelftools), not ours bound in beside it
            work,
            "/usr/bin/python3",
            "-m",
            "climstack.image.image_check",
            VIEW,
            "--link-xpmem",
            f"{stub}/lib",
            "--keep-unlinked",
            NOXPMEM,
            cwd="/opt/climstack",
        )
        # as the recipe's build stage: what its final stage turns into a label and variables
        lock = (env_in_image / "spack.lock").read_bytes()
        (work / STAGE_OUTPUTS[0].lstrip("/")).write_text(
            hashlib.sha256(lock).hexdigest()[:16] + "\n"
        )
        modifications = _ch_run(work, spack, "env", "activate", "--sh", "-d", IMAGE_ENV).stdout
        (work / STAGE_OUTPUTS[1].lstrip("/")).write_text(modifications)

    # an image made from the same inputs elsewhere (the tests' own beside the user's) is copied
    return entry.build(fill, twin=twin or default_destination(name), force=force)


#: the digest of what an image directory was made from, written last into it
INPUTS_STAMP = "opt/climstack/image-inputs.sha256"


def inputs_stamp(image_dir: Path) -> Path:
    return image_dir / INPUTS_STAMP


def default_destination(name: str) -> Path:
    return pins.cache_dir() / "images" / name
