"""Run external commands: captured, with a ClimstackError naming what failed, or streamed
line by line under a progress step (long Spack installs show Spack's own lines)."""

import os
import subprocess
import sys
import time

from climstack.errors import ClimstackError

TAIL = 3000  # characters of a failed command's output quoted in the error


def run(
    command: list,
    what: str,
    *,
    env: dict | None = None,
    cwd=None,
    timeout: int = 3600,
    check: bool = True,
    fix: str = "",
) -> subprocess.CompletedProcess:
    """Run `command` capturing text output; raise a ClimstackError naming `what` on failure."""
    command = [str(part) for part in command]
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
        )
    except FileNotFoundError as err:
        raise ClimstackError(
            f"{what}: `{command[0]}` not found",
            fix=fix or "install it (bin/setup installs the tools the project uses)",
        ) from err
    except subprocess.TimeoutExpired as err:
        raise ClimstackError(
            f"{what}: `{' '.join(command[:3])} ...` still running after " f"{timeout} s, stopped",
            fix=fix,
        ) from err
    if check and proc.returncode != 0:
        output = (proc.stderr.strip() or proc.stdout.strip())[-TAIL:]
        raise ClimstackError(f"{what} failed (exit {proc.returncode}):\n{output}", fix=fix)
    return proc


def stream(
    command: list,
    what: str,
    *,
    env: dict | None = None,
    cwd=None,
    timeout: int = 7200,
    fix: str = "",
    keep=lambda line: True,
) -> subprocess.CompletedProcess:
    """Run `command`, echoing the output lines `keep` accepts to stderr with the elapsed time,
    and return it like `run` (stdout holds the whole output)."""
    command = [str(part) for part in command]
    start = time.monotonic()
    lines = []
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env=env,
        bufsize=1,
    ) as proc:
        for line in proc.stdout:
            lines.append(line)
            if keep(line):
                print(
                    f"    [{time.monotonic() - start:5.0f} s] {line.rstrip()}",
                    file=sys.stderr,
                    flush=True,
                )
            if time.monotonic() - start > timeout:
                proc.kill()
                raise ClimstackError(f"{what}: still running after {timeout} s, stopped", fix=fix)
    output = "".join(lines)
    if proc.returncode != 0:
        raise ClimstackError(
            f"{what} failed (exit {proc.returncode}):\n{output.strip()[-TAIL:]}", fix=fix
        )
    return subprocess.CompletedProcess(command, proc.returncode, output, "")


def environ(**changes: str | None) -> dict:
    """os.environ with `changes` applied (None removes a variable)."""
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
