"""climstack: the command-line face of this project (`climstack --help`).

Each command lives in its own module of climstack/cli/, which adds its subcommands with
`register(commands)`. `--help` lists the user's commands by what they are for, in the order
of the data flow; the project's own checks (what `make local` and the tests run) are
`climstack dev ...`.
"""

import argparse
import importlib
import sys

from climstack.common import process
from climstack.errors import FAILED, ClimstackError, internal_error

#: the user's commands, grouped as `climstack --help` lists them: (title, modules of cli/)
GROUPS = (
    ("build natively", ("drift", "check", "environments", "install", "modules")),
    ("containers", ("containers", "image", "sif")),
    ("run at a centre", ("bind", "verify", "parity", "slurm")),
    ("benchmarks", ("bench", "run_case")),
    ("share builds and sources", ("buildcache", "registry", "source_mirror")),
)
#: the project's own checks, `climstack dev CHECK` (make local's smoke steps, the tests')
DEV_MODULES = ("smoke", "container_smoke", "registry_smoke", "base_image")
DEV_HELP = "the project's own checks: smoke, container-smoke, registry-smoke, base-image"
#: the user's commands whose module of cli/ is named otherwise
MODULE_OF = {
    "named-env": "environments",
    "concretize": "environments",
    "containerize": "containers",
    "check-mpi": "containers",
    "compare-runs": "run_case",
}


class GroupedParser(argparse.ArgumentParser):
    """A parser whose --help lists its subcommands under the titles of `sections`."""

    sections: list[tuple[str, list[str]]] = []

    def format_help(self) -> str:
        if not self.sections:  # every other (sub)command's parser
            return super().format_help()
        commands = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
        by_name = {action.dest: action for action in commands._choices_actions}
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for title, names in self.sections:
            formatter.start_section(title)
            formatter.add_arguments([by_name[name] for name in names])
            formatter.end_section()
        formatter.start_section("options")
        formatter.add_arguments(self._optionals._group_actions)
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def _register(modules, commands) -> list[str]:
    """Let each module add its subcommands; their names, in order."""
    before = set(commands.choices)
    for name in modules:
        importlib.import_module(f"climstack.cli.{name}").register(commands)
    return [name for name in commands.choices if name not in before]


def _module_of(word: str, modules) -> str | None:
    """The module of `modules` (of cli/) that registers the command `word`: the one named
    after it (`source-mirror`: source_mirror.py) or MODULE_OF's, if there is one."""
    name = MODULE_OF.get(word, word.replace("-", "_"))
    return name if name in modules else None


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line; given the words typed (`argv`: `bind ...`, `dev smoke ...`), only
    the module of cli/ that registers their command (_module_of): a command imports what
    it runs, not what every command does (all of them: about 1 CPU-s at each start).
    Otherwise (`--help`, a typo, no command): every command, grouped."""
    top = GroupedParser(
        prog="climstack",
        description="The climate stack for HPE Cray systems, natively and in containers.",
        epilog="`climstack COMMAND --help` says more; the project's own checks: climstack dev",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    words = list(argv or [])[:2]
    users = [module for _, modules in GROUPS for module in modules]
    if words and (only := _module_of(words[0], users)):
        if words[0] in _register([only], commands):
            return top
        return parser()  # not its command after all: every command
    dev_check = words[1] if words[:1] == ["dev"] and len(words) > 1 else ""
    only = _module_of(dev_check, DEV_MODULES) if dev_check else None
    top.sections = [] if only else [(t, _register(ms, commands)) for t, ms in GROUPS]
    dev = commands.add_parser("dev", help=DEV_HELP, description=DEV_HELP)
    dev_commands = dev.add_subparsers(dest="dev_command", required=True, metavar="CHECK")
    dev.sections = [("checks", _register([only] if only else DEV_MODULES, dev_commands))]
    if only and dev_check not in dev.sections[0][1]:
        return parser()
    if not only:
        top.sections.append(("the project's own checks", ["dev"]))
    return top


def moved(argv: list[str], top: argparse.ArgumentParser) -> str | None:
    """The error for a check called by its old name (`climstack smoke`), if it is one."""
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    if "dev" not in commands.choices:  # a command of the user's, parsed alone
        return None
    checks = commands.choices["dev"].sections[0][1]
    if argv and argv[0] in checks:
        return (
            f"climstack {argv[0]}: error: `{argv[0]}` is one of the project's own checks now"
            f"\n  fix: climstack dev {' '.join(argv)}"
        )
    return None


def command_name(args) -> str:
    """The command as typed: `bind`, `dev smoke`."""
    return f"dev {args.dev_command}" if args.command == "dev" else args.command


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    top = parser(argv)
    if message := moved(argv, top):
        print(message, file=sys.stderr)
        return 2
    args = top.parse_args(argv)
    try:
        with process.interruptible():
            return args.run(args) or 0
    except ClimstackError as err:
        print(f"climstack {command_name(args)}: error: {err}", file=sys.stderr)
        return err.exit_code
    except process.Interrupted as stop:
        print(
            f"climstack {command_name(args)}: {stop}; the commands it ran are stopped, "
            "and a rerun reuses what was finished",
            file=sys.stderr,
        )
        return stop.exit_code
    except Exception as err:  # a bug of ours: a tool failure (3), never a verdict (1)
        print(f"climstack {command_name(args)}: {internal_error(err)}", file=sys.stderr)
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
