"""Run external commands: captured, with a ToolFailure (exit status 3) naming what failed,
or streamed line by line under a progress step (long Spack installs show Spack's own
lines).

Every command runs in a process group of its own, and its timeout counts from its start
whether or not it prints: at the deadline the whole group (with any children that hold its
output open) is killed and the error says so."""

import os
import pwd
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from climstack.errors import ToolFailure

TAIL = 3000  # characters of a failed command's output quoted in the error
CompletedProcess, Popen = subprocess.CompletedProcess, subprocess.Popen  # for type hints


def with_user(env: dict | None = None) -> dict:
    """`env` (default: ours) with USER set: ch-run and Apptainer refuse to start without it,
    and a container or CI job often has none."""
    env = dict(os.environ if env is None else env)
    if not env.get("USER"):
        env["USER"] = pwd.getpwuid(os.getuid()).pw_name
    return env


def _start(command: list, what: str, fix: str, env=None, **popen) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            command, text=True, start_new_session=True, env=with_user(env), **popen
        )
    except FileNotFoundError as err:
        raise ToolFailure(
            f"{what}: `{command[0]}` not found",
            fix=fix or "install it (bin/setup installs the tools the project uses)",
        ) from err


def _stop(proc: subprocess.Popen) -> None:
    """Kill the command's process group (its children too) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _timed_out(what: str, command: list, timeout: float, output: str, fix: str):
    silent = " printing nothing" if not output.strip() else ""
    return ToolFailure(
        f"{what}: `{' '.join(command[:3])} ...` still running after {timeout:g} s{silent}, "
        f"stopped" + (f"; its last output:\n{output.strip()[-TAIL:]}" if output.strip() else ""),
        fix=fix or "find out why it hangs (run the command by hand), or raise its timeout",
    )


def run(
    command: list,
    what: str,
    *,
    env: dict | None = None,
    cwd=None,
    timeout: float = 3600,
    check: bool = True,
    fix: str = "",
) -> subprocess.CompletedProcess:
    """Run `command` capturing text output; raise a ToolFailure naming `what` on failure."""
    command = [str(part) for part in command]
    proc = _start(
        command, what, fix, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        stdout, stderr = proc.communicate()
        raise _timed_out(what, command, timeout, stderr or stdout or "", fix) from None
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C): leave nothing running
            _stop(proc)
    if check and proc.returncode != 0:
        output = (stderr.strip() or stdout.strip())[-TAIL:]
        raise ToolFailure(f"{what} failed (exit {proc.returncode}):\n{output}", fix=fix)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _pump(pipe, lines: queue.Queue) -> None:
    """Pass the pipe's lines on, then None at its end (the reader blocks, the caller does not)."""
    with pipe:
        for line in pipe:
            lines.put(line)
    lines.put(None)


def stream(
    command: list,
    what: str,
    *,
    env: dict | None = None,
    cwd=None,
    timeout: float = 7200,
    fix: str = "",
    keep=lambda line: True,
) -> subprocess.CompletedProcess:
    """Run `command`, echoing the output lines `keep` accepts to stderr with the elapsed time,
    and return it like `run` (stdout holds the whole output)."""
    command = [str(part) for part in command]
    start = time.monotonic()
    proc = _start(
        command, what, fix, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, env=env
    )
    arrived: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, arrived), daemon=True).start()
    lines = []
    try:
        while (
            line := arrived.get(timeout=max(start + timeout - time.monotonic(), 0))
        ) is not None:
            lines.append(line)
            if keep(line):
                print(
                    f"    [{time.monotonic() - start:5.0f} s] {line.rstrip()}",
                    file=sys.stderr,
                    flush=True,
                )
        proc.wait(timeout=max(start + timeout - time.monotonic(), 0))
    except (queue.Empty, subprocess.TimeoutExpired):
        _stop(proc)
        raise _timed_out(what, command, timeout, "".join(lines), fix) from None
    finally:
        if proc.poll() is None:
            _stop(proc)
    output = "".join(lines)
    if proc.returncode != 0:
        raise ToolFailure(
            f"{what} failed (exit {proc.returncode}):\n{output.strip()[-TAIL:]}", fix=fix
        )
    return subprocess.CompletedProcess(command, proc.returncode, output, "")


def daemon(command: list, log: Path, *, env: dict | None = None) -> subprocess.Popen:
    """Start a server in the background, its output appended to `log`; stop it with stop()."""
    command = [str(part) for part in command]
    with log.open("ab") as out:
        return _start(command, command[0], "", stdout=out, stderr=out, env=env)


def stop(proc: subprocess.Popen | None, grace: float = 10) -> None:
    """Stop a daemon(): SIGTERM to its group, SIGKILL after `grace` seconds."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _stop(proc)
    except ProcessLookupError:
        proc.wait()


def environ(**changes: str | None) -> dict:
    """os.environ with `changes` applied (None removes a variable)."""
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def side_by_side(commands, cwd: Path, env: dict) -> tuple[float, int]:
    """Run `commands` at once, streamed to this terminal; (their CPU seconds, user + system
    of each process and its waited-for descendants from os.wait4's rusage; the first
    non-zero exit status, else 0)."""
    pids = [subprocess.Popen(list(command), cwd=cwd, env=env).pid for command in commands]
    cpu, status = 0.0, 0
    for pid in pids:
        _, wait_status, usage = os.wait4(pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        status = status or os.waitstatus_to_exitcode(wait_status)
    return cpu, status
