"""`climstack bind`: discover the host MPI and its library closure (run.discover,
run.loader), make the bind plan (run.plan), write it, and render it for a runtime
(run.runtimes) or run a command under it."""

import argparse
import os
import shlex
import sys
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.run import loader, plan, runtimes


def register(commands) -> None:
    def run(args):
        view = loader.View(args.root)
        made = plan.make_plan(
            args.site, args.mode, view, args.prefix, args.fabric_prefix, runtime=args.runtime
        )
        made = plan.write(made, args.out or plan.default_directory(made))
        for absent in made.absent:
            print(
                f"climstack bind: warning: site extra absent on this host: {absent}",
                file=sys.stderr,
            )
        if args.prepare_image:
            points = plan.prepare_image(made, args.prepare_image)
            print(f"# created {len(points)} mount points in {args.prepare_image}", file=sys.stderr)
        if args.format == "json":
            print(made.to_json())
        elif args.format == "env":
            print(runtimes.get("apptainer").exports(made), end="")
        else:
            if not args.image:
                raise ClimstackError(
                    f"--format {args.format} needs --image",
                    fix="pass --image IMAGE (a .sif or an image directory)",
                )
            runtime = runtimes.get(made.runtime)
            argv = runtime.exec_args(made, str(args.image), args.program or ["true"])
            if args.format == "args":
                print(shlex.join(argv))
            else:
                runtime.check_image(made, args.image)
                os.environ["USER"] = os.environ.get("USER") or "root"  # ch-run needs it
                os.execvp(argv[0], argv)

    sub = commands.add_parser(
        "bind",
        help="discover the host MPI and its closure; write and "
        "render a bind plan for Apptainer or Charliecloud",
    )
    sub.add_argument("site", help="site scope (archer2, gaea, local) or its path")
    sub.add_argument("--mode", choices=plan.MODES, default="bind")
    sub.add_argument("--prefix", help="host MPI prefix (default: module env, then site scope)")
    sub.add_argument("--fabric-prefix", help="host libfabric prefix (fabric mode)")
    sub.add_argument("--runtime", choices=runtimes.NAMES, help="default: the site's bind.yaml")
    sub.add_argument(
        "--root",
        type=Path,
        default=Path("/"),
        help="host root to discover under (a copy of a host tree)",
    )
    sub.add_argument(
        "--out",
        type=Path,
        help="plan directory (default: user cache/bind/...); "
        "on a Cray, somewhere compute nodes see, e.g. under /work",
    )
    sub.add_argument("--format", choices=("env", "json", "args", "exec"), default="env")
    sub.add_argument("--image", type=Path, help="image (.sif or directory) for args/exec")
    sub.add_argument(
        "--prepare-image",
        type=Path,
        metavar="IMAGE_DIR",
        help="create the mount points in a Charliecloud image directory",
    )
    sub.add_argument(
        "--command",
        dest="program",
        nargs=argparse.REMAINDER,
        default=[],
        help="(last) the command to run in the image, with its arguments",
    )
    sub.set_defaults(run=run)
