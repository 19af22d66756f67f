"""An image as an Lmod module: for an image and a bind plan, `<root>/<name>/<version>.lua`
puts `<root>/<name>/<version>/bin` on PATH, where each program of the image's view (`mom6`,
`mpi-probe`, `ncdump`, ...) is a wrapper that runs it in the image under the plan, through
the plan's runtime, started in the user's working directory (bound in). A launcher starts
the wrappers as ranks (`mpiexec -n 2 mpi-probe`), each rank loading the host MPI.

Written here, not by singularity-hpc: shpc's wrappers run `singularity`, `podman` or
`docker` with the binds of one global setting (`bindpaths`), and have no Charliecloud; a
plan carries its own binds and variables and names its runtime, whose command line
climstack already writes (the runtime's job_lines). The tree is written whole, or not at
all (a temporary directory renamed into place)."""

import os
from pathlib import Path, PurePosixPath

from climstack.common import atomic
from climstack.errors import ClimstackError
from climstack.image import image, image_check
from climstack.launch import runtimes, sif_image

#: where the image's programs are
BIN = f"{image.VIEW}/bin"


def programs(image_dir: Path) -> list[str]:
    """The executables of the image's view (names), symlinks followed in the image."""
    where = image_check.resolve_in(image_dir, PurePosixPath(BIN))
    if not where.is_dir():
        raise ClimstackError(
            f"image {image_dir} has no {BIN}",
            fix="give an image directory `climstack image` built (its view holds the programs)",
        )
    found = []
    for entry in sorted(where.iterdir()):
        real = image_check.resolve_in(image_dir, PurePosixPath(BIN) / entry.name)
        if real.is_file() and os.access(real, os.X_OK):
            found.append(entry.name)
    return found


def mpi_programs(image_dir: Path, names: list[str]) -> tuple[list[str], list[str]]:
    """(those of the view's programs `names` that load an MPI library, directly or through a
    library of the view: the rest, serial programs and scripts, load none; those of them
    that call MPI_Init themselves)."""
    files = [
        *image_check.scan(Path(BIN), sysroot=image_dir),
        *image_check.scan(Path(f"{image.VIEW}/lib"), sysroot=image_dir),
    ]
    users = {Path(f.path): f for f in image_check.mpi_users(files)}
    real = {name: image_check.resolve_in(image_dir, PurePosixPath(BIN) / name) for name in names}
    mpi = [name for name in names if real[name] in users]
    return mpi, [name for name in mpi if users[real[name]].starts_mpi()]


def wrapper(plan, image_path: str, program: str, shared: bool) -> str:
    """The script that runs `program` of the image under the plan, in $PWD; `shared`: the
    node's ranks share one container where the runtime can (`sharing`), for a program that
    calls MPI_Init itself: its first rank waits there until every other has joined it. The
    rest (ncdump: parallel NetCDF loads MPI, but never starts it) run one container each."""
    runtime = runtimes.get(plan.runtime)
    options = runtime.share_option(shared)
    lines, command = runtime.job_lines(plan, image_path, [f"{BIN}/{program}"], True, **options)
    if any(not line.startswith(("#", "export ")) for line in lines):
        raise ClimstackError(
            f"runtime {plan.runtime} starts a job with more than variables (one container "
            "per node), which a module's command cannot",
            fix="for podman, publish the plan as a podman-hpc module: "
            "`climstack bind SITE --runtime podman --format podman-hpc`",
        )
    body = "".join(f"{line}\n" for line in lines)
    return f'#!/bin/bash\n# {program} in {image_path} (climstack)\n{body}exec {command} "$@"\n'


def lua(name: str, version: str, bin_dir: Path, plan, image_path: str, names: list[str]) -> str:
    listed = ", ".join(names)
    return f"""-- {name}/{version}: the image {image_path} under the bind plan {plan.directory}
-- (site {plan.site}, {plan.mode} mode, runtime {plan.runtime}); written by climstack
help([[Runs the image's programs in the container, the host MPI bound in: {listed}]])
whatis("Name: {name}")
whatis("Version: {version}")
whatis("Description: container {image_path}, bind plan of site {plan.site}")
family("climstack_image")
prepend_path("PATH", "{bin_dir}")
"""


def write(plan, image_path: Path, root: Path, name: str, version: str, gate) -> tuple:
    """The module file, its wrappers beside it, once `gate(mpi_programs, files)` passed (it
    raises otherwise, and nothing is written); (the module file, the MPI programs, the
    others)."""
    if not image_path.exists():
        raise ClimstackError(
            f"image {image_path} does not exist",
            fix="build it (`climstack image ENV`, `climstack sif ENV`) or give its path",
        )
    runtime = runtimes.get(plan.runtime)
    if not image_path.is_dir() and runtime.image_format == "directory":
        raise ClimstackError(
            f"image {image_path} is a file, and the plan's runtime {plan.runtime} runs image "
            "directories",
            fix="give the image directory the SIF was made from, or a plan for Apptainer "
            f"(`climstack bind {plan.site} --runtime apptainer`)",
        )
    runtime.check_image(plan, image_path)
    with sif_image.files(image_path) as files:  # a SIF: its file system, unpacked
        names = programs(files)
        mpi, starters = mpi_programs(files, names)
        gate(mpi, files)
    scripts = {n: wrapper(plan, str(image_path), n, n in starters) for n in names}
    final, module = root / name / version, root / name / f"{version}.lua"
    (root / name).mkdir(parents=True, exist_ok=True)

    def fill(work: Path):
        (work / "bin").mkdir()
        for program, text in scripts.items():
            (work / "bin" / program).write_text(text)
            (work / "bin" / program).chmod(0o755)

    atomic.directory(final, fill, current=lambda: False)  # always written anew
    atomic.write_text(module, lua(name, version, final / "bin", plan, str(image_path), names))
    return module, mpi, [n for n in names if n not in mpi]
