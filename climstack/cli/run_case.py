"""`climstack run-case`: run a climate model's case (cases/<name>/) and record its main-loop
time and output digests (climstack.bench.cases); `climstack compare-runs`: two runs of a
case compared bit for bit (climstack.bench.bitwise)."""

import json
import sys
from dataclasses import asdict
from pathlib import Path

from climstack.bench import bitwise, cases
from climstack.errors import ClimstackError
from climstack.launch import launchers


def register(commands) -> None:
    def run_case(args):
        case = cases.get(args.case)
        settings = cases.parse_settings(args.set)
        if not Path(args.program).is_file():
            raise ClimstackError(
                f"--program {args.program}: no such file",
                fix=f"the path of the installed {case.argv[0]} (`spack find -p {case.package}`)",
            )
        launcher = launchers.get(args.launcher).argv(args.ranks)
        result = cases.run(
            case, Path(args.run_dir), args.program, cases.native_wrap(launcher), settings,
            timeout=args.timeout,
        )  # fmt: skip
        print(
            f"{case.name}: main loop {result.main_loop_s:.3f} s, wall {result.wall_s:.1f} s "
            f"on {result.ranks} ranks; {len(result.digests)} outputs; "
            f"record {Path(result.run_dir) / cases.RECORD}"
        )
        if args.json:
            print(json.dumps(asdict(result), indent=2))
        if args.against:
            return compare(Path(args.against), Path(result.run_dir))
        return 0

    def compare(a: Path, b: Path) -> int:
        comparison = bitwise.compare(a, b)
        print(comparison.summary(), file=sys.stdout if comparison.identical else sys.stderr)
        return 0 if comparison.identical else 1

    sub = commands.add_parser(
        "run-case",
        help="run a model's case (cases/<name>) natively; main-loop time and output digests",
    )
    sub.add_argument("case", help="case name under cases/ (e.g. mom6-benchmark) or directory")
    sub.add_argument("run_dir", help="new (or empty) run directory")
    sub.add_argument(
        "--program", required=True, help="the model's executable (e.g. MOM6_PREFIX/bin/MOM6)"
    )
    sub.add_argument("--ranks", type=int, default=2, help="MPI ranks (default 2)")
    sub.add_argument(
        "--launcher", default="mpiexec", help="host launcher plug-in (default mpiexec)"
    )
    sub.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an #override in the run's MOM_override (e.g. DAYMAX=0.125); repeatable",
    )
    sub.add_argument(
        "--against",
        metavar="RUN_DIR",
        help="then compare with this run bit for bit (exit 1 if they differ)",
    )
    sub.add_argument("--timeout", type=float, default=3600, help="seconds (default 3600)")
    sub.add_argument("--json", action="store_true", help="print the run's record as JSON")
    sub.set_defaults(run=run_case)

    cmp = commands.add_parser(
        "compare-runs",
        help="two runs of a case bit for bit: *.stats text, every NetCDF variable's data "
        "(exit 0 identical, 1 differ)",
    )
    cmp.add_argument("run_a")
    cmp.add_argument("run_b")
    cmp.set_defaults(run=lambda args: compare(Path(args.run_a), Path(args.run_b)))
