"""Say what a long step is doing: its name when it starts, a heartbeat while it runs, and
its wall time when it ends (on stderr, so stdout stays the command's result)."""

import sys
import threading
import time
from contextlib import contextmanager

HEARTBEAT_S = 30


@contextmanager
def step(what: str, heartbeat: float = HEARTBEAT_S):
    """`with step("concretizing archer2"):` prints ==> lines around the block."""
    print(f"==> {what} ...", file=sys.stderr, flush=True)
    start = time.monotonic()
    done = threading.Event()

    def beat():
        while not done.wait(heartbeat):
            print(f"    ... {what}: {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        yield
    except BaseException:
        print(
            f"==> {what}: failed after {time.monotonic() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        raise
    finally:
        done.set()
        ticker.join()
    print(f"==> {what}: done in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


def note(what: str) -> None:
    """A one-line ==> message for a step that needed no work."""
    print(f"==> {what}", file=sys.stderr, flush=True)
