"""`climstack bench local`: install the local environment (the stack and the four
benchmarks, from offline sources), run the comparison and write its report;
`climstack bench report DIR...`: the same report from raw outputs copied back from a centre
(a directory of Slurm .out files)."""

import shutil
import sys
import time
from pathlib import Path

from climstack import pins
from climstack.bench import collect, records, report, runner
from climstack.build import bench_sources, environments
from climstack.common import progress
from climstack.config import spack
from climstack.errors import ClimstackError


def install(env_dir: Path) -> dict[str, Path]:
    """Fill the source mirror, install the whole environment; name -> prefix."""
    bench_sources.fill(env_dir, bench_sources.local_mirror())
    with progress.step(f"installing the whole {environments.label(env_dir)} environment"):
        spack.stream("install", "-j", "2", env=env_dir)
    found = spack.run("find", "--format", "{name} {prefix}", env=env_dir).stdout.split("\n")
    return {name: Path(prefix) for name, prefix in (line.split() for line in found if line)}


def write_report(found, out: Path) -> list[Path]:
    recs, failures, problems = found
    for problem in problems:
        print(f"climstack bench: warning: {problem}", file=sys.stderr)
    paths = list(records.write(recs, failures, out))
    return paths + report.write(recs, failures, problems, out)


def run_local(args) -> None:
    env_dir = environments.resolve("local")
    if not (env_dir / "spack.lock").is_file():
        raise ClimstackError(
            f"{env_dir} is not concretized", fix="`climstack concretize local` first"
        )
    prefixes = install(env_dir)
    if not shutil.which("mpiexec"):
        raise ClimstackError("no `mpiexec` on PATH", fix="apt-get install mpich (bin/setup)")
    out = Path(args.out or pins.cache_dir() / "bench" / time.strftime("local-%Y%m%d-%H%M%S"))
    modes = [runner.native(["mpiexec", "-n", str(args.ranks)])]
    with progress.step(f"running the benchmarks, {args.repeats} repeats, into {out}"):
        runner.run_all(list(runner.LOCAL), prefixes, modes, out, args.repeats, args.ranks)
    paths = write_report(collect.read_paths([out / "raw"]), out)
    print(f"climstack bench: report in {out}")
    for path in paths:
        print(f"  {path}")


def run_report(args) -> None:
    out = Path(args.out) if args.out else Path(args.paths[0]) / "report"
    paths = write_report(collect.read_paths([Path(p) for p in args.paths]), out)
    print(f"climstack bench: report in {out}")
    for path in paths:
        print(f"  {path}")


def register(commands) -> None:
    sub = commands.add_parser("bench", help="run the benchmarks and report the comparison")
    actions = sub.add_subparsers(dest="action", required=True)
    local = actions.add_parser("local", help="install the local environment, run, report")
    local.add_argument("--repeats", type=int, default=3, help="runs per mode (default 3)")
    local.add_argument("--ranks", type=int, default=2)
    local.add_argument("--out", help="report directory (default: a new one in the cache)")
    local.set_defaults(run=run_local)
    rep = actions.add_parser("report", help="tables and plots from raw outputs")
    rep.add_argument("paths", nargs="+", help="output files or directories (Slurm .out)")
    rep.add_argument("--out", help="report directory (default: FIRST_PATH/report)")
    rep.set_defaults(run=run_report)
