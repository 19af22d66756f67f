"""climstack: the command-line face of this project (`bin/climstack --help`).

Each job lives in its own module, which adds its subcommands with `register(commands)`.
"""

import argparse
import importlib
import sys

from climstack.errors import ClimstackError

#: modules that contribute subcommands, in the order of the data flow
COMMAND_MODULES = (
    "climstack.environments",
    "climstack.smoke",
    "climstack.containers",
    "climstack.image",
    "climstack.bind",
    "climstack.verify",
    "climstack.slurm",
    "climstack.buildcache",
    "climstack.source_mirror",
)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="climstack", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(commands)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except ClimstackError as err:
        print(f"climstack {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
