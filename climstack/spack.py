"""Run the project's pinned Spack (bin/spack) from Python."""

import os
import subprocess
from pathlib import Path

from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT

SPACK = PROJECT_ROOT / "bin" / "spack"


def run(*args: str, env: Path | None = None, extra_env: dict | None = None,
        check: bool = True, timeout: int = 3600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `spack [-e env] args...`, returning the completed process (text output)."""
    command = [str(SPACK)] + (["-e", str(env)] if env else []) + list(args)
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**os.environ, **(extra_env or {})},
    )
    if check and proc.returncode != 0:
        message = proc.stderr.strip() or proc.stdout.strip()
        raise ClimstackError(f"`spack {' '.join(command[1:])}` failed:\n{message}")
    return proc
