"""The error types our tools raise: what is wrong, where, and the fix. Each carries the exit
status `climstack` ends with (EXIT_CODES, documented in docs/exit-codes.md):

| status | meaning                                                        |
|--------|----------------------------------------------------------------|
| 0      | ok                                                             |
| 1      | a check's negative verdict: differs, refused, drift            |
| 2      | bad input: an argument, a file or a key; nothing was done      |
| 3      | a tool or program failed (a command's exit, a timeout, a crash, |
|        | an output that does not read)                                  |

A negative verdict is not an error: a command that finds one returns 1 itself.
"""

OK, NEGATIVE, BAD_INPUT, FAILED = 0, 1, 2, 3
EXIT_CODES = {
    OK: "ok",
    NEGATIVE: "a check's negative verdict (differs, refused, drift)",
    BAD_INPUT: "bad input (an argument, file or key); nothing was done",
    FAILED: "a tool or program failed (exit status, timeout, crash, unreadable output)",
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
