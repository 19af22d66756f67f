"""`climstack slurm`: Slurm job scripts that run a container in bind, hybrid or fabric mode,
the image verified before a script is written (climstack.jobs.slurm)."""

from pathlib import Path

from climstack.bind import families
from climstack.bind.plan import Plan
from climstack.check import gate, parity
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.jobs.slurm import Component, script


def require_families(plan: Plan, wanted: dict) -> None:
    """`--with`: the job needs these host families, so the plan must bind them."""
    lacking = sorted(set(wanted) - set(plan.families))
    if lacking:
        raise ClimstackError(
            f"the plan {plan.directory or '-'} binds no host {', '.join(lacking)} "
            f"(it binds: {', '.join(['mpi', *plan.families])})",
            fix=f"write the plan with `climstack bind {Path(plan.site).name} --with "
            f"{','.join(lacking)} --out DIR`, then pass --plan DIR",
        )


def preflight(
    plan: Plan, image: Path, components: list[Component], model_only: bool = False
) -> list:
    """In bind mode, every component's executable must load the host MPI and the host's
    families, and the image's own ld.so (under the plan's runtime) must confirm its link
    map, unless `model_only` accepts climstack's model alone. A SIF is read unpacked. Their
    reports (none in another mode)."""
    if plan.mode != "bind":
        return []
    if not image.exists():
        raise ClimstackError(
            f"--image {image} does not exist",
            fix="give the image directory or .sif the job runs (or --no-verify to write the "
            "script without checking it)",
        )
    return gate.require(
        plan,
        image,
        [component.command[0] for component in components],
        model_only,
        "slurm",
        fix="rebuild it (RUNPATH, an MPICH no newer than the host's base); --model-only to "
        "accept a verdict the image's ld.so did not confirm, or --no-verify to write the "
        "script anyway",
    )


def site_of(plan: Plan, asked: str | None, where: Path) -> sites.Site:
    """The site the plan was made for; a site given as well must be the same one."""
    site = sites.get(plan.site)
    if asked is not None and sites.get(asked).reference != site.reference:
        raise ClimstackError(
            f"the plan {where} was made for site {plan.site}, not {asked}",
            fix=f"drop the site argument (the plan's is used), or write a plan for {asked} "
            f"with `climstack bind {asked} --out DIR`",
        )
    return site


def register(commands) -> None:
    def run(args):
        plan = Plan.load(args.plan)
        if args.component and args.program:
            raise ClimstackError(
                "--component and --command both given: a job runs either one command or "
                "heterogeneous components",
                fix="--command PROG ARGS for one component, or repeat --component "
                "'NODESxTASKS PROG ARGS' and put each command in it",
            )
        components = [Component.parse(c) for c in args.component] or [
            Component(args.nodes, args.ntasks, args.program)
        ]
        if not components[0].command:
            raise ClimstackError(
                "no command to run",
                fix="--command PROG ARGS (last), or "
                "--component 'NODESxTASKS PROG ARGS' per het component",
            )
        require_families(plan, families.parse_with(args.with_families))
        reports = (
            [] if args.no_verify else preflight(plan, args.image, components, args.model_only)
        )
        text = script(
            site_of(plan, args.site, args.plan),  # resolved once, here
            plan,
            str(args.image),
            components,
            args.job_name,
            args.export,
            args.sbatch,
            args.parity,
            args.parity_probe,
            # a node's ranks share one container only where each program starts MPI itself
            share=all(report.starts_mpi for report in reports),
        )
        if args.output:
            args.output.write_text(text)
            args.output.chmod(0o755)
            print(f"wrote {args.output}")
        else:
            print(text, end="")

    sub = commands.add_parser(
        "slurm",
        help="write a Slurm job script running the container "
        "under a bind plan, with heterogeneous steps for coupled models",
    )
    sub.add_argument(
        "site",
        nargs="?",
        help="site scope (archer2, gaea-c6, local) or its path; default: the plan's own",
    )
    sub.add_argument("--plan", type=Path, required=True, help="plan dir from `climstack bind`")
    sub.add_argument("--image", type=Path, required=True, help=".sif or image directory")
    sub.add_argument("--nodes", type=int, default=1)
    sub.add_argument("--ntasks", type=int, default=1)
    sub.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="'NxT CMD'",
        help="one heterogeneous component: nodes x tasks and its command",
    )
    sub.add_argument("--job-name", default="climstack")
    sub.add_argument("--export", default="ALL", help="sbatch --export (NONE hangs hetjobs)")
    sub.add_argument(
        "--sbatch",
        action="append",
        default=[],
        metavar="OPTION",
        help="extra #SBATCH option, e.g. --account=n02",
    )
    sub.add_argument("--no-verify", action="store_true", help="skip the bind-mode preflight")
    gate.add_option(sub)
    sub.add_argument(
        "--with",
        dest="with_families",
        action="append",
        metavar="FAMILY,...",
        help="host library families the job needs bound (the plan must bind them)",
    )
    sub.add_argument(
        "--parity",
        metavar="NATIVE_PROBE",
        help="run `climstack parity` on the first node before the job, with this host build "
        "of mpi-probe (the job fails if the container loses a network provider)",
    )
    sub.add_argument(
        "--parity-probe", default=parity.DEFAULT_PROBE, help="mpi-probe inside the image"
    )
    sub.add_argument("--output", type=Path, help="write the script here (default: stdout)")
    sub.add_argument(
        "--command",
        dest="program",
        nargs="+",
        default=[],
        help="(last) the command of a single-component job",
    )
    sub.set_defaults(run=run)
