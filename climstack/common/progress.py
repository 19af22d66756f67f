"""Say what a long step is doing: its name when it starts, a heartbeat while it runs, and
its wall time when it ends (on stderr, so stdout stays the command's result)."""

import sys
import threading
import time
from contextlib import contextmanager

HEARTBEAT_S = 30
_WRITING = threading.Lock()


def _say(line: str) -> None:
    """One whole line: steps run side by side in threads (`concretize -j`), and print()
    writes a line's text and its newline apart, so two lines could run into one."""
    with _WRITING:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


@contextmanager
def step(what: str, heartbeat: float = HEARTBEAT_S):
    """`with step("concretizing archer2"):` prints ==> lines around the block."""
    _say(f"==> {what} ...")
    start = time.monotonic()
    done = threading.Event()

    def beat():
        while not done.wait(heartbeat):
            _say(f"    ... {what}: {time.monotonic() - start:.0f} s")

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        yield
    except BaseException:
        _say(f"==> {what}: failed after {time.monotonic() - start:.0f} s")
        raise
    finally:
        done.set()
        ticker.join()
    _say(f"==> {what}: done in {time.monotonic() - start:.1f} s")


def note(what: str) -> None:
    """A one-line ==> message for a step that needed no work."""
    _say(f"==> {what}")
