"""`climstack containerize`, `climstack check-mpi`: the container environments' Apptainer
recipes, and the MPI ABI guard (climstack.stack.containers)."""

from climstack.errors import ClimstackError
from climstack.stack import environments
from climstack.stack.containers import (
    abi,
    check_mpi,
    container_environments,
    site_cray_mpich,
    target_site,
    write_recipes,
)


def register(commands) -> None:
    def run_containerize(args):
        names = args.environments or container_environments()
        drifted = write_recipes(names, args.check)
        if drifted:
            raise ClimstackError(
                "recipes differ from `spack containerize`:\n" + "\n".join(drifted),
                fix="run `bin/climstack containerize` and commit the result",
            )

    def run_check_mpi(args):
        for name in args.environments or container_environments():
            env_dir = environments.resolve(name)
            standard = abi(env_dir) == "standard"
            standard or target_site(env_dir)  # a container environment, before the slow part
            environments.concretize(env_dir)
            mpich = check_mpi(env_dir)
            by = (
                "any MPI-5 ABI library (libmpi_abi.so.1)"
                if standard
                else f"cray-mpich {site_cray_mpich(target_site(env_dir))}"
            )
            print(f"{name}: mpich@{mpich['version']} can be replaced by {by}")

    sub = commands.add_parser("containerize", help="emit containers/<site>/app.def recipes")
    sub.add_argument("environments", nargs="*", help="container environments (default: all)")
    sub.add_argument("--check", action="store_true", help="only report drift from the files")
    sub.set_defaults(run=run_containerize)

    sub = commands.add_parser(
        "check-mpi",
        help="concretize container environments and check "
        "their MPICH against the target site's Cray MPICH base",
    )
    sub.add_argument("environments", nargs="*", help="container environments (default: all)")
    sub.set_defaults(run=run_check_mpi)
