"""Run external commands: captured, with a ToolFailure (exit status 3) naming what failed,
or streamed line by line under a progress step (long Spack installs show Spack's own
lines).

Every command runs in a process group of its own, and its timeout counts from its start
whether or not it prints: at the deadline the whole group (with any children that hold its
output open) is killed and the error says so. Under `interruptible()` (the CLI, bin/setup,
make local, the speed scripts), SIGTERM, SIGINT or SIGHUP stop every command running, its
whole group (Spack's build processes included), before the caller's `finally` blocks run."""

import os
import pwd
import queue
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from climstack.errors import ToolFailure

TAIL = 3000  # characters of a failed command's output quoted in the error
CompletedProcess, Popen = subprocess.CompletedProcess, subprocess.Popen  # for type hints
#: how long an interrupted command's process group has after SIGTERM, before SIGKILL
GRACE_S = 5.0
#: what ends a command early: `timeout` and a job's time limit (SIGTERM), Ctrl-C (SIGINT),
#: a closed terminal (SIGHUP)
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: the commands running now: pid -> whether it leads a process group of its own
_RUNNING: dict[int, bool] = {}
_RUNNING_LOCK = threading.RLock()  # re-entered by the signal handler in the main thread
_stopping = threading.Event()  # set once interrupted: no new command starts


class Interrupted(KeyboardInterrupt):
    """A signal (SIGNALS) ended the command, after every command it ran was stopped."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # as a shell reports a command a signal ended


def with_user(env: dict | None = None) -> dict:
    """`env` (default: ours) with USER set: ch-run and Apptainer refuse to start without it,
    and a container or CI job often has none."""
    env = dict(os.environ if env is None else env)
    if not env.get("USER"):
        env["USER"] = pwd.getpwuid(os.getuid()).pw_name
    return env


def _track(pid: int, group: bool) -> None:
    with _RUNNING_LOCK:
        _RUNNING[pid] = group


def _untrack(proc: subprocess.Popen) -> None:
    with _RUNNING_LOCK:
        _RUNNING.pop(proc.pid, None)


def _start(command: list, what: str, fix: str, env=None, **popen) -> subprocess.Popen:
    if _stopping.is_set():  # a thread's next command, after an interrupt
        raise ToolFailure(f"{what}: not started, the command was interrupted", fix="rerun it")
    try:
        proc = subprocess.Popen(
            command, text=True, start_new_session=True, env=with_user(env), **popen
        )
    except FileNotFoundError as err:
        raise ToolFailure(
            f"{what}: `{command[0]}` not found",
            fix=fix or "install it (bin/setup installs the tools the project uses)",
        ) from err
    _track(proc.pid, group=True)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    """Kill the command's process group (its children too) and reap it."""
    _kill(proc.pid, True, signal.SIGKILL)
    proc.wait()
    _untrack(proc)


def _kill(pid: int, group: bool, signum: int) -> None:
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class TimedOut(ToolFailure):
    """A command still running at its timeout, and stopped."""


def _timed_out(what: str, command: list, timeout: float, output: str, fix: str):
    silent = " printing nothing" if not output.strip() else ""
    return TimedOut(
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
        _untrack(proc)
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
        _untrack(proc)
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
        if proc is not None:
            _untrack(proc)
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _stop(proc)
    except ProcessLookupError:
        proc.wait()
    _untrack(proc)


def environ(**changes: str | None) -> dict:
    """os.environ with `changes` applied (None removes a variable)."""
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


#: the commands `start` began, by pid, until wait_any reaps them: a Popen dropped while its
#: child runs is reaped by subprocess's own clean-up at the next Popen, rusage and all
_STARTED: dict[int, subprocess.Popen] = {}


def start(command, cwd: Path, env: dict) -> int:
    """Start `command` in our process group (Ctrl-C at a terminal reaches it), streamed to
    this terminal, tracked so that an interrupt stops it (it stops its own commands); its
    pid, for wait_any."""
    proc = subprocess.Popen(list(command), cwd=cwd, env=env)
    _STARTED[proc.pid] = proc
    _track(proc.pid, group=False)
    return proc.pid


def wait_any(pids, poll: float = 0.1) -> tuple[int, float, int]:
    """Wait for one of `pids` (commands `start` began) to end, leaving any other child of
    this process alone: (its pid, its CPU seconds: user + system of it and its waited-for
    descendants, from os.wait4's rusage; its exit status)."""
    while True:
        for pid in pids:
            ended, wait_status, usage = os.wait4(pid, os.WNOHANG)
            if ended:
                with _RUNNING_LOCK:
                    _RUNNING.pop(pid, None)
                status = os.waitstatus_to_exitcode(wait_status)
                _STARTED.pop(pid).returncode = status  # reaped here, not again by Popen
                return pid, usage.ru_utime + usage.ru_stime, status
        time.sleep(poll)


def _processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of each process alive now, zombies left out (/proc)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        state, parent, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if state not in "ZX":
            found.append((int(entry.name), int(parent), int(group)))
    return found


def stop_running(grace: float = GRACE_S) -> int:
    """SIGTERM to every command running (a whole process group: Spack's builds included)
    and to every other child of this process (the workflow's commands, a script's
    subprocesses, which stop their own: given three times as long), SIGKILL to what is left
    of them after the grace; how many there were."""
    with _RUNNING_LOCK:
        running = dict(_RUNNING)
    for pid, parent, _ in _processes():
        if parent == os.getpid():
            running.setdefault(pid, False)
    for pid, group in running.items():
        _kill(pid, group, signal.SIGTERM)
    deadline = time.monotonic() + (grace if all(running.values()) else 3 * grace)
    while running and time.monotonic() < deadline:
        alive = _processes()
        pids, groups = {p for p, _, _ in alive}, {g for _, _, g in alive}
        if not any(pid in (groups if group else pids) for pid, group in running.items()):
            break
        time.sleep(0.05)
    for pid, group in running.items():
        _kill(pid, group, signal.SIGKILL)
    return len(running)


def script(main, *args) -> int:
    """A script's `main(*args)` under interruptible(): its exit status, 128 + the signal's
    number when one ended it (`sys.exit(process.script(main))`)."""
    try:
        with interruptible():
            return main(*args) or 0
    except Interrupted as stop:
        print(
            f"{Path(sys.argv[0]).name}: {stop}; the commands it ran are stopped", file=sys.stderr
        )
        return stop.exit_code


def _interrupt(signum, frame) -> None:
    for other in SIGNALS:  # the stopping, and the callers' `finally` blocks, run to the end
        signal.signal(other, signal.SIG_IGN)
    _stopping.set()
    stop_running()
    raise Interrupted(signum)


@contextmanager
def interruptible():
    """Within the block, SIGTERM, SIGINT and SIGHUP stop every command running (their
    process groups, SIGKILL after GRACE_S) and raise Interrupted: the `finally` blocks run
    (temporary directories removed; a cache entry's stamp, written last, is never written),
    so a rerun resumes. Outside the main thread (where no handler can be set) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _interrupt) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _stopping.clear()
