"""The run modes of the comparison (climstack.bench.run.catalogue's rows), each a way to launch
the same benchmark: native (the host's build on the host MPI) or a container mode (the
image's build on a bind plan, `climstack bind`'s, with the catalogue's host families).

Container modes launch the ranks from the host's `mpiexec`, as on a Cray; the ranks of
the node join one container where the runtime can (`ch-run --join`, podman's `exec` into
the node's container), else each has its own (Apptainer). Each program passes the gate
(climstack.check.gate: `verify`, confirmed by the image's own ld.so, unless `model_only`)
under its mode's plan before it first runs (once per mode: its repeats run the same file of
the same image under the same plan).
"""

from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from climstack.bench.run import catalogue, leftovers
from climstack.bind import loader, plan
from climstack.check import gate
from climstack.errors import ClimstackError
from climstack.image import image, image_check
from climstack.inputs import sites
from climstack.launch import launch, launchers, runtimes

#: the modes `bench local` and `run-case` run (the catalogue's local rows)
MODES = tuple(catalogue.names(local=True))


@dataclass
class Mode:
    """How a mode finds and launches a benchmark's program."""

    name: str
    runtime: str
    wrap: callable  # program argv, cwd=None -> argv (cwd: where it starts, in a container)
    locate: callable  # benchmark -> program path; LookupError(why) if this mode lacks it
    env: dict | None = None
    unavailable: str = ""  # why the mode cannot run at all (every run reports it)
    stop: callable = None  # after a timeout: removes what the launch left (leftovers.py)


def native(launcher: list[str], prefixes: dict[str, Path], name: str = "native") -> Mode:
    """A host build (`prefixes`: the native environment's, or the CCE stand-in's for
    native-cce), launched as is."""

    def locate(benchmark):
        if benchmark.package not in prefixes:
            raise LookupError(f"{benchmark.package} is not installed")
        return str(prefixes[benchmark.package] / benchmark.argv[0])

    return Mode(name, "none", lambda program, cwd=None: [*launcher, *program], locate)


def in_image(image_dir: Path, path: str) -> str | None:
    """The image path `path` (symlinks followed inside the image), if it is a file there."""
    real = image_check.resolve_in(image_dir, PurePosixPath(path))
    return "/" + str(real.relative_to(image_dir)) if real.is_file() else None


def image_program(image_dir: Path, benchmark, name: str) -> str:
    """`benchmark`'s program in the image as mode `name` runs it (bind-noxpmem: its copy
    without libxpmem); LookupError if the image lacks it."""
    path = in_image(image_dir, f"{image.VIEW}/{benchmark.argv[0]}")
    if not path:
        raise LookupError(
            f"{benchmark.package} is not in the image {image_dir}: no "
            f"{image.VIEW}/{benchmark.argv[0]}; its slice "
            f"({image.SLICE['CLIMSTACK_IMAGE_SLICE']}, environments/stack.yaml "
            "image_specs) should hold it: rebuild it with `climstack image --force`"
        )
    noxpmem = catalogue.get(name).binary == catalogue.NOXPMEM
    if noxpmem and not (path := in_image(image_dir, image.NOXPMEM + path)):
        raise LookupError(f"the image has no copy of {benchmark.argv[0]} without xpmem")
    return path


def gated(made, image_dir: Path, target, path: str, name: str, model_only: bool) -> str:
    """`path` once the gate passed it under mode `name`'s plan; LookupError (the verdict's
    reason) if refused."""
    try:
        gate.require(made, Path(target or image_dir), [path], model_only, f"bench {name}",
                     fix="climstack verify", tree=image_dir)  # fmt: skip
    except gate.Refused as refused:
        raise LookupError(f"verify refuses {path} under the {name} plan: {refused.why}")
    return path


def container(
    name: str,
    image_dir: Path,
    launcher: list[str],
    ranks: int,
    runtime: str = "charliecloud",
    target: str | None = None,
    fabric_prefix: str | None = None,
    env: dict | None = None,
    host_netcdf: dict[str, str | None] | None = None,
    work: Path | None = None,
    model_only: bool = False,
    join: bool = True,
) -> Mode:
    """The catalogue's container mode `name` on `image_dir` (`climstack image`; `target`: the
    SIF Apptainer runs, made from it), with the local site's plan for the mode; a mode with
    host families binds `host_netcdf` ({name: prefix or None for the site's external}); the
    directory `work`, where the runs write, is bound at its own path, and `wrap(program,
    cwd)` starts the program there (the runtime's own option: ch-run starts in /); `join`
    False: one container per rank even where the node's ranks could share one."""
    row = catalogue.get(name)
    plan_mode = row.plan
    families = {f: (host_netcdf or {}).get(f) for f in row.families} or None
    chosen = runtimes.get(runtime)
    try:
        made = plan.make(
            sites.get("local"),
            plan_mode,
            view=loader.View(),
            runtime=runtime,
            fabric_prefix=fabric_prefix,
            with_families=families,
        )
        if work and not chosen.read_only_binds:  # the comparison's, not in the written plan
            work.mkdir(parents=True, exist_ok=True)
            made = replace(made, binds=[*made.binds, [str(work), str(work)]])
        chosen.prepare_image(made, image_dir)  # the mount points ch-run cannot create
    except ClimstackError as err:
        reason = f"no {plan_mode} plan: {err.message}" + (f"; fix: {err.fix}" if err.fix else "")

        def refuse(*_, **__):
            raise LookupError(reason)

        return Mode(name, runtime, refuse, refuse, unavailable=reason)
    given = launchers.given(launcher)

    def wrap(program, cwd=None):  # the node's ranks share one container where it can
        image_path = target or image_dir
        joined = ranks if join else 0
        return launch.command(made, chosen, given, image_path, program, ranks, joined, cwd)

    verified: dict[str, str | LookupError] = {}  # program -> its path, or why it cannot run

    def locate(benchmark):
        """The program's path in the image, verified under the mode's plan; LookupError if
        the image lacks it or verify refuses it. Verified once per program: every repeat
        runs the same file of the same image under the same plan, so a repeat would only
        get the same report again (each costs up to seconds: the image's ld.so asked)."""
        if benchmark.argv[0] not in verified:
            try:
                verified[benchmark.argv[0]] = _locate(benchmark)
            except LookupError as why:
                verified[benchmark.argv[0]] = why
        if isinstance(found := verified[benchmark.argv[0]], LookupError):
            raise LookupError(*found.args)
        return found

    def _locate(benchmark):  # before it runs: refused, not crashed; the image's ld.so asked
        path = image_program(image_dir, benchmark, name)
        return gated(made, image_dir, target, path, name, model_only)

    def stop():  # after a timeout: podman's containers and conmon outlive the launch
        global_args = chosen.settings(str(target or image_dir)).global_args
        leftovers.stop_podman(str(made.directory), global_args)

    return Mode(
        name, runtime, wrap, locate, env, stop=stop if chosen.outlives_its_launch else None
    )
