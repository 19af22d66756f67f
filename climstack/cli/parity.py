"""`climstack parity`: prove by trace that the container loads what a native run loads
(climstack.check.parity)."""

import json
import shlex
from dataclasses import asdict
from pathlib import Path

from climstack.bind.plan import Plan
from climstack.check.parity import DEFAULT_PROBE, render, run
from climstack.errors import ClimstackError


def register(commands) -> None:
    def main(args):
        if not args.image.exists():
            raise ClimstackError(
                f"--image {args.image} does not exist", fix="give the image directory or .sif"
            )
        plan = Plan.load(args.plan)
        report = run(
            plan,
            args.image,
            shlex.split(args.native),
            args.probe,
            shlex.split(args.launcher),
            args.expect or None,
        )
        print(json.dumps(asdict(report), indent=2) if args.json else render(report))
        return 0 if report.ok else 1

    sub = commands.add_parser(
        "parity",
        help="trace mpi-probe natively and in the container under a bind plan: lost "
        "network providers, libraries shadowed by the image's",
    )
    sub.add_argument("--plan", type=Path, required=True, help="plan dir from `climstack bind`")
    sub.add_argument("--image", type=Path, required=True, help="image directory or .sif")
    sub.add_argument(
        "--native", required=True, help="the probe built against the host MPI (a host path)"
    )
    sub.add_argument("--probe", default=DEFAULT_PROBE, help="the probe inside the image")
    sub.add_argument(
        "--launcher",
        default="mpiexec -n 2",
        help="host launcher for both runs, e.g. 'srun --nodes=1 --ntasks=2 --mpi=pmi2'",
    )
    sub.add_argument(
        "--expect",
        action="append",
        metavar="PROVIDER",
        help="a provider whose loss fails the check (default: the site's `providers:`, "
        "else every provider the native run loaded)",
    )
    sub.add_argument("--json", action="store_true")
    sub.set_defaults(run=main)
