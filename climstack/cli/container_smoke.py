"""`climstack dev container-smoke`: mpi-probe on 2 ranks in the image under each runtime, the
host MPI bound in (climstack.check.container_smoke)."""

from pathlib import Path

from climstack.check.container_smoke import RUNTIMES, run, run_pulled, summary
from climstack.errors import ClimstackError


def register(commands) -> None:
    def run_all(args):
        if args.ranks < 2:
            raise ClimstackError(
                f"--ranks {args.ranks}: the smoke needs 2 ranks or more (ping-pong)",
                fix="--ranks 2 (the default)",
            )
        for runtime in args.runtime or RUNTIMES:
            if args.pull:
                output = run_pulled(args.pull, runtime, args.ranks)
            else:
                output = run(args.environment, runtime, args.ranks, args.image)
            print(summary(runtime, output))

    sub = commands.add_parser(
        "container-smoke",
        help="run mpi-probe in a container image on 2 ranks, bind mode, "
        "under Charliecloud (image directory), Apptainer (SIF) and podman (the plan as a CDI "
        "spec)",
    )
    sub.add_argument("environment", nargs="?", default="container-archer2")
    sub.add_argument("--runtime", action="append", choices=RUNTIMES, help="default: each")
    sub.add_argument("--ranks", type=int, default=2)
    sub.add_argument("--image", type=Path, help="image directory (default: climstack image's)")
    sub.add_argument(
        "--pull",
        metavar="REFERENCE",
        help="instead, pull this image of mpi-probe from a registry with each runtime "
        "(HOST/REPOSITORY:mpi-probe-VERSION-HASH.spack, from `buildcache push --base-image`)",
    )
    sub.set_defaults(run=run_all)
