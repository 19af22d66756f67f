"""`climstack sif`: the SIF of an image directory, built by Apptainer (climstack.image.sif)."""

import time
from pathlib import Path

from climstack.image.sif import build, default_destination


def register(commands) -> None:
    def run(args):
        destination = args.destination or default_destination(args.environment)
        start = time.monotonic()
        build(args.environment, destination, args.image)
        size = destination.stat().st_size / 2**20
        print(f"{destination}: ready in {time.monotonic() - start:.0f} s, {size:.0f} MB")

    sub = commands.add_parser(
        "sif",
        help="build a SIF with Apptainer from the image directory "
        "of `climstack image` and the recipe's final stage",
    )
    sub.add_argument("environment", nargs="?", default="container-archer2")
    sub.add_argument(
        "destination", nargs="?", type=Path, help="default: user cache/images/ENV.sif"
    )
    sub.add_argument("--image", type=Path, help="image directory (default: climstack image's)")
    sub.set_defaults(run=run)
