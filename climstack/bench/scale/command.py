"""`climstack bench scale`: start-up and memory as ranks grow on one node, in each launch mode
(climstack.bench.scale.scale_modes), the growth per rank fitted, and the load at 1,000 and
10,000 ranks on a Lustre metadata server; the report scale.md, scale.png and runs.jsonl."""

import json
import shutil
import time
from pathlib import Path

from climstack import pins
from climstack.bench.run.local import IMAGE
from climstack.bench.scale import scale_modes, scale_report, scale_run
from climstack.check import container_smoke
from climstack.common import atomic
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.stack import environments
from climstack.stack.install import install


def _ranks(given: str, option: str = "--ranks", least: int = 2) -> tuple[int, ...]:
    try:
        ranks = tuple(sorted({int(n) for n in given.split(",")}))
    except ValueError:
        ranks = ()
    if len(ranks) < least or ranks[0] < 1:
        raise ClimstackError(
            f"{option} {given}: not {least} or more rank counts of at least 1",
            fix="comma-separated, for example 2,4,8,16,32",
        )
    return ranks


def _record(path: Path) -> list[dict]:
    """The runs of a `bench scale` record (its runs.jsonl)."""
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as err:
        rows, why = [], str(err)
    else:
        why = "no launch of a mode in it"
    if not any("mode" in row for row in rows if isinstance(row, dict)):
        raise ClimstackError(
            f"--report {path}: not a readable runs.jsonl of `bench scale` ({why})",
            fix="name the runs.jsonl a `climstack bench scale` run wrote",
        )
    return rows


def run_scale(args, fresh_out) -> int:
    """Exit status 3 when a mode could not run (each named in the report)."""
    if args.report:
        print(scale_report.markdown(_record(Path(args.report)), args.report))
        return 0
    names = args.modes.split(",") if args.modes else list(scale_modes.MODES)
    unknown = [n for n in names if n not in scale_modes.MODES]
    if unknown:
        raise ClimstackError(
            f"--modes: unknown {', '.join(unknown)}", fix=",".join(scale_modes.MODES)
        )
    ranks = _ranks(args.ranks)
    args.out = args.out or pins.cache_dir() / "bench" / time.strftime("scale-%Y%m%d-%H%M%S")
    out = fresh_out(args)
    if out.exists() and args.force:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    prefixes = install(environments.resolve("local"))
    image_dir = image.build(IMAGE, Path(args.image or image.default_destination(IMAGE)))
    sif = container_smoke.target(IMAGE, "apptainer", image_dir)
    modes = scale_modes.Modes(names, prefixes, image_dir, sif, (out / "model").resolve())
    model_ranks = (
        [] if args.model_ranks == "none" else _ranks(args.model_ranks, "--model-ranks", 1)
    )
    rows = scale_run.run(modes, out, ranks, args.repeats, model_ranks)
    table = scale_report.markdown(rows, str(out / "runs.jsonl"))
    title = "# Start-up and memory as ranks grow (`climstack bench scale`)\n\n"
    atomic.write_text(out / "scale.md", title + table + "\n![growth](scale.png)\n")
    scale_report.plot(rows, out / "scale.png")
    print(table)
    print(f"climstack bench scale: {out / 'scale.md'}, {out / 'scale.png'}")
    return 3 if any("failed" in row for row in rows) else 0


def add_parser(subparsers, fresh_out) -> None:
    scale = subparsers.add_parser(
        "scale",
        help="start-up, processes, memory and file-system metadata calls of a launch as ranks "
        "grow on one node, per launch mode; the growth per rank fitted",
    )
    scale.add_argument("--ranks", default=",".join(map(str, scale_run.RANKS)),
                       help="comma-separated rank counts (default: %(default)s)")  # fmt: skip
    scale.add_argument("--model-ranks", default=",".join(map(str, scale_run.MODEL_RANKS)),
                       help="rank counts MOM6's start-up is measured on, or none (default: "
                       "%(default)s: this machine's cores)")  # fmt: skip
    scale.add_argument("--modes", help=f"comma-separated, from {','.join(scale_modes.MODES)}")
    scale.add_argument("--repeats", type=int, default=3, help="runs per cell (default 3)")
    scale.add_argument("--image", type=Path, help=f"the image directory of {IMAGE}")
    scale.add_argument("--out", type=Path, help="the report's directory")
    scale.add_argument("--force", action="store_true", help="replace --out if it exists")
    scale.add_argument("--report", metavar="RUNS_JSONL",
                       help="print the report of a run's runs.jsonl, run nothing")  # fmt: skip
    scale.set_defaults(run=lambda args: run_scale(args, fresh_out), resume=None)
