"""`climstack modules`: publish an installed environment as an Lmod tree (Spack's `spack
module lmod refresh` with the site's module scope, climstack.stack.modules)."""

from pathlib import Path

from climstack.stack import modules


def register(commands) -> None:
    def run(args):
        core = modules.refresh(args.environment, Path(args.root).resolve() if args.root else None)
        print(f"climstack modules: the Lmod tree of {args.environment} is written")
        print(f"  module use {core}")
        print("  module avail; module load <mpi> <package>   # the MPI first: it opens its tree")

    sub = commands.add_parser(
        "modules",
        help="write the installed environment's Lmod modules (Core/MPI hierarchy) where the "
        "site's module scope says, or under --root",
    )
    sub.add_argument("environment", nargs="?", default="local")
    sub.add_argument("--root", help="the tree's root (default: the site's modules.yaml)")
    sub.set_defaults(run=run)
