"""climstack: the command-line face of this project (`climstack --help`).

Each job lives in its own module, which adds its subcommands with `register(commands)`;
they are listed here in the order of the data flow: build, then run.
"""

import argparse
import importlib
import sys

from climstack.errors import ClimstackError

COMMAND_MODULES = (
    "climstack.cli.drift",
    "climstack.stack.environments",
    "climstack.check.smoke",
    "climstack.stack.containers",
    "climstack.image.image",
    "climstack.image.sif",
    "climstack.stack.buildcache_cli",
    "climstack.stack.registry",
    "climstack.image.base_image",
    "climstack.stack.source_mirror",
    "climstack.cli.bind",
    "climstack.check.verify",
    "climstack.check.parity",
    "climstack.jobs.slurm",
    "climstack.check.container_smoke",
    "climstack.check.registry_smoke",
    "climstack.bench.cli",
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
