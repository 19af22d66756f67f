"""`climstack run-case`: run a climate model's case (cases/<name>/) natively or in a container
mode, the benchmarks' launch path (climstack.bench.run.modes), and record its main-loop time and
output digests (climstack.bench.model.cases); `climstack compare-runs`: two runs of a case
compared bit for bit (climstack.bench.model.bitwise)."""

import json
import sys
from dataclasses import asdict
from pathlib import Path

from climstack.bench.model import bitwise, cases
from climstack.bench.run import local, modes
from climstack.check import gate
from climstack.errors import ClimstackError
from climstack.launch import launchers, runtimes
from climstack.stack import environments
from climstack.stack.install import installed


def _mode_and_program(args, case, run_dir: Path) -> tuple[modes.Mode, str]:
    """The mode asked for (--mode) and the model's program as that mode sees it: --program,
    else the local environment's build (native) or the image's (a container mode)."""
    if args.mode == "native" and args.program:
        if not Path(args.program).is_file():
            raise ClimstackError(
                f"--program {args.program}: no such file",
                fix=f"the path of the installed {case.argv[0]} (`spack find -p {case.package}`)",
            )
        launcher = launchers.get(args.launcher).argv(args.ranks)
        return modes.native(launcher, {}), args.program
    if args.program:
        raise ClimstackError(
            f"--program with --mode {args.mode}: a container mode runs the image's build",
            fix="leave --program out (or use --mode native)",
        )
    names = local.mode_names(args.mode)
    prefixes = installed(environments.resolve("local"))
    (mode,) = local.local_modes(
        names, args.ranks, args.runtime, args.image, args.fabric_prefix, prefixes, run_dir,
        model_only=args.model_only,
    )  # fmt: skip
    if mode.unavailable:
        raise ClimstackError(f"--mode {args.mode}: {mode.unavailable}")
    try:
        return mode, mode.locate(case)
    except LookupError as why:
        raise ClimstackError(
            f"--mode {args.mode}: {why}", fix=_locate_fix(args, case, why)
        ) from None


def _locate_fix(args, case, why: LookupError) -> str:
    """What to do when a mode lacks the case's program (modes.Mode.locate's LookupError)."""
    if args.mode == "native":
        return (
            f"install it with `climstack install local` (it builds {case.package}), or give "
            f"--program PREFIX/{case.argv[0]}"
        )
    if "verify refuses" in str(why):
        return (
            "`climstack verify PROGRAM --image IMAGE --plan PLAN` (a plan of `climstack bind "
            "local`) shows each problem; if the image's build is stale, rebuild it with "
            f"`climstack image {local.IMAGE} --force`"
        )
    return f"rebuild the image with `climstack image {local.IMAGE} --force`"


def register(commands) -> None:
    def run_case(args):
        case = cases.get(args.case)
        settings = cases.parse_settings(args.set)
        against = bitwise.require_run_directory(args.against) if args.against else None
        run_dir = Path(args.run_dir).resolve()
        mode, program = _mode_and_program(args, case, run_dir)
        result = cases.run(
            case, run_dir, program, lambda argv: mode.wrap(argv, cwd=str(run_dir)), settings,
            env=mode.env, timeout=args.timeout,
        )  # fmt: skip
        print(
            f"{case.name} ({mode.name}): main loop {result.main_loop_s:.3f} s, wall "
            f"{result.wall_s:.1f} s on {result.ranks} ranks; {len(result.digests)} outputs; "
            f"record {Path(result.run_dir) / cases.RECORD}"
        )
        if args.json:
            print(json.dumps(asdict(result), indent=2))
        if against:
            return compare(against, Path(result.run_dir))
        return 0

    def compare(a: Path, b: Path) -> int:
        """0 bit-identical, 1 differ (printed); bad input (2) and unreadable outputs (3)
        raise bitwise's ClimstackError and ToolFailure."""
        comparison = bitwise.compare(a, b)
        print(comparison.summary(), file=sys.stdout if comparison.identical else sys.stderr)
        return 0 if comparison.identical else 1

    sub = commands.add_parser(
        "run-case",
        help="run a model's case (cases/<name>) natively or in a container mode; main-loop "
        "time and output digests",
    )
    sub.add_argument("case", help="case name under cases/ (e.g. mom6-benchmark) or directory")
    sub.add_argument("run_dir", help="new (or empty) run directory")
    sub.add_argument(
        "--mode",
        default="native",
        choices=modes.MODES,
        help="native (default) or a container mode on `climstack image`'s image",
    )
    sub.add_argument(
        "--program",
        help="native only: the model's executable (default: the local environment's)",
    )
    sub.add_argument("--image", help="the image directory (default: `climstack image`'s)")
    sub.add_argument("--runtime", choices=runtimes.LOCAL, default="charliecloud")
    sub.add_argument(
        "--fabric-prefix", help="fabric mode: the host libfabric's prefix (default: the site's)"
    )
    sub.add_argument("--ranks", type=int, default=2, help="MPI ranks (default 2)")
    gate.add_option(sub)
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
        help="then compare with this run bit for bit (exit 1 if they differ, 3 if an output does "
        "not read); checked before the model runs",
    )
    sub.add_argument("--timeout", type=float, default=3600, help="seconds (default 3600)")
    sub.add_argument("--json", action="store_true", help="print the run's record as JSON")
    sub.set_defaults(run=run_case)

    cmp = commands.add_parser(
        "compare-runs",
        help="two runs of a case bit for bit: *.stats text, every NetCDF variable's data "
        "(exit 0 identical, 1 differ, 2 not a run directory, 3 an output missing or unreadable)",
    )
    cmp.add_argument("run_a")
    cmp.add_argument("run_b")
    cmp.set_defaults(run=lambda args: compare(Path(args.run_a), Path(args.run_b)))
