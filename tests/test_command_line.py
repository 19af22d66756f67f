"""`climstack --help`: the user's commands first, grouped by what they are for (build,
containers, run at a centre, benchmarks, share), every command in one group; the project's
own checks under `climstack dev`, where make local's steps call them."""

import argparse
import os
import subprocess
import sys

from conftest import PROJECT_ROOT

from climstack import workflow
from climstack.__main__ import DEV_MODULES, GROUPS, main, parser

TITLES = [title for title, _ in GROUPS] + ["the project's own checks"]
CHECKS = ["smoke", "container-smoke", "registry-smoke", "base-image"]


def subcommands(command: argparse.ArgumentParser) -> dict:
    return next(a for a in command._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_help_groups_the_users_commands_first_and_the_checks_last(capsys):
    top = parser()
    assert [title for title, _ in top.sections] == TITLES
    grouped = [name for _, names in top.sections for name in names]
    assert sorted(grouped) == sorted(subcommands(top)) and len(grouped) == len(set(grouped))
    assert top.sections[-1][1] == ["dev"] and not set(CHECKS) & set(grouped)
    text = top.format_help()
    at = [text.index(f"\n{title}:\n") for title in TITLES]
    assert at == sorted(at), text
    assert text.index("  bind ") > text.index("\nrun at a centre:\n") > text.index("  sif ")


def test_the_checks_are_climstack_dev(capsys):
    dev = subcommands(parser())["dev"]
    assert list(subcommands(dev)) == CHECKS and len(DEV_MODULES) == len(CHECKS)
    assert dev.format_help().split("\nchecks:\n")[1].split()[0] == "smoke"
    assert main(["smoke", "local"]) == 2  # by its old name: where it went
    assert "fix: climstack dev smoke local" in capsys.readouterr().err


def test_a_command_is_parsed_by_its_own_module_alone():
    """`climstack bind ...` registers cli/bind.py alone (a start imports what its command
    runs: about 1 CPU-s less than every command's imports), and parses as the whole command
    line does; `--help`, a typo or no command get every command."""
    full = subcommands(parser())
    for name, command in full.items():
        checks = subcommands(command) if name == "dev" else {None: command}
        for check, whole in checks.items():
            words = [name, check] if check else [name]
            alone = subcommands(parser(words))
            if check:
                assert list(subcommands(alone["dev"])) == [check], words
                alone = subcommands(alone["dev"])
            else:
                assert "dev" not in alone and len(alone) < len(full), words
            assert alone[words[-1]].format_help() == whole.format_help(), words
    for words in (["--help"], ["bnid"], [], ["dev"], ["dev", "bnid"]):
        assert subcommands(parser(words)).keys() == full.keys(), words
    probe = "import sys; from climstack.__main__ import parser; parser(['verify', 'x']); " + (
        "print(sorted(m for m in sys.modules if m.startswith('climstack.cli.')))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.stdout.split() == ["['climstack.cli.verify']"], run.stdout + run.stderr


def test_make_locals_steps_are_commands_climstack_accepts():
    top = parser()
    for task in workflow.LOCAL:
        if task.command[0] == workflow.CLIMSTACK:
            args = top.parse_args(list(task.command[1:]))
            assert args.run, task.command


def test_the_core_commands_run_without_the_bench_extra(tmp_path):
    """matplotlib and netCDF4 are the `bench` extra (pyproject.toml): with both unimportable
    (stand-ins first on PYTHONPATH that raise ImportError), `--help`, `verify --help` and a
    bind plan, made and written, still exit 0."""
    blocked = tmp_path / "blocked"
    (blocked / "matplotlib").mkdir(parents=True)
    (blocked / "matplotlib" / "__init__.py").write_text("raise ImportError('blocked: bench')\n")
    (blocked / "netCDF4.py").write_text("raise ImportError('blocked: bench')\n")
    env = {**os.environ, "PYTHONPATH": str(blocked), "LD_LIBRARY_PATH": ""}
    for module in ("matplotlib", "netCDF4"):  # the stand-ins are what Python imports
        proc = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, text=True,
                              capture_output=True)  # fmt: skip
        assert proc.returncode == 1 and "blocked: bench" in proc.stderr, module
    plan = tmp_path / "plan"
    for argv in (
        ["--help"],
        ["verify", "--help"],
        ["bind", "local", "--format", "json", "--out", str(plan)],
    ):
        proc = subprocess.run(
            [str(PROJECT_ROOT / "bin" / "climstack"), *argv],
            env=env,
            text=True,
            capture_output=True,
            timeout=300,
        )
        assert proc.returncode == 0, (argv, proc.stderr)
    assert (plan / "plan.json").is_file()
