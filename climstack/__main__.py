"""climstack: the command-line face of this project (`bin/climstack --help`)."""

import argparse
import sys

from climstack import environments, smoke
from climstack.errors import ClimstackError


def _check(args) -> None:
    for name in args.environments or environments.find_environments():
        env_dir = environments.resolve(name)
        print(f"{name}: ok (site {environments.check(env_dir)})")


def _concretize(args) -> None:
    for name in args.environments or environments.find_environments():
        seconds = environments.concretize(environments.resolve(name))
        print(f"{name}: concretized --fresh in {seconds:.1f} s")


def _smoke(args) -> None:
    env_dir = environments.resolve(args.environment)
    print(smoke.run_probe(smoke.install(env_dir)), end="")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="climstack", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="check environments' site and config scopes")
    check.add_argument("environments", nargs="*", help="names or directories (default: all)")
    check.set_defaults(run=_check)

    concretize = commands.add_parser("concretize", help="concretize environments --fresh")
    concretize.add_argument("environments", nargs="*", help="names or directories (default: all)")
    concretize.set_defaults(run=_concretize)

    smoke_cmd = commands.add_parser("smoke", help="install xpmem-stub + mpi-probe, run 2 ranks")
    smoke_cmd.add_argument("environment", nargs="?", default="local")
    smoke_cmd.set_defaults(run=_smoke)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        args.run(args)
    except ClimstackError as err:
        print(f"climstack {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
