"""`climstack bench SITE --emit DIR`: the Slurm job scripts that reproduce the field's
comparisons at a centre, one per comparison. Each script is the comparison's run matrix
(climstack.bench.run.matrix, the list the local runner runs too) rendered by a Jinja
template (templates/job.sh.j2): one function per mode, then one `bench MODE REPEAT ORDER`
line per run in the matrix's order (each repeat runs every mode once, the order rotated per
repeat), every run's output after a `climstack-bench:` header line (the writer of
climstack.bench.results.headers) naming the site, host, job and start, so that `climstack
bench report` reads the job's .out file as it comes back.

Run it where the jobs will run (a login node): the bind plans are made there, from the
host's MPI and libraries (`climstack bind`), into DIR/plans. Native runs use the site
environment's own builds (`spack location -i` at job time); container runs use the image's
view, and its copies without libxpmem.so.0 (image.NOXPMEM) for bind-noxpmem.

benchio writes into a directory of its own below $CLIMSTACK_BENCH_DIR (default the submit
directory). Where the site has Lustre (`lustre:` in its site.yaml), its job sweeps the stripe
settings EPCC's benchio study and the ARCHER2 notes vary, and the comparison of I/O layers
(benchio with ADIOS2, `io-layers-*`) the I/O study's own (STUDY_SWEEP): the directory, the
settings and the lines that set them before each set of runs are climstack.bench.run.stripes's;
each run's header line says `stripe_count=COUNT stripe_size=SIZE` (the report groups the rates
by them). Without `lustre:` it runs as the other scripts do and says so in a comment line.

A model's case (MOM6) runs each mode and repeat in a run directory of its own below
$CLIMSTACK_BENCH_DIR (`mom6-JOBID/MODE.rREPEAT`), copied from the case prepared at emit time
(DIR/cases/<case>: its inputs and MOM_override with the comparison's settings); the
ranks start there, in the container too. After the runs the job compares every mode's
outputs with native's of the same repeat (`climstack compare-runs`) and prints each verdict
as a `bitwise` header line, which `bench report` puts in its headline.
"""

import shlex
import shutil
import sys

from dataclasses import dataclass, replace
from pathlib import Path

from climstack import pins
from climstack import spack as gateway
from climstack.bench.model import cases
from climstack.bench.run import catalogue, emit_gate, matrix, runner, stripes
from climstack.bench.results.headers import BITWISE, FAILED, header
from climstack.bind import loader, plan
from climstack.common import atomic
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.inputs import sites
from climstack.jobs import rendering, slurm
from climstack.launch import launch, runtimes
from climstack.stack import environments

#: the I/O comparisons' modes: the ARCHER2 guide's five ways (less native CCE), then the
#: image's own MPI, and it over the host's libfabric
IO_MODES = (
    "native",
    "bind",
    "bind-host-netcdf-gnu",
    "bind-host-netcdf-cray",
    "hybrid",
    "fabric",
)
NATIVE_CCE = "native-cce: needs a PrgEnv-cray build of the site environment"


@dataclass(frozen=True)
class Comparison:
    name: str  # the script's name
    benchmark: str  # runner.LOCAL name
    nodes: int
    ranks: int
    modes: tuple[str, ...]  # catalogue modes that run at a centre
    arguments: tuple[str, ...] = ()  # replacing the local run's (same option names)
    pending: tuple[str, ...] = ()  # seed modes not emitted yet, and why
    stripes: bool = False  # sweeps Lustre's stripe settings where the site has Lustre
    settings: tuple[str, ...] = ()  # a model case's overrides (the local run's: its own)
    sweep: tuple[tuple[int, str], ...] = ()  # its own (count, size) settings, not the site's


SEEDS = (
    # ARCHER2 container guide: mpiBench at 128 ranks, native, without and with xpmem
    Comparison("mpibench-xpmem", "mpibench", 1, 128, ("native", "bind-noxpmem", "bind")),
    # Gaea and a vendor report: OSU latency (two nodes) and allgather, bind/hybrid/native
    Comparison("osu-latency", "osu_latency", 2, 2, ("native", "bind", "hybrid")),
    Comparison("osu-allgather", "osu_allgather", 1, 128, ("native", "bind", "hybrid")),
    # ARCHER2 container guide: netcdf-bench's 50 GB write five ways (and hybrid, fabric)
    Comparison(
        "netcdf-bench", "netcdf-bench", 1, 128, IO_MODES, ("-d=200:1024:768:85",), (NATIVE_CCE,)
    ),
    # EPCC's benchio (serial, MPI-IO, HDF5, NetCDF to one shared file, 128 MiB per rank)
    # in the same modes, over Lustre's stripe counts and sizes where the site has Lustre
    Comparison("benchio", "benchio", 1, 128, IO_MODES, pending=(NATIVE_CCE,), stripes=True),
    # ARCHER2's I/O study: one array per rank through MPI-IO and HDF5, then ADIOS2's BP4,
    # BP5 and HDF5 engines (benchio with ADIOS2), 2048 ranks on 16 nodes, natively (the
    # site environment's build) and in the image, over the study's stripe settings
    *(
        Comparison(
            f"io-layers-{engine}",
            f"benchio-adios2-{engine}",
            16,
            2048,
            ("native", "bind", "hybrid"),
            stripes=True,
            sweep=stripes.STUDY_SWEEP,
        )  # fmt: skip
        for engine in ("bp4", "bp5", "hdf5")
    ),
    # NOAA/ORNL on Gaea: the ocean of ESM4 natively and in containers; MOM6's benchmark
    # case at its own size (360x180), one model day, on one node
    Comparison(
        "mom6", "mom6", 1, 128, ("native", "bind", "hybrid", "fabric"), settings=("DAYMAX=1.0",)
    ),
)
#: every mode a seed compares, in catalogue order (what `--emit --modes` chooses from)
EMIT_MODES = tuple(catalogue.ordered({m for c in SEEDS for m in c.modes}))


def program(benchmark: runner.Benchmark, mode: str, ranks: int, extra=()) -> list[str]:
    """The benchmark's command in `mode` (a native path resolved at job time)."""
    options = {a.split("=")[0]: a for a in extra}
    args = [options.get(a.split("=")[0], a).format(ranks=ranks) for a in benchmark.argv[1:]]
    binary = catalogue.get(mode).binary
    if binary == catalogue.HOST:
        return [f'"$(native_prefix {benchmark.package})/{benchmark.argv[0]}"'] + args
    in_view = f"{image.VIEW}/{benchmark.argv[0]}"
    if binary == catalogue.NOXPMEM:  # the copy as built, at NOXPMEM + its real path
        run = f'exec "{image.NOXPMEM}$(readlink -f "$0")" "$@"'
        return ["sh", "-c", run, in_view, *args]
    return [in_view, *args]


def make_plans(site: sites.Site, out: Path, root: Path, names) -> tuple[dict, dict]:
    """The plans the container modes `names` need, one per distinct plan (modes that differ
    only in their binary share one), written under out/plans/<the first such mode>:
    (mode -> plan, mode -> why its plan could not be made on this host)."""
    made, failed, by_key = {}, {}, {}
    for name in catalogue.ordered(names):
        row = catalogue.get(name)
        if row.plan_key in by_key:  # the plan of a mode before it
            first = by_key[row.plan_key]
            (made if first in made else failed)[name] = (made | failed)[first]
            continue
        by_key[row.plan_key] = name
        families = dict.fromkeys(row.families) or None
        try:
            made[name] = plan.make(
                site,
                row.plan,
                out=out / "plans" / name,
                view=loader.View(root),
                with_families=families,
                flavour=row.flavour,
            )
        except ClimstackError as err:
            failed[name] = f"{err.message} (fix: {err.fix})" if err.fix else err.message
    return made, failed


def runs(comparison: Comparison, repeats: int, reasons: dict, lustre=None) -> list:
    """The comparison's run matrix at the centre: its modes less those not emitted."""
    modes = [m for m in comparison.modes if m not in reasons]
    settings = stripes.stripe_settings(lustre, comparison) if comparison.stripes else []
    sweep = {comparison.benchmark: settings} if settings else None
    return matrix.runs([(comparison.benchmark, modes)], repeats, sweep)


TEMPLATE = "job.sh.j2"  # climstack/bench/run/templates/: a comparison's job script


def script(
    site: sites.Site, comparison, plans, image_path: str, repeats: int, reasons: dict,
    case_dir: Path | None = None,
) -> str:  # fmt: skip
    """The comparison's job script: its run matrix rendered by the template; a sweep of
    the stripe settings where the site has Lustre (`site.lustre`)."""
    lustre = site.lustre
    benchmark = next(b for b in runner.LOCAL if b.name == comparison.benchmark)
    component = slurm.Component(comparison.nodes, comparison.ranks, [])
    comments, setup = stripes.work_directory(site, comparison, benchmark)
    if benchmark.case:
        setup = _case_directory(comparison, case_dir)
    planned = runs(comparison, repeats, reasons, lustre)
    sweep = any(run.stripe for run in planned)
    if sweep:
        comments.append(
            f"# {len(planned)} runs of {comparison.name} (settings x modes x repeats): give the "
            "job the time they take, e.g. sbatch --time=HH:MM:SS"
        )
    modes = []
    for mode in (m for m in comparison.modes if m not in reasons):
        body, runtime = _mode_step(site, comparison, benchmark, mode, plans, image_path)
        modes.append({"name": mode, "function": mode.replace("-", "_"), "body": body,
                      "runtime": runtime})  # fmt: skip
    fields = {
        "benchmark": benchmark.family, "mode": "$mode", "ranks": comparison.ranks,
        "nodes": comparison.nodes, "runtime": "$runtime", "site": site.name, "host": "$host",
        "job": "$job", "start": "$start", "repeat": "$repeat", "order": "$order",
    } | ({"stripe_count": "$count", "stripe_size": "$size"} if sweep else {})  # fmt: skip
    checked = {
        "benchmark": benchmark.family, "mode": "$1", "site": site.name, "host": "$host",
        "job": "$job", "repeat": "$2", "verdict": "$verdict",
    }  # fmt: skip
    compared = [
        (mode["name"], repeat)
        for repeat in range(1, repeats + 1)
        for mode in modes
        if benchmark.case and mode["name"] != catalogue.BASELINE
    ]
    return rendering.render(
        "climstack.bench.run",
        TEMPLATE,
        preamble="\n".join(slurm.preamble(site, [component], f"bench-{comparison.name}")),
        comparison=comparison, repeats=repeats, reasons=reasons, comments=comments,
        spack=gateway.SPACK, env_dir=environments.resolve(site.name), setup=setup, modes=modes,
        header=header(fields), failed=header(fields, FAILED), runs=planned,
        workdir=benchmark.workdir if sweep else None, compared=compared,
        climstack=pins.PROJECT_ROOT / "bin" / "climstack", bitwise=header(checked, BITWISE),
    )  # fmt: skip


def _mode_step(site, comparison, benchmark, mode, plans, image_path) -> tuple[list, str]:
    """(the lines of `mode`'s run function, its runtime)."""
    component = slurm.Component(comparison.nodes, comparison.ranks, [])
    command = program(benchmark, mode, comparison.ranks, comparison.arguments)
    enter = []
    if benchmark.case:  # a fresh copy of the prepared case, the step's directory
        enter = [
            'run_dir="$bench_dir/$mode.r$repeat"',
            'rm -rf "$run_dir" && cp -r "$case_dir" "$run_dir" && cd "$run_dir"',
        ]
    if not catalogue.get(mode).container:
        step = f"srun {slurm.srun_options(site, component)} " + " ".join(command)
        return [*enter, step], "none"
    made = plans[mode]
    shape = [(component.ntasks, component.nodes, command)]
    runtime = runtimes.get(made.runtime)
    here = bool(benchmark.case or benchmark.workdir)  # it writes in its directory
    before, step = launch.job_step(made, runtime, slurm.srun(site), image_path, shape, here=here)
    return [*enter, *before, step], made.runtime


def _case_directory(comparison: Comparison, case_dir: Path | None) -> list[str]:
    """The job's lines naming the prepared case ($case_dir, prepared_case) and making the
    runs' directory ($bench_dir)."""
    if case_dir is None:
        raise ClimstackError(
            f"{comparison.name}: a model's job script needs its prepared case",
            fix="emit it with jobs.emit, which prepares it",
        )
    case = f"case_dir={shlex.quote(str(case_dir))}"
    return [case, stripes.bench_dir(comparison), 'mkdir -p "$bench_dir"']


def emit(
    site: sites.Site,
    out: Path,
    image_path: str,
    repeats=5,
    ranks=None,
    root=Path("/"),
    only: tuple[str, ...] = EMIT_MODES,
    verify: bool = True,
    model_only: bool = False,
):
    """Write one script per seed comparison under `out`, each with the modes of `only` it
    has (none left: no script); returns their paths. benchio's sweeps the stripe settings
    where the site has Lustre (`lustre:` in its site.yaml). Each container mode's program
    passes the gate first (emit_gate), unless not `verify`."""
    seeds = [replace(c, nodes=1, ranks=ranks) if ranks else c for c in SEEDS]
    seeds = [replace(c, modes=ms) for c in seeds if (ms := tuple(m for m in c.modes if m in only))]
    if site.name == "local":  # the seeds' sizes are for a centre's nodes, and their modes
        # what this site builds: the local run's here
        seeds = [
            replace(c, arguments=(), settings=(), modes=tuple(m for m in c.modes if
                    _benchmark(c).runs_in(m)))
            for c in seeds
        ]  # fmt: skip
    wanted = {m for c in seeds for m in c.modes if catalogue.get(m).container}
    plans, failed = make_plans(site, out, root, wanted)
    if Path(image_path).is_dir():  # Charliecloud cannot create mount points itself
        for made in plans.values():
            runtimes.get("charliecloud").prepare_image(made, Path(image_path))
    pairs = [(c.name, _benchmark(c), m) for c in seeds for m in c.modes]
    refused = emit_gate.refusals(pairs, plans, Path(image_path), model_only) if verify else {}
    if not verify:
        print("climstack bench: --no-verify: no program verified in the image", file=sys.stderr)
    written = []
    for comparison in seeds:
        reasons = {m: failed[m] for m in comparison.modes if m in failed}
        reasons |= {m: why for (name, m), why in refused.items() if name == comparison.name}
        for mode, why in reasons.items():
            print(
                f"climstack bench: {comparison.name}: {mode} not emitted: {why}", file=sys.stderr
            )
        path = out / f"{comparison.name}.sh"
        case_dir = prepared_case(comparison, out)
        text = script(site, comparison, plans, image_path, repeats, reasons, case_dir)
        atomic.write_text(path, text)
        path.chmod(0o755)
        written.append(path)
    return written


def _benchmark(comparison: Comparison) -> runner.Benchmark:
    return next(b for b in runner.LOCAL if b.name == comparison.benchmark)


def prepared_case(comparison: Comparison, out: Path) -> Path | None:
    """A model comparison's case prepared once under out/cases (inputs, MOM_override with
    the comparison's settings, or the local run's), which every run copies."""
    benchmark = next(b for b in runner.LOCAL if b.name == comparison.benchmark)
    if not benchmark.case:
        return None
    where = out / "cases" / comparison.name
    if where.exists():
        shutil.rmtree(where)
    settings = cases.parse_settings(list(comparison.settings or benchmark.settings))
    return cases.prepare(cases.get(benchmark.case), where, settings).resolve()
