"""`climstack bench SITE --emit DIR`: the Slurm job scripts that reproduce the field's
comparisons at a centre, one per comparison, each running its modes alternating, repeat
after repeat, every run's output after a `climstack-bench:` header line, so that
`climstack bench report` reads the job's .out file as it comes back.

Run it where the jobs will run (a login node): the bind plans are made there, from the
host's MPI and libraries (`climstack bind`), into DIR/plans. Native runs use the site
environment's own builds (`spack location -i` at job time); container runs use the image's
view, and its copies without libxpmem.so.0 (image.NOXPMEM) for bind-noxpmem.
"""

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from climstack import spack as gateway
from climstack.bench import runner
from climstack.bench.collect import HEADER
from climstack.bind import loader, plan
from climstack.common import atomic
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.jobs import slurm
from climstack.launch import launch, runtimes
from climstack.stack import environments

#: plan name -> (mode, host families, PrgEnv flavour)
PLANS = {
    "bind": ("bind", None, None),
    "hybrid": ("hybrid", None, None),
    "bind-host-netcdf-gnu": ("bind", {"netcdf": None, "hdf5": None}, "gnu"),
    "bind-host-netcdf-cray": ("bind", {"netcdf": None, "hdf5": None}, "cray"),
}


@dataclass(frozen=True)
class Comparison:
    name: str  # the script's name
    benchmark: str  # runner.LOCAL name
    nodes: int
    ranks: int
    modes: tuple[str, ...]  # native, bind-noxpmem, or a PLANS name
    arguments: tuple[str, ...] = ()  # replacing the local run's (same option names)
    pending: tuple[str, ...] = ()  # seed modes not emitted yet, and why


SEEDS = (
    # ARCHER2 container guide: mpiBench at 128 ranks, native, without and with xpmem
    Comparison("mpibench-xpmem", "mpibench", 1, 128, ("native", "bind-noxpmem", "bind")),
    # Gaea and a vendor report: OSU latency (two nodes) and allgather, bind/hybrid/native
    Comparison("osu-latency", "osu_latency", 2, 2, ("native", "bind", "hybrid")),
    Comparison("osu-allgather", "osu_allgather", 1, 128, ("native", "bind", "hybrid")),
    # ARCHER2 container guide: netcdf-bench's 50 GB write five ways
    Comparison(
        "netcdf-bench",
        "netcdf-bench",
        1,
        128,
        ("native", "bind", "bind-host-netcdf-gnu", "bind-host-netcdf-cray"),
        ("-d=200:1024:768:85",),
        ("native-cce: needs a PrgEnv-cray build of the site environment",),
    ),
)


def program(benchmark: runner.Benchmark, mode: str, ranks: int, extra=()) -> list[str]:
    """The benchmark's command in `mode` (a native path resolved at job time)."""
    options = {a.split("=")[0]: a for a in extra}
    args = [options.get(a.split("=")[0], a).format(ranks=ranks) for a in benchmark.argv[1:]]
    if mode == "native":
        return [f'"$(native_prefix {benchmark.package})/{benchmark.argv[0]}"'] + args
    in_view = f"{image.VIEW}/{benchmark.argv[0]}"
    if mode == "bind-noxpmem":  # the copy as built, at NOXPMEM + its real path
        run = f'exec "{image.NOXPMEM}$(readlink -f "$0")" "$@"'
        return ["sh", "-c", run, in_view, *args]
    return [in_view, *args]


def make_plans(site: str, out: Path, root: Path, names) -> tuple[dict, dict]:
    """The plans the comparisons need, written under out/plans: (name -> plan, name ->
    why it could not be made on this host)."""
    made, failed = {}, {}
    for name in names:
        mode, families, flavour = PLANS[name]
        try:
            found = plan.make_plan(
                site, mode, loader.View(root), with_families=families, flavour=flavour
            )
            made[name] = plan.write(found, out / "plans" / name)
        except ClimstackError as err:
            failed[name] = f"{err.message} (fix: {err.fix})" if err.fix else err.message
    return made, failed


def script(site, comparison, plans, image_path: str, repeats: int, reasons: dict) -> str:
    benchmark = next(b for b in runner.LOCAL if b.name == comparison.benchmark)
    component = slurm.Component(comparison.nodes, comparison.ranks, [])
    lines = slurm.preamble(site, [component], f"bench-{comparison.name}")
    env_dir = environments.resolve(site)
    lines += [
        f"# {comparison.name}: {', '.join(comparison.modes)}; {repeats} repeats, alternating",
        *(f"# pending: {why}" for why in comparison.pending),
        *(f"# not emitted: {mode}: {why[:300]}" for mode, why in reasons.items()),
        f'native_prefix() {{ {gateway.SPACK} -e {env_dir} location -i "$1"; }}',
        f"for repeat in $(seq 1 {repeats}); do",
    ]
    for mode in comparison.modes:
        if mode in reasons:
            continue
        header = (
            f"{HEADER} benchmark={benchmark.family} mode={mode} ranks={comparison.ranks} "
            f"nodes={comparison.nodes} site={site} repeat=$repeat"
        )
        command = program(benchmark, mode, comparison.ranks, comparison.arguments)
        if mode == "native":
            before, step = [], f"srun {slurm.srun_options(site, component)} " + " ".join(command)
            header += " runtime=none"
        else:
            made = plans["bind" if mode == "bind-noxpmem" else mode]
            shape = [(component.ntasks, component.nodes, command)]
            runtime = runtimes.get(made.runtime)
            before, step = launch.job_step(made, runtime, slurm.srun(site), image_path, shape)
            header += f" runtime={made.runtime}"
        failed = f"{HEADER} failed benchmark={benchmark.family} mode={mode} reason="
        lines += [f'  echo "{header}"', "  ("]
        lines += [f"    {line}" for line in (*before, step)]
        lines += [f"  ) || echo \"{failed}'srun exit '$?\""]
    return "\n".join(lines + ["done"]) + "\n"


def emit(site: str, out: Path, image_path: str, repeats=5, ranks=None, root=Path("/")):
    """Write one script per seed comparison under `out`; returns their paths."""
    seeds = [replace(c, nodes=1, ranks=ranks) if ranks else c for c in SEEDS]
    wanted = {m if m != "bind-noxpmem" else "bind" for c in seeds for m in c.modes} - {"native"}
    plans, failed = make_plans(site, out, root, sorted(wanted))
    if Path(image_path).is_dir():  # Charliecloud cannot create mount points itself
        for made in plans.values():
            plan.prepare_image(made, Path(image_path))
    written = []
    for comparison in seeds:
        reasons = {
            m: failed[p] for m in comparison.modes if (p := m.replace("-noxpmem", "")) in failed
        }
        for mode, why in reasons.items():
            print(
                f"climstack bench: {comparison.name}: {mode} not emitted: {why}", file=sys.stderr
            )
        path = out / f"{comparison.name}.sh"
        atomic.write_text(path, script(site, comparison, plans, image_path, repeats, reasons))
        path.chmod(0o755)
        written.append(path)
    return written
