"""Build, on this machine, an image directory equivalent to a recipe's final stage.

Apptainer is not installable here, so the stand-in is an unprivileged Charliecloud image:
a Debian root filesystem (mmdebstrap of the recipe's base: BASES) holding the
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
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from climstack import pins
from climstack import spack as gateway
from climstack.common import atomic, cache, process, progress, stamp, wheels
from climstack.errors import ClimstackError
from climstack.image import mpich_fortran
from climstack.stack import containers, environments, lock_cache, recipes
from climstack.stack.sources import bench_sources, develop_trees, git_sources

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
#: the libraries ADIOS2 links since spack-packages 2026 (no longer its vendored copies),
#: Debian 12's, declared external (containers/local-image): no source of theirs is offline
ADIOS2_LIBRARIES = ("libyaml-cpp-dev", "nlohmann-json3-dev", "libpugixml-dev")


@dataclass(frozen=True)
class Base:
    """A recipe's base image as this machine builds it: the Debian suite (mmdebstrap), its
    packages, and the test-only scope declaring them (build tools, offline pins)."""

    suite: str
    packages: tuple[str, ...]
    scope: Path


#: the recipes' `container.images.final` -> how it is built here
BASES = {
    "debian:12": Base(
        "bookworm",
        BASE_PACKAGES + ADIOS2_LIBRARIES,
        pins.PROJECT_ROOT / "containers" / "local-image",
    ),
    # the MPI-5 ABI image: glibc 2.41 (Open MPI 6's libraries need GLIBC_2.38)
    "debian:13": Base(
        "trixie", BASE_PACKAGES, pins.PROJECT_ROOT / "containers" / "local-image-debian13"
    ),
}
WHEEL_MPICH = "3.4.3"
WHEEL_SCOPE_IN_IMAGE = "/opt/climstack/containers/local-image"  # ../local-image of IMAGE_ENV
IMAGE_ENV = "/opt/climstack/containers/env"
#: the label of a recipe whose MPI is a PyPI wheel (the MPI-5 ABI image: mpich==5.0.2)
WHEEL_LABEL = "org.climstack.mpi-wheel"
#: the label of a recipe whose MPI executables get libxpmem.so.0 (the MPICH-ABI images)
XPMEM_LABEL = "org.climstack.xpmem"
VIEW = "/opt/views/view"
#: the offline routes of the benchmarks' sources, copied to the same place under /opt/climstack
OFFLINE_SCOPE = pins.PROJECT_ROOT / "site" / "offline"
OFFLINE_IN_IMAGE = "/opt/climstack/site/offline"  # where ../../site/offline resolves
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


def base_rootfs(base: Base = BASES["debian:12"]) -> Path:
    """A cached Debian root filesystem tarball with the build tools the slice needs."""
    key = stamp.digest(*base.packages, length=12)
    name = "debian12" if base.suite == "bookworm" else base.suite  # the first one's old name
    entry = cache.Entry(pins.cache_dir() / "images" / f"{name}-{key}.tar", key)
    if entry.current():
        return entry.path
    _need("mmdebstrap", "mmdebstrap")

    def fill(tarball: Path):
        include = f"--include={','.join(base.packages)}"
        command = ["mmdebstrap", "--variant=apt", include, base.suite, tarball]
        process.run(command, f"mmdebstrap of Debian {base.suite}", timeout=1800)

    with progress.step(f"mmdebstrap of the Debian {base.suite} base (once)"):
        return entry.build(fill)


def base_of(recipe_text: str) -> Base:
    """How this machine builds the recipe's base image (its final stage's `base`)."""
    image = recipes.arguments(recipe_text).get("base", "")
    if image not in BASES:
        raise ClimstackError(
            f"the recipe's base image {image} cannot be built here",
            fix=f"use one of {', '.join(BASES)} (climstack.image.image.BASES)",
        )
    return BASES[image]


def mpich_wheel(version: str = WHEEL_MPICH) -> Path:
    """PyPI's mpich wheel, downloaded once into the user cache (wheels/mpich-VERSION-wheel/)."""
    entry = cache.Entry(pins.cache_dir() / "wheels" / f"mpich-{version}-wheel", version)

    def download(work: Path):
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", work]
        process.run([*pip, f"mpich=={version}"], f"download of PyPI mpich {version}")

    return next(entry.build(download).glob(f"mpich-{version}-*.whl"))


def add_wheel_mpich(root: Path, recipe_text: str | None = None) -> None:
    """The image's MPI and the base's scope (at WHEEL_SCOPE_IN_IMAGE): the recipe's own
    wheel where it names one (label org.climstack.mpi-wheel, installed as its %post does),
    else the MPICH stand-in: PyPI's wheel at /opt/mpich-<v> with its Fortran bindings."""
    base = base_of(recipe_text) if recipe_text else BASES["debian:12"]
    shutil.copytree(base.scope, root / WHEEL_SCOPE_IN_IMAGE.lstrip("/"))
    if wheel := recipe_text and recipes.labels(recipe_text).get(WHEEL_LABEL):
        wheels.pip_install(wheel, root / "opt" / wheel.replace("==", "-"))
        return
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
    args = ["ch-run", "-w", "-c", cwd, *(f"--bind={path}:{path}" for path in _binds()), str(image)]
    env = {**os.environ, **SLICE}
    return process.run([*args, "--", *command], f"`{command[0]}` in the image", env=env)


def _concretize(work: Path) -> None:
    """`spack concretize --fresh` of the image's environment in ch-run, or the lockfile
    solved before from the same inputs copied in: climstack.stack.lock_cache's key, of what
    Spack in the image reports (a repository of the image's read in the image)."""
    spack, sections = str(gateway.SPACK), ",".join(lock_cache.SECTIONS)
    script = str(gateway.script_path("concretize_inputs.py"))
    reported = _ch_run(work, spack, "-e", IMAGE_ENV, "python", script, sections).stdout
    inputs = json.loads(reported.strip().splitlines()[-1])
    inputs["repos"] = repos_on_host(work, inputs["repos"])
    lockfile = work / IMAGE_ENV.lstrip("/") / "spack.lock"

    def fill(solved: Path):
        with progress.step("concretizing the image's environment in ch-run"):
            _ch_run(work, spack, "-e", IMAGE_ENV, "concretize", "--fresh")
        shutil.copy2(lockfile, solved)

    solved = lock_cache.entry(lock_cache.key(inputs))
    solved.build(fill)  # the same inputs are solved once, under its lock
    if not lockfile.is_file():  # solved before
        shutil.copy2(solved.path, lockfile)
        progress.note("the image's environment: inputs unchanged, concretization reused")


def repos_on_host(work: Path, repos: dict[str, str]) -> dict[str, str]:
    """The package repositories Spack in the image `work` reports (_ch_run), as this host
    sees them: a path ch-run binds at its own path stays, one of the image's is in `work`."""
    return {
        name: root if any(Path(root).is_relative_to(b) for b in _binds()) else str(work) + root
        for name, root in repos.items()
    }


def _binds() -> list[Path]:
    """What _ch_run binds into the image, each at its own path: our Spack, Python, caches."""
    return sorted({pins.cache_dir(), pins.PROJECT_ROOT, Path(sys.base_prefix)})


def _stamp(recipe_text: str) -> str:
    """Digest of everything the image is made from: recipe, its %files, the wheel scope."""
    sources = [pins.PROJECT_ROOT / source for source, _ in recipe_files(recipe_text)]
    base = base_of(recipe_text)
    return stamp.digest(
        recipe_text,
        WHEEL_MPICH,
        base.suite,
        *base.packages,
        base.scope,
        *STAGE_OUTPUTS,
        *sources,
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
        base = base_of(recipe_text)
        with progress.step(f"unpacking the Debian {base.suite} base and the recipe's %files"):
            tarball = base_rootfs(base)
            process.run(["tar", "-xf", tarball, "-C", work], "unpacking the root filesystem")
            for source, target in recipe_files(recipe_text):  # the recipe's %files, same places
                copy = shutil.copytree if (pins.PROJECT_ROOT / source).is_dir() else shutil.copy2
                (work / target.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                copy(pins.PROJECT_ROOT / source, work / target.lstrip("/"))
            # the offline sources' scope, which the slice's manifest includes (ours, not the
            # recipe's: a centre's build fetches upstream)
            shutil.copytree(OFFLINE_SCOPE, work / OFFLINE_IN_IMAGE.lstrip("/"))
            add_wheel_mpich(work, recipe_text)
            pristine = develop_trees.source_tree()  # never built in: no host objects
            shutil.copytree(pristine, work / str(image_tree()).lstrip("/"), symlinks=True)
        env_in_image = work / IMAGE_ENV.lstrip("/")
        env_in_image.mkdir(parents=True)
        (env_in_image / "spack.yaml").write_text(slice_manifest(recipe_text))

        spack = str(gateway.SPACK)
        _concretize(work)
        bench_sources.fill(env_in_image, git_sources.local_mirror())  # the slice's sources
        with progress.step(f"installing the slice {SLICE['CLIMSTACK_IMAGE_SLICE']} in ch-run"):
            _ch_run(work, spack, "-e", IMAGE_ENV, "install", "--fail-fast")
        with progress.step("keeping the builds for the next image (spack buildcache push)"):
            push = ["buildcache", "push", "--unsigned", "--update-index", BUILDS_MIRROR]
            with atomic.locked(builds_mirror()):  # images built side by side: one index
                _ch_run(work, spack, "-e", IMAGE_ENV, *push)
        check = ["/usr/bin/python3", "-m", "climstack.image.image_check", VIEW]
        if XPMEM_LABEL in recipes.labels(recipe_text):  # as the recipe's %post
            location = [spack, "-e", IMAGE_ENV, "location", "-i", "xpmem-stub"]
            stub = _ch_run(work, *location).stdout.strip()
            check += ["--link-xpmem", f"{stub}/lib", "--keep-unlinked", NOXPMEM]
        # the image's Python (python3-pyelftools), not ours bound in beside it
        _ch_run(work, *check, cwd="/opt/climstack")
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
