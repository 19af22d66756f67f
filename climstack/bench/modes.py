"""The run modes of the comparison, each a way to launch the same benchmark:

- native: the host's build (the local environment) on the host MPI;
- bind: the image's build with the host MPI bound in (`climstack bind`'s plan), xpmem stub
  in DT_NEEDED;
- bind-noxpmem: the same, the executable as built, without libxpmem.so.0 (image.NOXPMEM);
- hybrid: the image's build on the image's own MPI;
- fabric: the image's MPI over the host's libfabric.

Container modes launch one container per rank from the host's `mpiexec`, as on a Cray;
under Charliecloud the ranks of the node join one container (`ch-run --join`).
"""

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from climstack.bench.records import MODES
from climstack.bind import loader, plan
from climstack.errors import ClimstackError
from climstack.image import image, image_check
from climstack.launch import launch, launchers, runtimes

CONTAINER_MODES = MODES[1:]


@dataclass
class Mode:
    """How a mode finds and launches a benchmark's program."""

    name: str
    runtime: str
    wrap: callable  # program argv -> argv
    locate: callable  # benchmark -> program path; LookupError(why) if this mode lacks it
    env: dict | None = None
    unavailable: str = ""  # why the mode cannot run at all (every run reports it)


def native(launcher: list[str], prefixes: dict[str, Path]) -> Mode:
    """The host's build, launched as is."""

    def locate(benchmark):
        if benchmark.package not in prefixes:
            raise LookupError(f"{benchmark.package} is not installed")
        return str(prefixes[benchmark.package] / benchmark.argv[0])

    return Mode("native", "none", lambda program: [*launcher, *program], locate)


def in_image(image_dir: Path, path: str) -> str | None:
    """The image path `path` (symlinks followed inside the image), if it is a file there."""
    real = image_check.resolve_in(image_dir, PurePosixPath(path))
    return "/" + str(real.relative_to(image_dir)) if real.is_file() else None


def container(
    name: str,
    image_dir: Path,
    launcher: list[str],
    ranks: int,
    runtime: str = "charliecloud",
    target: str | None = None,
    fabric_prefix: str | None = None,
    env: dict | None = None,
) -> Mode:
    """Mode `name` of CONTAINER_MODES on `image_dir` (`climstack image`; `target`: the SIF
    Apptainer runs, made from it), with the local site's plan for the mode."""
    plan_mode = "bind" if name.startswith("bind") else name
    chosen = runtimes.get(runtime)
    try:
        made = plan.make_plan(
            "local", plan_mode, loader.View(), runtime=runtime, fabric_prefix=fabric_prefix
        )
        made = plan.write(made, plan.default_directory(made))
        chosen.prepare_image(made, image_dir)  # the mount points ch-run cannot create
    except ClimstackError as err:
        reason = f"no {plan_mode} plan: {err.message}" + (f"; fix: {err.fix}" if err.fix else "")
        return Mode(name, runtime, list, list, unavailable=reason)
    given = launchers.given(launcher)

    def wrap(program):  # the node's ranks share one container where the runtime can
        return launch.command(made, chosen, given, target or image_dir, program, ranks, join=ranks)

    def locate(benchmark):
        path = in_image(image_dir, f"{image.VIEW}/{benchmark.argv[0]}")
        if not path:
            raise LookupError(
                f"{benchmark.package} is not in the image: it carries the probes and the MPI "
                "benchmarks (slice mpi-bench); the I/O benchmarks need HDF5, which has no "
                "offline source here"
            )
        if name == "bind-noxpmem" and not (path := in_image(image_dir, image.NOXPMEM + path)):
            raise LookupError(f"the image has no copy of {benchmark.argv[0]} without xpmem")
        return path

    return Mode(name, runtime, wrap, locate, env)
