"""The gateway to Spack: the project's pinned Spack (bin/spack) run from Python, captured or
streamed with Spack's own progress lines (installs). The scripts Spack runs in its own
Python (`spack python`) live beside it, in scripts/."""

from pathlib import Path

from climstack.common import process
from climstack.pins import PROJECT_ROOT

SPACK = PROJECT_ROOT / "bin" / "spack"
SCRIPTS = Path(__file__).parent / "scripts"  #: run by `spack python`, never imported


def command(*args: str, env: Path | None = None) -> list[str]:
    return [str(SPACK), *(["-e", str(env)] if env else []), *args]


def run(
    *args: str,
    env: Path | None = None,
    check: bool = True,
    timeout: int = 3600,
    cwd: Path | None = None,
    environ: dict | None = None,
) -> process.CompletedProcess:
    """Run `spack [-e env] args...`, returning the completed process (text output)."""
    argv = command(*args, env=env)
    what = f"`spack {' '.join(argv[1:])}`"
    return process.run(argv, what, check=check, timeout=timeout, cwd=cwd, env=environ)


def is_progress(line: str) -> bool:
    """Spack's per-package lines of an install: ==> Installing/Fetching, [+] installed."""
    return line.startswith(("==> ", "[+] ", "[e] ")) or "Error" in line


def stream(
    *args: str, env: Path | None = None, timeout: int = 7200, environ: dict | None = None
) -> process.CompletedProcess:
    """Run a long Spack command, echoing its progress lines as they come."""
    argv = command(*args, env=env)
    what = f"`spack {' '.join(argv[1:])}`"
    return process.stream(argv, what, timeout=timeout, env=environ, keep=is_progress)
