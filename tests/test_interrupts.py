"""Interrupts: SIGTERM (a job's time limit, `timeout`) or SIGINT (Ctrl-C) sent to the top
process only ends its whole process tree within seconds, though each command runs in a
process group of its own (climstack.common.process.interruptible): a real Spack build, make
local's side-by-side steps, `climstack registry` and its daemon. Nothing is left
half-installed (the rerun completes), and a second `make local` on one cache is refused,
naming the first."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT

from climstack import workflow
from climstack.common import process

#: how long a tree may take to end after the signal (GRACE_S, for a command that ignores
#: SIGTERM, plus Python's start-up and exit)
ENDS_WITHIN_S = 3 * process.GRACE_S + 5

SLEEPER = '''\
import os

from spack.package import *


class Sleeper(Package):
    """Writes half of its prefix, then sleeps: the interrupt test's long build step."""

    homepage = "https://example.invalid/sleeper"
    has_code = False

    version("1.0")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        with open(join_path(prefix.bin, "half"), "w") as half:
            half.write("written before the sleep")
        with open("{started}", "w") as started:
            started.write(str(os.getpid()))
        Executable("sleep")(open("{seconds}").read().strip())
'''

#: a Spack install under the process runner, as `climstack install` runs one
BUILD = """
import sys
from pathlib import Path
from climstack.common import process
from climstack_dev.centre import Centre
centre = Centre(Path(sys.argv[1]), shared=()).setup()
sys.exit(process.script(lambda: centre.stream("install", env=Path(sys.argv[2])).returncode))
"""


def descendants(top: int) -> dict[int, str]:
    """pid -> command line of every process below `top`, whatever its process group."""
    children: dict[int, list[int]] = {}
    for pid, parent, _ in process._processes():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, list(children.get(top, []))
    while todo:
        pid = todo.pop()
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        todo += children.get(pid, [])
    return found


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"no {what} after {timeout:g} s"
        time.sleep(0.1)
    return result


def interrupt(proc: subprocess.Popen, signum: int, started) -> tuple[dict, float]:
    """Once `started(tree)` is true of proc's tree, send `signum` to proc alone; (the tree
    then, the seconds proc took to end)."""
    tree = wait_for(lambda: (t := descendants(proc.pid)) and started(t) and t, 300, "tree")
    at = time.monotonic()
    proc.send_signal(signum)
    proc.wait(timeout=60)
    return tree, time.monotonic() - at


def left(tree: dict) -> list[str]:
    """The processes of `tree` still alive (zombies are not)."""
    alive = {pid for pid, _, _ in process._processes()}
    return [f"{pid} {command}" for pid, command in tree.items() if pid in alive]


def test_sigterm_stops_a_spack_build_and_the_rerun_completes(tmp_path):
    repo = tmp_path / "repo"
    (repo / "packages" / "sleeper").mkdir(parents=True)
    (repo / "repo.yaml").write_text("repo:\n  namespace: interrupts\n  api: v1.0\n")
    started, seconds = tmp_path / "started", tmp_path / "seconds"
    seconds.write_text("600")
    package = SLEEPER.replace("{started}", str(started)).replace("{seconds}", str(seconds))
    (repo / "packages" / "sleeper" / "package.py").write_text(package)
    env, installs = tmp_path / "env", tmp_path / "installs"
    env.mkdir()
    manifest = {
        "specs": ["sleeper"],
        "view": False,
        "repos": {"interrupts": str(repo)},
        "config": {"install_tree": {"root": str(installs)}},
    }
    (env / "spack.yaml").write_text(yaml.safe_dump({"spack": manifest}))
    build = [sys.executable, "-c", BUILD, str(tmp_path / "centre"), str(env)]
    with subprocess.Popen(build, cwd=PROJECT_ROOT, stderr=subprocess.PIPE, text=True) as proc:
        # the signal once the build runs its `sleep 600` (the file is written just before it)
        tree, took = interrupt(
            proc, signal.SIGTERM, lambda tree: any("sleep 600" in c for c in tree.values())
        )
        said = proc.stderr.read()
    assert proc.returncode == 128 + signal.SIGTERM, said[-2000:]
    assert any("sleep 600" in command for command in tree.values()), tree
    assert took < ENDS_WITHIN_S and not left(tree), (took, left(tree))
    assert "interrupted by SIGTERM; the commands it ran are stopped" in said
    # the rerun removes the half-written prefix and completes; Spack holds no stale lock
    seconds.write_text("0")
    rerun = subprocess.run(build, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    (prefix,) = installs.glob("*/sleeper-1.0-*")
    assert (prefix / ".spack" / "spec.json").is_file() and (prefix / "bin" / "half").is_file()


#: a command of a step: one long command under the process runner, in a group of its own
STEP = (
    "import sys; from climstack.common import process; "
    "sys.exit(process.script(lambda: process.run(['sleep', '301'], 'sleeping', timeout=900)))"
)
#: make local's scheduler with two such commands side by side
WORKFLOW = (
    "import sys; from climstack import workflow; from climstack.common import process; "
    f"tasks = tuple(workflow.Task(n, (sys.executable, '-c', {STEP!r})) for n in 'ab'); "
    "sys.exit(process.script(workflow.run, tasks))"
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_make_locals_steps_end_with_their_commands(signum):
    with subprocess.Popen(
        [sys.executable, "-c", WORKFLOW], cwd=PROJECT_ROOT, stderr=subprocess.PIPE, text=True
    ) as proc:
        sleeping = lambda tree: sum("sleep 301" in c for c in tree.values()) == 2  # noqa: E731
        tree, took = interrupt(proc, signum, sleeping)
        said = proc.stderr.read()
    assert proc.returncode == 128 + signum, said
    assert took < ENDS_WITHIN_S and not left(tree), (took, left(tree))
    # the runner, then each command: the runner passes SIGTERM on to them
    assert f"-c: interrupted by {signal.Signals(signum).name}" in said
    assert said.count("interrupted by") == 3, said


@pytest.mark.skipif(not shutil.which("docker-registry"), reason="needs docker-registry")
def test_sigterm_stops_the_registry_command_and_its_daemon(tmp_path):
    command = [str(PROJECT_ROOT / "bin" / "climstack"), "registry", str(tmp_path / "registry")]
    environ = {**os.environ, "PYTHONUNBUFFERED": "1"}  # its first line, as it prints it
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environ) as proc:
        assert proc.stdout.readline().startswith("registry:  oci://127.0.0.1:")
        tree, took = interrupt(proc, signal.SIGTERM, lambda tree: tree)
    assert any("docker-registry" in command for command in tree.values()), tree
    assert took < ENDS_WITHIN_S and not left(tree), (took, left(tree))


def test_a_second_make_local_on_one_cache_is_refused_naming_the_first(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path))
    # were it let in, it would run this instead of make local
    monkeypatch.setitem(workflow.WORKFLOWS, "local", (workflow.Task("x", ("false",)),))
    with workflow.only_run("local"):
        assert workflow.main(["local"]) == 2
    said = capsys.readouterr().err
    assert f"`make local` is already running on the cache {tmp_path}: pid {os.getpid()}" in said
    assert "fix: wait for it to end, or stop it (kill PID" in said
    with workflow.only_run("local"):  # released: the next run gets in
        pass
