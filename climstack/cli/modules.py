"""`climstack modules`: publish an installed environment as an Lmod tree (Spack's `spack
module lmod refresh` with the site's module scope, climstack.stack.modules), or, with
--image and --plan, an image as a module whose commands run in it under the plan
(climstack.image.image_module)."""

from pathlib import Path

from climstack.check import gate
from climstack.errors import ClimstackError
from climstack.stack import environments, modules

#: where an image's modules go under the site's tree
CONTAINERS = "containers"


def native(args) -> None:
    core = modules.refresh(args.environment, Path(args.root).resolve() if args.root else None)
    print(f"climstack modules: the Lmod tree of {args.environment} is written")
    print(f"  module use {core}")
    print("  module avail; module load <mpi> <package>   # the MPI first: it opens its tree")


def of_image(args) -> None:
    from climstack.bind.plan import Plan
    from climstack.image import image_module

    if not args.plan:
        raise ClimstackError("--image needs --plan", fix="give the plan `climstack bind` wrote")
    plan = Plan.load(Path(args.plan))
    site = environments.site_of(environments.resolve(args.environment))
    if Path(plan.site).name != site:
        raise ClimstackError(
            f"plan {args.plan} is of site {plan.site}, the module of {args.environment} "
            f"(site {site})",
            fix=f"write the plan for {site} (`climstack bind {site} --out DIR`) or name that "
            "site's environment",
        )
    root = Path(args.root).resolve() if args.root else modules.site_root(args.environment)
    if not args.root:
        root = root / CONTAINERS
    modules.writable(root)
    image = Path(args.image).resolve()
    name = args.name or image.name.removesuffix(".sif")
    written, mpi, serial = image_module.write(
        plan, image, root, name, args.version, gate=published(plan, image, args.model_only)
    )
    print(
        f"climstack modules: {len(mpi)} MPI programs verified under the plan, {len(serial)} "
        "serial programs and scripts (no MPI library in their closure)"
    )
    print(f"climstack modules: {written}")
    print(f"  module use {root}")
    print(f"  module load {name}/{args.version}")


def published(plan, image: Path, model_only: bool):
    """The gate an image module passes before it is written: every MPI program of the view
    verified under the plan (check.gate), in bind mode."""
    from climstack.image import image_module

    def check(programs: list[str], tree: Path) -> None:
        if plan.mode != "bind":
            return
        fix = (
            "rebuild the image (RUNPATH, an MPICH no newer than the host's base), write the "
            "plan again (`climstack bind`), or --model-only to accept a verdict the image's "
            "ld.so did not confirm"
        )
        paths = [f"{image_module.BIN}/{program}" for program in programs]
        gate.require(plan, image, paths, model_only, "modules", fix=fix, tree=tree)

    return check


def register(commands) -> None:
    def run(args):
        (of_image if args.image else native)(args)

    sub = commands.add_parser(
        "modules",
        help="write the installed environment's Lmod modules (Core/MPI hierarchy) where the "
        "site's module scope says, or under --root; with --image and --plan, the image as a "
        "module whose commands run in it under the plan",
    )
    sub.add_argument("environment", nargs="?", default="local")
    sub.add_argument("--root", help="the tree's root (default: the site's modules.yaml)")
    sub.add_argument("--image", help="an image directory: publish it as a module instead")
    sub.add_argument("--plan", help="with --image: the bind plan its commands run under")
    sub.add_argument("--name", help="with --image: the module's name (default: the image's)")
    sub.add_argument("--version", default="latest", help="with --image: its version")
    gate.add_option(sub, "with --image: ")
    sub.set_defaults(run=run)
