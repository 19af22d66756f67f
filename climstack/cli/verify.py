"""`climstack verify`: will an executable (on the host or in an image) run on the host MPI
under a bind plan? (climstack.check.verify)."""

import json
import shlex
import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

from climstack.bind import cdi
from climstack.bind.plan import Plan
from climstack.check import gate
from climstack.check.verdict import render
from climstack.check.verify import check, left_to_runtime, loaded_mismatch, parse_probe
from climstack.check.verify import run_probe
from climstack.errors import NEGATIVE, OK, UNCONFIRMED, ClimstackError
from climstack.launch import sif_image


def exit_status(report) -> int:
    """0 only for an ok the image's own ld.so confirmed; 4 for the model's ok alone."""
    if not report.passed:
        return NEGATIVE
    return OK if report.confirmed else UNCONFIRMED


def register(commands) -> None:
    def run(args):
        plan = Plan.load(args.plan) if args.plan else None
        if args.image and not args.image.exists():
            raise ClimstackError(
                f"--image {args.image} does not exist", fix="give the image directory or .sif"
            )
        if args.run_probe and not (plan and args.image):
            raise ClimstackError(
                "--run needs --plan and --image", fix="give both, or leave out --run"
            )
        if args.cdi and not plan:
            raise ClimstackError("--cdi needs --plan", fix="give the plan the spec was made of")
        # what a runtime applying the spec would run, as the reference cdi resolves it (a
        # refused one: the plan, for the report); under podman the oracle runs that spec
        refused, checked = cdi.judge(plan, args.cdi) if args.cdi else ([], plan)
        # a spec refused: nothing runs, not even the image's ld.so
        oracle = args.image if args.image and not (args.no_oracle or refused) else None
        with sif_image.files(args.image) if args.image else nullcontext() as tree:
            report = check(args.executable, checked, tree, runtime_image=oracle, ask=not refused)
            if args.image and (args.no_oracle or refused):
                report.oracle = (
                    f"not asked: {'--no-oracle' if args.no_oracle else 'the spec was refused'}"
                )
        report.problems[:0] = refused  # the spec's first: nothing runs under a spec refused
        found = {**asdict(report), "verdict": report.verdict, "confirmed": report.confirmed}
        print(json.dumps(found, indent=2) if args.json else render(report))
        status = exit_status(report)
        if refused or left_to_runtime(plan) or status == NEGATIVE:
            if args.run_probe:  # nothing runs under a plan refused
                print("run: not started: the plan is refused for it")
            return NEGATIVE
        if args.run_probe:
            if why := report.refusal(args.model_only):  # the one gate (check.verdict)
                print(f"run: not started: {why}")
                return status
            if not report.confirmed:
                print("run: --model-only: started on the model's ok alone")
            proc = run_probe(checked, args.image, args.executable, shlex.split(args.launcher))
            probe = parse_probe(proc.stdout)
            print(
                f"run: exit {proc.returncode}; library: {probe.get('library', '?')}; "
                f"loaded: {probe.get('loaded', '?')}"
            )
            if proc.returncode:
                print(proc.stderr.strip()[-2000:], file=sys.stderr)
                return NEGATIVE
            if mismatch := loaded_mismatch(checked, probe):
                print(f"run: REFUSED: {mismatch}")
                return NEGATIVE
        return status

    sub = commands.add_parser(
        "verify",
        help="check an executable against the host MPI under "
        "a bind plan: loader picks, MPICH bases, symbol by symbol",
    )
    sub.add_argument("executable", help="path on the host, or inside --image")
    sub.add_argument("--image", type=Path, help="image (directory or .sif) the executable is in")
    sub.add_argument("--plan", type=Path, help="plan directory written by `climstack bind`")
    sub.add_argument(
        "--cdi",
        type=Path,
        metavar="SPEC",
        help="a CDI spec (file or spec directory) that is to carry the plan: what the reference "
        "cdi applies for the plan's device (top-level edits too) is compared with the plan, "
        "before anything runs; hooks, writable mounts, other variables and preloads are refused",
    )
    sub.add_argument("--json", action="store_true")
    sub.add_argument(
        "--run",
        dest="run_probe",
        action="store_true",
        help="then run it (mpi-probe) under the plan, only if the verdict is ok and the "
        "image's ld.so confirmed it",
    )
    gate.add_option(sub, "with --run: ")
    sub.add_argument(
        "--no-oracle",
        action="store_true",
        help="do not ask the image's own ld.so (run under the plan's runtime) to confirm "
        "the link map: the verdict is then `ok by the model alone` (exit 4) at best",
    )
    sub.add_argument(
        "--launcher",
        default="",
        help="host launcher for --run, e.g. " "'mpiexec -n 2' or 'srun -n 2 --mpi=pmi2'",
    )
    sub.set_defaults(run=run)
