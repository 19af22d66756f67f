"""climstack: the command-line face of this project (`climstack --help`).

Each command lives in its own module of climstack/cli/, which adds its subcommands with
`register(commands)`; they are listed here in the order of the data flow.
"""

import argparse
import importlib
import sys

from climstack.errors import ClimstackError

COMMAND_MODULES = (
    "climstack.cli.drift",
    "climstack.cli.environments",
    "climstack.cli.smoke",
    "climstack.cli.install",
    "climstack.cli.containers",
    "climstack.cli.image",
    "climstack.cli.sif",
    "climstack.cli.buildcache",
    "climstack.cli.registry",
    "climstack.cli.base_image",
    "climstack.cli.source_mirror",
    "climstack.cli.bind",
    "climstack.cli.verify",
    "climstack.cli.parity",
    "climstack.cli.slurm",
    "climstack.cli.container_smoke",
    "climstack.cli.registry_smoke",
    "climstack.cli.bench",
    "climstack.cli.run_case",
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
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
