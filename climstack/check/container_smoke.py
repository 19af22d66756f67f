"""The smoke of a container image under each runtime: mpi-probe on 2 ranks launched from the
host as on a Cray, in bind mode (the host's MPI bound in), under Charliecloud on the image
directory of `climstack image` and under Apptainer on its SIF (`climstack sif`). A run
that does not load the host MPI from the plan's links fails."""

import os
import re
import shutil
from pathlib import Path

from climstack import pins
from climstack.bind import loader, plan
from climstack.common import process, progress
from climstack.errors import ClimstackError
from climstack.image import image, sif
from climstack.launch import oci_images, runtimes

PROBE = f"{image.VIEW}/bin/mpi-probe"
RUNTIMES = ("charliecloud", "apptainer")
LAUNCHERS = ("mpiexec.mpich", "mpiexec")


def launcher() -> str:
    found = next(filter(None, map(shutil.which, LAUNCHERS)), None)
    if not found:
        raise ClimstackError("no MPICH `mpiexec` on PATH", fix="apt-get install mpich (bin/setup)")
    return found


def run(name: str, runtime: str, ranks: int = 2, image_dir: Path | None = None) -> str:
    """mpi-probe of environment `name`'s image (built or reused; its SIF beside it for
    Apptainer) under `runtime`, bind mode; its output."""
    image_dir = image.build(name, image_dir or image.default_destination(name))
    target = image_dir
    if runtime == "apptainer":
        target = sif.build(name, image_dir.with_suffix(".sif"), image_dir)
    return probe(runtime, target, PROBE, ranks)


def run_pulled(reference: str, runtime: str, ranks: int = 2, work: Path | None = None) -> str:
    """mpi-probe of an image pulled from a registry (`buildcache push --base-image`), with
    `runtime`'s own pull, bind mode; its output."""
    work = work or pins.cache_dir() / "pulled"
    work.mkdir(parents=True, exist_ok=True)
    if runtime == "charliecloud":
        image_dir = oci_images.pull_charliecloud(reference, work / "ch-image")
        return probe(runtime, image_dir, oci_images.program(image_dir, "mpi-probe"), ranks)
    target = oci_images.pull_apptainer(reference, work / (reference.rsplit(":", 1)[-1] + ".sif"))
    return probe(runtime, target, "mpi-probe", ranks)  # on the PATH the image sets


def probe(runtime: str, target: Path, program: str, ranks: int) -> str:
    """Launch `program` (mpi-probe) in an image directory (Charliecloud) or SIF (Apptainer)
    from the host on `ranks` ranks, with the host's MPI bound in; its output, checked."""
    made = plan.make_plan("local", "bind", loader.View(), runtime=runtime)
    made = plan.write(made, plan.default_directory(made))
    if runtime == "charliecloud":
        plan.prepare_image(made, target)  # ch-run cannot create mount points
    argv = runtimes.get(runtime).exec_args(made, str(target), [program])
    # the plan binds nothing under $HOME, where Apptainer would mount the home itself
    env = {**os.environ, "APPTAINER_NO_HOME": "1"}
    with progress.step(f"mpi-probe on {ranks} ranks, {runtime}, bind mode"):
        output = process.run(
            [launcher(), "-n", str(ranks), *argv], f"mpi-probe under {runtime}", env=env
        ).stdout
    loaded = f"loaded: {plan.LINKS_DIR}/"
    if loaded not in output or f"ranks: {ranks}" not in output:
        raise ClimstackError(
            f"mpi-probe under {runtime} did not load the host MPI from the plan:\n{output}",
            fix=f"climstack verify {program} --image IMAGE --plan DIR",
        )
    return output


def summary(runtime: str, output: str) -> str:
    library = re.search(r"library: (.*)", output)
    pingpong = re.search(r"pingpong[^:]*: (.*)", output)
    return (
        f"{runtime:>12}: {library.group(1) if library else '?'}; "
        f"pingpong {pingpong.group(1) if pingpong else '?'}"
    )


def register(commands) -> None:
    def run_all(args):
        if args.ranks < 2:
            raise ClimstackError(
                f"--ranks {args.ranks}: the smoke needs 2 ranks or more (ping-pong)",
                fix="--ranks 2 (the default)",
            )
        for runtime in args.runtime or RUNTIMES:
            if args.pull:
                output = run_pulled(args.pull, runtime, args.ranks)
            else:
                output = run(args.environment, runtime, args.ranks, args.image)
            print(summary(runtime, output))

    sub = commands.add_parser(
        "container-smoke",
        help="run mpi-probe in a container image on 2 ranks, bind mode, "
        "under Charliecloud (image directory) and Apptainer (SIF)",
    )
    sub.add_argument("environment", nargs="?", default="container-archer2")
    sub.add_argument("--runtime", action="append", choices=RUNTIMES, help="default: both")
    sub.add_argument("--ranks", type=int, default=2)
    sub.add_argument("--image", type=Path, help="image directory (default: climstack image's)")
    sub.add_argument(
        "--pull",
        metavar="REFERENCE",
        help="instead, pull this image of mpi-probe from a registry with each runtime "
        "(HOST/REPOSITORY:mpi-probe-VERSION-HASH.spack, from `buildcache push --base-image`)",
    )
    sub.set_defaults(run=run_all)
