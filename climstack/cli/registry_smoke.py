"""`climstack dev registry-smoke`: the registry leg of `make local`
(climstack.check.registry_smoke)."""

from climstack.check import container_smoke
from climstack.check.registry_smoke import run


def register(commands) -> None:
    sub = commands.add_parser(
        "registry-smoke",
        help="push an environment's installed specs as images to a loopback OCI registry, "
        "list it, and run mpi-probe's image in bind mode",
    )
    sub.add_argument("environment", nargs="?", default="local")
    sub.add_argument("--runtime", choices=container_smoke.RUNTIMES, default="charliecloud")
    sub.set_defaults(run=lambda args: run(args.environment, args.runtime))
