"""`climstack image`: build the image directory of a container environment on this machine
(climstack.image.image)."""

import time
from pathlib import Path

from climstack.common import process
from climstack.image.image import build, default_destination


def register(commands) -> None:
    def run(args):
        destination = args.destination or default_destination(args.environment)
        start = time.monotonic()
        build(args.environment, destination, force=args.force)
        size = process.run(["du", "-sm", destination], "du").stdout.split()[0]
        print(f"{destination}: ready in {time.monotonic() - start:.0f} s, {size} MB")

    sub = commands.add_parser(
        "image",
        help="build a Charliecloud image directory equivalent "
        "to a container recipe's final stage (this machine's stand-in)",
    )
    sub.add_argument("environment", nargs="?", default="container-archer2")
    sub.add_argument("destination", nargs="?", type=Path, help="default: user cache/images/ENV")
    sub.add_argument("--force", action="store_true", help="rebuild even if inputs are unchanged")
    sub.set_defaults(run=run)
