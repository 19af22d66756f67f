"""`climstack bench local`: install the local environment, run the comparison in every mode
and write its report; `climstack bench SITE --emit`: the centre's job scripts;
`climstack bench report DIR...`: the report from raw outputs. Exit status (climstack.errors):
1 when anything was left out or a model run's outputs differ from native's, 2 for bad input,
3 when a tool or program failed: a run failed, or a model run could not be compared."""

import argparse
import shutil
import sys
import time
from pathlib import Path

from climstack import pins
from climstack.bench.abi import abi, abi_hosts
from climstack.bench.abi.command import run_abi
from climstack.bench.precise import profile
from climstack.bench.precise.command import run_precise
from climstack.bench.report import report
from climstack.bench.results import collect, records
from climstack.bench.run import catalogue, jobs, kept, reuse, runner, stripes
from climstack.bench.run.local import CCE_ENV, IMAGE, local_modes, mode_names, needs_cce
from climstack.bench.scale import command as scale_command
from climstack.bench.suite import command as suite_command
from climstack.check import gate
from climstack.cli import bench_workflow
from climstack.common import progress
from climstack.errors import FAILED, NEGATIVE, OK, ClimstackError
from climstack.image import image
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack.stack import environments
from climstack.stack.install import install


def write_report(found, out: Path, checks=()) -> list[Path]:
    recs, failures, problems = found
    for problem in problems:
        print(f"climstack bench: warning: {problem}", file=sys.stderr)
    paths = list(records.write(recs, failures, out, checks))
    return paths + report.write(recs, failures, problems, out, checks)


def checked_inputs(args) -> None:
    """The inputs of `bench local`/`--emit` that need no work to check, refused first."""
    if args.repeats < 1:
        raise ClimstackError(f"--repeats {args.repeats}: at least 1", fix="e.g. --repeats 3")
    if args.ranks is not None and args.ranks < 1:
        raise ClimstackError(f"--ranks {args.ranks}: at least 1", fix="e.g. --ranks 2")


def fresh_out(args) -> Path:
    """The report directory: a new one by default; a given one must be empty, unless
    --force (it is emptied: `empty_out`) or --resume (its runs kept, the rest run), where
    the command has it (those without set `resume=None`)."""
    out = Path(args.out or pins.cache_dir() / "bench" / time.strftime("local-%Y%m%d-%H%M%S"))
    if out.exists() and not out.is_dir():
        raise ClimstackError(f"--out {out}: not a directory", fix="name a new directory")
    if out.is_dir() and any(out.iterdir()) and not (args.force or args.resume):
        raise ClimstackError(
            f"--out {out} holds an earlier run's results, which would be reported as this "
            "run's",
            fix="name a new directory, or add --force (empty it first)"
            + (" or --resume (keep its runs, run the rest)" if args.resume is not None else ""),
        )
    return out


def run_local(args) -> int:
    precise = getattr(args, "precise", False)  # `bench SITE` has no --precise
    if args.repeats is None:
        args.repeats = profile.CAP if precise else 3
    if args.emit:
        return run_emit(args)
    if args.no_verify:
        raise ClimstackError(
            "--no-verify goes with --emit: a local run always verifies what it runs",
            fix="drop --no-verify (--model-only runs on a verdict the image's ld.so did not "
            "confirm)",
        )
    if precise and (args.reuse or args.modes or args.resume):
        raise ClimstackError(
            "--precise runs its own modes from the start and never reuses a report",
            fix="drop --reuse, --modes and --resume (or drop --precise)",
        )
    if getattr(args, "benchmarks", None) and not precise:
        raise ClimstackError("--benchmarks chooses among the precise profile's benchmarks",
                             fix="add --precise, or drop --benchmarks")  # fmt: skip
    if precise:
        profile.chosen(args.benchmarks)  # checked before anything runs
    checked_inputs(args)  # every input first: nothing is installed, run or removed before
    if args.image and not Path(args.image).is_dir():
        raise ClimstackError(
            f"--image {args.image}: no such image directory",
            fix=f"leave --image out (`climstack image {IMAGE}`'s, built if missing), or name "
            "an existing image directory",
        )
    if args.reuse and (args.out or args.force or args.resume):
        raise ClimstackError(
            "--reuse takes an earlier report from the cache: it goes with no --out, --force "
            "or --resume",
            fix="drop --reuse to measure into --out, or drop --out",
        )
    mode_names(args.modes)
    out = fresh_out(args)
    env_dir = environments.resolve("local")
    if not (env_dir / "spack.lock").is_file():
        raise ClimstackError(
            f"{env_dir} is not concretized", fix="`climstack concretize local` first"
        )
    measured = reuse.key(
        env_dir,
        IMAGE,
        args.image,
        args.repeats,
        args.ranks,
        args.modes,
        args.runtime,
        args.fabric_prefix,
        args.model_only,
    )
    if args.reuse and (found := reuse.earlier(measured)):
        earlier, status = found
        print(
            f"climstack bench: nothing it measures has changed since {earlier.name}: its "
            "report reused (`climstack bench local` measures again)"
        )
        print(f"climstack bench: report in {earlier}\n  {earlier / 'report.md'}")
        return status
    if args.force and out.is_dir():
        shutil.rmtree(out)
    if precise:
        return run_precise(args, out, env_dir, finish)
    prefixes = install(env_dir)
    names = mode_names(args.modes)
    cce = install(environments.resolve(CCE_ENV)) if needs_cce(names) else {}
    chosen = local_modes(
        names, args.ranks, args.runtime, args.image, args.fabric_prefix, prefixes,
        runner.work_root(out), cce, model_only=args.model_only,
    )  # fmt: skip
    with progress.step(f"running the benchmarks, {args.repeats} repeats, into {out}"):
        runner.run_all(
            list(runner.LOCAL), chosen, out, args.repeats, args.ranks, resume=args.resume
        )
    status = finish(out, [out / "raw"])
    reuse.keep(out, measured, status)
    kept.prune(out)
    return status


def finish(out: Path, paths: list[Path], labels=None) -> int:
    """The report of the outputs under `paths` into `out`; exit status 3 if a run failed or
    a model run could not be compared, else 1 if a model run's outputs differ from native's
    or anything was left out, else 0. Each is named on stderr."""
    found = collect.read_paths(paths, labels)
    checks = collect.read_checks(paths)
    written = write_report(found, out, checks)
    print(f"climstack bench: report in {out}")
    for path in written:
        print(f"  {path}")
    if found[2]:
        files = len({p.path for p in found[2]})
        print(
            f"climstack bench: {len(found[2])} problem(s) in {files} file(s): left out, listed "
            f"under 'Left out' in {out / 'report.md'}",
            file=sys.stderr,
        )
    for f in found[1]:
        print(
            f"climstack bench: {f.benchmark} {f.mode} repeat {f.repeat or '?'} ({f.site}, host "
            f"{f.host}, job {f.job}) failed: {f.reason}",
            file=sys.stderr,
        )
    bad = [c for c in checks if c.verdict != records.IDENTICAL]
    for c in bad:
        print(
            f"climstack bench: {c.benchmark} {c.mode} repeat {c.repeat} ({c.site}, job "
            f"{c.job}): {'NOT bit-identical' if c.verdict == records.DIFFERS else 'not compared'}"
            f" to native: {c.detail}",
            file=sys.stderr,
        )
    if found[1] or any(c.verdict != records.DIFFERS for c in bad):
        return FAILED
    return NEGATIVE if found[2] or bad else OK


def run_emit(args) -> None:
    """`bench SITE --emit DIR`: the comparisons' job scripts, to run at the centre."""
    checked_inputs(args)
    out = Path(args.emit)
    image_path = args.image or image.default_destination(IMAGE)
    only = tuple(mode_names(args.modes, jobs.EMIT_MODES, "--emit --modes"))
    site = sites.get(args.site)  # resolved once: every layer below takes the Site
    paths = jobs.emit(site, out, str(image_path), args.repeats, args.ranks, args.root, only=only,
                      verify=not args.no_verify, model_only=args.model_only)  # fmt: skip
    print(f"climstack bench: {len(paths)} job scripts in {out} (plans in {out / 'plans'}):")
    for path in paths:
        print(f"  sbatch {path}")
    lustre = site.lustre
    if lustre:
        settings = len(stripes.stripe_settings(lustre))
        study = len(stripes.STUDY_SWEEP)
        print(
            f"climstack bench: benchio.sh sweeps {settings} Lustre stripe settings (lustre: in "
            f"the site's site.yaml), io-layers-*.sh the I/O study's {study}: submit them from "
            f"a directory on {lustre['path']}, with the time their comment lines count "
            "(sbatch --time=...)"
        )
    else:
        print(f"climstack bench: benchio.sh: no Lustre at {args.site}, no stripe sweep")
    print("then: climstack bench report DIR_OF_THEIR_OUT_FILES")


def run_report(args) -> int:
    """The report; its exit status `finish`'s (3: a run failed; 1: something left out, or
    a model run differs from native's; else 0)."""
    out = Path(args.out) if args.out else Path(args.paths[0]) / "report"
    labels = collect.parse_labels(args.label)
    return finish(out, [Path(p) for p in args.paths], labels)


#: --emit's way around the gate, said when taken
NO_VERIFY = "with --emit: write the scripts without verifying the image's programs (not here)"


def register(commands) -> None:
    sub = commands.add_parser("bench", help="run the benchmarks and report the comparison")
    actions = sub.add_subparsers(dest="action", required=True)
    local = actions.add_parser("local", help="install the local environment, run, report")
    local.add_argument(
        "--repeats",
        type=int,
        help=f"runs per mode (default 3); with --precise, the cap (default {profile.CAP})",
    )
    local.add_argument(
        "--precise",
        action="store_true",
        help="the precise profile (make bench): pinned, warmed up, repeated until conclusive, "
        "with a known 5%% slowdown and an A/A control",
    )
    local.add_argument(
        "--benchmarks",
        help="with --precise, comma-separated, from "
        f"{','.join(b.name for b in profile.BENCHMARKS)} (default: all)",
    )
    local.add_argument("--ranks", type=int, default=2)
    local.add_argument("--out", help="report directory (default: a new one in the cache)")
    again = local.add_mutually_exclusive_group()
    again.add_argument("--force", action="store_true", help="empty a non-empty --out first")
    again.add_argument(
        "--resume", action="store_true", help="keep the runs in --out, run the rest"
    )
    local.add_argument(
        "--reuse",
        action="store_true",
        help="print the newest report of the same image, native build, host MPI, harness and "
        "arguments instead of measuring again (what a warm `make local` does)",
    )
    local.add_argument(
        "--modes",
        help=f"comma-separated, from {','.join(catalogue.names(local=True))} (default: all); "
        f"with --emit, from {','.join(jobs.EMIT_MODES)}",
    )
    local.add_argument("--runtime", choices=runtimes.LOCAL, default="charliecloud")
    local.add_argument("--image", type=Path, help=f"image directory of {IMAGE}")
    local.add_argument(
        "--fabric-prefix",
        help="the host libfabric's prefix for the fabric mode (default: the site's external)",
    )
    local.add_argument(
        "--emit", metavar="DIR", help="instead, write the comparisons' Slurm job scripts"
    )
    local.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    gate.add_option(local)
    local.add_argument("--no-verify", action="store_true", help=NO_VERIFY)
    local.set_defaults(run=run_local, site="local")
    centres = [s for s in sites.known_sites() if (sites.SITES_DIR / s / sites.SITE_FILE).is_file()]
    for site in sorted(set(centres) - {"local"}):
        centre = actions.add_parser(
            site, help=f"write the Slurm job scripts of the comparisons for {site}"
        )
        centre.add_argument("--emit", metavar="DIR", required=True, help="where to write them")
        centre.add_argument("--image", type=Path, help="the image (.sif) the jobs run")
        centre.add_argument("--repeats", type=int, default=5, help="runs per mode (default 5)")
        centre.add_argument(
            "--modes", help=f"comma-separated, from {','.join(jobs.EMIT_MODES)} (default: all)"
        )
        centre.add_argument("--ranks", type=int, help="ranks of every run, on one node")
        centre.add_argument(
            "--root", type=Path, default=Path("/"), help="host root to discover the MPI under"
        )
        gate.add_option(centre)
        centre.add_argument("--no-verify", action="store_true", help=NO_VERIFY)
        centre.set_defaults(run=run_emit, site=site)
    mpi5 = actions.add_parser(
        "abi",
        help="the MPI-5 standard ABI image on MPICH 5, Intel MPI and Open MPI 6 (bind mode), "
        "beside each MPI's native build",
    )
    mpi5.add_argument("--repeats", type=int, default=3, help="runs per cell (default 3)")
    mpi5.add_argument(
        "--benchmarks",
        help=f"comma-separated, from {','.join(abi.OSU)} (default: " f"{','.join(abi.SMALL)})",
    )
    mpi5.add_argument("--hosts", help=f"comma-separated, from {','.join(abi_hosts.MODEL_HOSTS)}")
    mpi5.add_argument("--image", type=Path, help="the image directory of container-mpi-abi")
    mpi5.add_argument(
        "--prepare", action="store_true", help="build the image and the hosts' files, run nothing"
    )
    mpi5.add_argument("--out", help="report directory (default: a new one in the cache)")
    mpi5.add_argument("--force", action="store_true", help="empty a non-empty --out first")
    mpi5.add_argument(
        "--report", metavar="ABI_JSON", help="print the tables of a run's abi.json, run nothing"
    )
    mpi5.set_defaults(run=lambda args: run_abi(args, fresh_out), resume=None)
    suite_command.add_parser(actions, fresh_out)
    scale_command.add_parser(actions, fresh_out)
    rep = actions.add_parser("report", help="tables and plots from raw outputs")
    rep.add_argument("paths", nargs="+", help="output files or directories (Slurm .out)")
    rep.add_argument("--out", help="report directory (default: FIRST_PATH/report)")
    rep.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="FILE=MODE",
        help="the mode of an output without a header line (FILE: its name, path or a glob); "
        "repeatable. A sidecar FILE.yaml (mode: native, benchmark: osu, ranks: 128) does too",
    )
    rep.set_defaults(run=run_report)
    bench_workflow.add_parser(actions)
