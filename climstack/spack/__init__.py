"""The gateway to Spack: the project's pinned Spack (bin/spack) run from Python, captured or
streamed with Spack's own progress lines (installs), and the scripts Spack runs in its own
Python (`spack python`, scripts/) with their JSON results.

A `Spack` is one Spack instance: the pinned Spack with its environment variables and the
config scopes every command gets. DEFAULT is the user's; an isolated test centre
(climstack_dev/centre.py) is another. Code that drives either takes `spack: Spack = DEFAULT`.
"""

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from climstack.common import process
from climstack.errors import ClimstackError
from climstack.pins import PROJECT_ROOT

SPACK = PROJECT_ROOT / "bin" / "spack"
SCRIPTS = Path(__file__).parent / "scripts"  #: run by `spack python`, never imported


def is_progress(line: str) -> bool:
    """Spack's per-package lines of an install: ==> Installing/Fetching, [+] installed."""
    return line.startswith(("==> ", "[+] ", "[e] ")) or "Error" in line


def script_path(script: str | Path) -> Path:
    """A script of scripts/ given by its file name, or any script given by its path."""
    path = Path(script) if os.sep in str(script) else SCRIPTS / script
    if not path.is_file():
        raise ClimstackError(
            f"no script {path} to run in Spack's Python",
            fix=f"name a file of {SCRIPTS} (e.g. concretize_inputs.py) or give a script's path",
        )
    return path


class ScriptFailed(ClimstackError):
    """A `spack python` script that failed or printed no JSON last. `output`: its error
    output (else its standard output), for callers that say what it means."""

    def __init__(self, argv: list[str], proc: process.CompletedProcess):
        self.returncode = proc.returncode
        self.output = proc.stderr.strip() or proc.stdout.strip()
        how = f"failed (exit {proc.returncode})" if proc.returncode else "printed no JSON last"
        command = " ".join(argv[1:])
        super().__init__(
            f"`spack {command}` {how}:\n{self.output[-process.TAIL:]}",
            fix=f"run `{' '.join(argv)}` by hand to see all it prints; its last line of "
            "output must be its result, as JSON",
        )


@dataclass(kw_only=True)
class Spack:
    """One Spack instance: the pinned Spack, the variables set for each of its commands
    (None unsets one) and the config scopes (`spack -C`) each command gets."""

    executable: Path = SPACK
    variables: dict[str, str | None] = field(default_factory=dict)
    scopes: tuple[Path, ...] = ()

    def environ(self, base: Mapping[str, str] | None = None) -> dict:
        """The environment its commands run in: `base` (default: ours) with its variables."""
        env = dict(os.environ if base is None else base)
        for key, value in self.variables.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def scoped(self, *scopes: Path) -> "Spack":
        """This Spack with more config scopes, above the ones it has."""
        return replace(self, scopes=(*self.scopes, *scopes))

    def command(self, *args: str, env: Path | None = None) -> list[str]:
        """The argv of `spack [-C scope]... [-e env] args...`."""
        scopes = [option for scope in self.scopes for option in ("-C", str(scope))]
        return [str(self.executable), *scopes, *(["-e", str(env)] if env else []), *args]

    def run(
        self,
        *args: str,
        env: Path | None = None,
        check: bool = True,
        timeout: int = 3600,
        cwd: Path | None = None,
        environ: Mapping[str, str] | None = None,
        fix: str = "",
    ) -> process.CompletedProcess:
        """Run `spack [-e env] args...`, returning the completed process (text output);
        `environ`: the environment to start from (default: ours)."""
        argv = self.command(*args, env=env)
        return process.run(
            argv,
            f"`spack {' '.join(argv[1:])}`",
            check=check,
            timeout=timeout,
            cwd=cwd,
            env=self.environ(environ),
            fix=fix,
        )

    def stream(
        self,
        *args: str,
        env: Path | None = None,
        timeout: int = 7200,
        environ: Mapping[str, str] | None = None,
    ) -> process.CompletedProcess:
        """Run a long Spack command, echoing its progress lines as they come."""
        argv = self.command(*args, env=env)
        what, variables = f"`spack {' '.join(argv[1:])}`", self.environ(environ)
        return process.stream(argv, what, timeout=timeout, env=variables, keep=is_progress)

    def python(
        self,
        script: str | Path,
        *args: str,
        env: Path | None = None,
        options: tuple[str, ...] = (),
        timeout: int = 3600,
    ) -> Any:
        """Run `script` (a file of scripts/ by name, or a path) in Spack's Python, as
        `spack [options] [-e env] python script args...`, and return the JSON of its last
        line of output; ScriptFailed when it fails or that line is no JSON."""
        path = script_path(script)
        args = (*options, "python", str(path), *args)
        proc = self.run(*args, env=env, check=False, timeout=timeout)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode == 0 and lines:
            try:
                return json.loads(lines[-1])
            except ValueError:
                pass
        raise ScriptFailed(self.command(*args, env=env), proc)


#: the user's Spack (their environment, no scopes but those Spack itself finds)
DEFAULT = Spack()
#: commands of the user's Spack, for code that drives no other
run, stream = DEFAULT.run, DEFAULT.stream
