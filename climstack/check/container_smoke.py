"""The smoke of a container image under each runtime: mpi-probe on 2 ranks launched from the
host as on a Cray, in bind mode (the host's MPI bound in), under Charliecloud on the image
directory of `climstack image`, under Apptainer on its SIF (`climstack sif`) and under
podman on the directory, the plan as a CDI spec. Each passes the gate first (verify,
confirmed by the image's own ld.so); a run that does not load the host MPI from the plan's
links fails."""

import re
from pathlib import Path

from climstack import pins
from climstack.bind import loader, plan
from climstack.check import gate
from climstack.common import progress
from climstack.errors import ClimstackError
from climstack.image import image, sif
from climstack.inputs import sites
from climstack.launch import image_files, launch, launchers, runtimes

PROBE = f"{image.VIEW}/bin/mpi-probe"
RUNTIMES = runtimes.LOCAL  # those this machine runs: charliecloud, apptainer, podman


def target(name: str, runtime: str, image_dir: Path) -> Path:
    """What `runtime` runs of environment `name`'s image: the image directory, or its SIF
    (built or reused beside it)."""
    if runtimes.get(runtime).image_format == "sif":
        return sif.build(name, image_dir.with_suffix(".sif"), image_dir)
    return image_dir


def run(name: str, runtime: str, ranks: int = 2, image_dir: Path | None = None) -> str:
    """mpi-probe of environment `name`'s image (built or reused; its SIF beside it for
    Apptainer) under `runtime`, bind mode; its output."""
    image_dir = image.build(name, image_dir or image.default_destination(name))
    return probe(runtime, target(name, runtime, image_dir), PROBE, ranks)


def run_pulled(reference: str, runtime: str, ranks: int = 2, work: Path | None = None) -> str:
    """mpi-probe of an image pulled from a registry (`buildcache push --base-image`), with
    `runtime`'s own pull, bind mode; its output."""
    work = work or pins.cache_dir() / "pulled"
    work.mkdir(parents=True, exist_ok=True)
    chosen = runtimes.get(runtime)
    pulled = chosen.pull(reference, work)
    return probe(runtime, pulled, chosen.program_in(pulled, "mpi-probe"), ranks)


def probe(runtime: str, target: Path, program: str, ranks: int) -> str:
    """Launch `program` (mpi-probe) in an image directory (Charliecloud) or SIF (Apptainer)
    from the host on `ranks` ranks, with the host's MPI bound in; its output, checked."""
    made = plan.make(sites.get("local"), "bind", view=loader.View(), runtime=runtime)
    chosen = runtimes.get(runtime)
    chosen.prepare_image(made, target)  # the mount points ch-run cannot create
    with image_files.files(target) as tree:  # the gate first: verify, the image's ld.so asked
        path = image_files.on_path(target, tree, program)
        gate.require(made, target, [path], False, f"the {runtime} smoke", tree=tree,
                     fix=f"climstack verify {path} --image {target} --plan DIR")  # fmt: skip
    with progress.step(f"mpi-probe on {ranks} ranks, {runtime}, bind mode"):
        output = launch.launch(
            made,
            chosen,
            launchers.get("mpiexec"),
            target,
            [program],
            ranks=ranks,
            home=False,  # the plan binds nothing under $HOME
            what=f"mpi-probe under {runtime}",
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
