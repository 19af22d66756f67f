"""climstack: the command-line face of this project (`climstack --help`).

Each job lives in its own module, which adds its subcommands with `register(commands)`;
they are listed here in the order of the data flow: build, then run.
"""

import argparse
import importlib
import sys

from climstack.errors import ClimstackError

COMMAND_MODULES = (
    "climstack.config.drift",
    "climstack.build.environments",
    "climstack.build.smoke",
    "climstack.build.containers",
    "climstack.build.image",
    "climstack.build.sif",
    "climstack.build.buildcache_cli",
    "climstack.build.registry",
    "climstack.build.base_image",
    "climstack.build.source_mirror",
    "climstack.run.bind",
    "climstack.run.verify",
    "climstack.run.parity",
    "climstack.run.slurm",
    "climstack.run.container_smoke",
    "climstack.run.registry_smoke",
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
