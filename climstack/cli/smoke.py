"""`climstack dev smoke`: install the stack's probes natively and run them on 2 ranks
(climstack.check.smoke)."""

from climstack.check.smoke import install, run_probe
from climstack.errors import ClimstackError
from climstack.stack import environments


def register(commands) -> None:
    def run(args):
        if args.ranks < 1:
            raise ClimstackError(
                f"--ranks {args.ranks}: mpi-probe needs at least 1 rank",
                fix="--ranks 2 (the default) exercises point-to-point",
            )
        env_dir = environments.resolve(args.environment)
        environments.check(env_dir)  # site and scopes, before Spack installs anything
        print(run_probe(install(env_dir), ranks=args.ranks), end="")

    sub = commands.add_parser(
        "smoke",
        help="install the stack's probes (xpmem-stub, " "mpi-probe) and run mpi-probe on 2 ranks",
    )
    sub.add_argument("environment", nargs="?", default="local")
    sub.add_argument("--ranks", type=int, default=2)
    sub.set_defaults(run=run)
