"""The error types our tools raise: what is wrong, where, and the fix. Each carries the exit
status `climstack` ends with (EXIT_CODES, documented in docs/exit-codes.md):

| status | meaning                                                        |
|--------|----------------------------------------------------------------|
| 0      | ok                                                             |
| 1      | a check's negative verdict: differs, refused, drift            |
| 2      | bad input: an argument, a file or a key; nothing was done      |
| 3      | a tool or program failed (a command's exit, a timeout, a crash, |
|        | an output that does not read)                                  |
| 4      | ok by climstack's model alone: every check passed, but the real |
|        | program (the image's ld.so) was not asked to confirm it         |

A negative verdict is not an error: a command that finds one returns 1 itself. An exception
climstack did not expect (a bug of ours) ends the command with 3 too, in one line that says
where to report it (`internal_error`), never with Python's 1, which would read as a verdict.
"""

import traceback
from pathlib import Path

OK, NEGATIVE, BAD_INPUT, FAILED, UNCONFIRMED = 0, 1, 2, 3, 4
EXIT_CODES = {
    OK: "ok",
    NEGATIVE: "a check's negative verdict (differs, refused, drift)",
    BAD_INPUT: "bad input (an argument, file or key); nothing was done",
    FAILED: "a tool or program failed (exit status, timeout, crash, unreadable output)",
    UNCONFIRMED: "ok by climstack's model alone: the real program was not asked to confirm it",
}


class ClimstackError(Exception):
    """Bad input: exit status 2."""

    exit_code = BAD_INPUT

    def __init__(self, message: str, fix: str = ""):
        self.message = message
        self.fix = fix
        super().__init__(f"{message}\n  fix: {fix}" if fix else message)


class ToolFailure(ClimstackError):
    """A tool or program we ran failed, or what it wrote does not read: exit status 3."""

    exit_code = FAILED


def internal_error(err: Exception) -> str:
    """One line for an exception climstack did not expect: what, where it was raised, and
    where to report it (its exit status: FAILED)."""
    root = Path(__file__).parent.parent
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if Path(f.filename).is_relative_to(root / "climstack")] or frames
    where = ""
    if ours:  # the last line of ours it passed through
        path = Path(ours[-1].filename)
        path = path.relative_to(root) if path.is_relative_to(root) else path.name
        where = f" (at {path}:{ours[-1].lineno}, in {ours[-1].name})"
    what = " ".join(f"{type(err).__name__}: {err}".split())[:300]
    return (
        f"internal error: {what}{where}; report it, with the command line and this message, "
        "to the climstack maintainers"
    )
