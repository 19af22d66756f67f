"""Build, on this machine, an image directory equivalent to a recipe's final stage.

Apptainer is not installable here, so the stand-in is an unprivileged Charliecloud image:
a Debian 12 root filesystem (mmdebstrap; the recipe's base is debian:12 too) holding the
recipe's %files at the same places, in which our Spack installs the container environment's
slice (xpmem-stub, mpi-probe) into the recipe's prefixes (/opt/software, view
/opt/views/view), then links libxpmem.so.0 exactly as the recipe's %post does. The one
difference: MPICH is PyPI's relocatable mpich wheel declared external
(containers/local-image), because upstream tarballs cannot be downloaded here.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from climstack import containers, environments, pins
from climstack.errors import ClimstackError

BASE_PACKAGES = ("build-essential", "python3", "python3-pyelftools", "patchelf", "file",
                 "ca-certificates", "binutils")
SLICE = ["xpmem-stub", "mpi-probe"]
WHEEL_MPICH = "3.4.3"
IMAGE_ENV = "/opt/climstack/containers/env"
VIEW = "/opt/views/view"


def _run(command: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise ClimstackError(f"{what} failed ({' '.join(map(str, command[:3]))} ...):\n"
                             f"{(proc.stderr or proc.stdout).strip()[-3000:]}")
    return proc


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise ClimstackError(f"`{tool}` not found", fix=f"apt-get install {package} (bin/setup)")
    return path


def base_rootfs() -> Path:
    """A cached Debian 12 root filesystem tarball with the build tools the slice needs."""
    key = hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:12]
    tarball = pins.cache_dir() / "images" / f"debian12-{key}.tar"
    if not tarball.exists():
        _need("mmdebstrap", "mmdebstrap")
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial.tar")
        _run(["mmdebstrap", "--variant=apt", f"--include={','.join(BASE_PACKAGES)}",
              "bookworm", str(partial)], "mmdebstrap of Debian 12", timeout=1800)
        partial.replace(tarball)
    return tarball


def mpich_wheel(version: str = WHEEL_MPICH) -> Path:
    """PyPI's mpich wheel, downloaded once into the user cache."""
    wheels = pins.cache_dir() / "wheels"
    found = sorted(wheels.glob(f"mpich-{version}-*.whl"))
    if not found:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels),
              f"mpich=={version}"], f"download of PyPI mpich {version}")
        found = sorted(wheels.glob(f"mpich-{version}-*.whl"))
    return found[0]


def recipe_files(recipe_text: str) -> list[tuple[str, str]]:
    """(source, destination) of the recipe's build-stage %files section."""
    lines = recipe_text.split("\n%files\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [tuple(line.split()) for line in lines if line.strip()]


def slice_manifest(recipe_text: str) -> str:
    """The recipe's embedded spack.yaml, reduced to the slice, plus the wheel MPICH scope."""
    manifest = yaml.safe_load(containers.embedded_manifest(recipe_text))
    body = manifest["spack"]
    body["include"].insert(0, "../local-image")  # first: highest precedence
    body["specs"] = [{"matrix": [SLICE, ["$container_arch"]]}]
    return yaml.safe_dump(manifest, sort_keys=False)


def _ch_run(image: Path, *command: str, cwd: str = "/") -> subprocess.CompletedProcess:
    """Run a command in the image with our Spack, Python and caches bound at their paths."""
    binds = sorted({pins.cache_dir(), pins.PROJECT_ROOT, Path(sys.base_prefix)})
    args = ["ch-run", "-w", "-c", cwd, *(f"--bind={path}:{path}" for path in binds), str(image)]
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}
    return _run([*args, "--", *command], f"`{command[0]}` in the image", env=env, timeout=3600)


def _stamp(recipe_text: str) -> str:
    """Hash of everything the image is made from: recipe, its %files, the wheel scope."""
    digest = hashlib.sha256(recipe_text.encode() + WHEEL_MPICH.encode())
    sources = [source for source, _ in recipe_files(recipe_text)] + ["containers/local-image"]
    for source in sources:
        path = pins.PROJECT_ROOT / source
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(pins.PROJECT_ROOT)).encode() + file.read_bytes())
    return digest.hexdigest()


def build(name: str, destination: Path, force: bool = False) -> Path:
    """Build (or reuse, when its inputs are unchanged) the image directory of `name`."""
    _need("ch-run", "charliecloud")
    env_dir = environments.resolve(name)
    recipe_text = containers.recipe(env_dir)
    stamp = _stamp(recipe_text)
    stamp_file = destination / "opt" / "climstack" / "image-inputs.sha256"
    if not force and stamp_file.is_file() and stamp_file.read_text() == stamp:
        return destination

    destination.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        _run(["tar", "-xf", str(base_rootfs()), "-C", str(work)], "unpacking the root filesystem")
        for source, target in recipe_files(recipe_text):  # the recipe's %files, same places
            copy = shutil.copytree if (pins.PROJECT_ROOT / source).is_dir() else shutil.copy2
            (work / target.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            copy(pins.PROJECT_ROOT / source, work / target.lstrip("/"))
        shutil.copytree(pins.PROJECT_ROOT / "containers" / "local-image",
                        work / "opt/climstack/containers/local-image")
        _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
              "--prefix", str(work / f"opt/mpich-{WHEEL_MPICH}"), str(mpich_wheel())],
             "installing the mpich wheel")
        env_in_image = work / IMAGE_ENV.lstrip("/")
        env_in_image.mkdir(parents=True)
        (env_in_image / "spack.yaml").write_text(slice_manifest(recipe_text))

        spack = str(pins.PROJECT_ROOT / "bin" / "spack")
        _ch_run(work, spack, "-e", IMAGE_ENV, "concretize", "--fresh")
        _ch_run(work, spack, "-e", IMAGE_ENV, "install", "--fail-fast")
        stub = _ch_run(work, spack, "-e", IMAGE_ENV, "location", "-i", "xpmem-stub").stdout.strip()
        _ch_run(work, "python3", "-m", "climstack.image_check", VIEW, "--link-xpmem",
                f"{stub}/lib", cwd="/opt/climstack")
        (work / stamp_file.relative_to(destination)).write_text(stamp)
        if destination.exists():
            shutil.rmtree(destination)
        work.replace(destination)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return destination


def default_destination(name: str) -> Path:
    return pins.cache_dir() / "images" / name


def register(commands) -> None:
    def run(args):
        destination = args.destination or default_destination(args.environment)
        start = time.monotonic()
        build(args.environment, destination, force=args.force)
        size = _run(["du", "-sm", str(destination)], "du").stdout.split()[0]
        print(f"{destination}: ready in {time.monotonic() - start:.0f} s, {size} MB")

    sub = commands.add_parser("image", help="build a Charliecloud image directory equivalent "
                              "to a container recipe's final stage (this machine's stand-in)")
    sub.add_argument("environment", nargs="?", default="container-archer2")
    sub.add_argument("destination", nargs="?", type=Path, help="default: user cache/images/ENV")
    sub.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    sub.set_defaults(run=run)
