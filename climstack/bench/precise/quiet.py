"""A quiet machine for the precise profile: it waits (and in the end refuses) while the
load average says something else is running, and records, beside each run, the load and
how busy the CPUs were just before it (measured while nothing of ours runs)."""

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from climstack.errors import ClimstackError

STAT = Path("/proc/stat")
#: busy: a 1-minute load average above this share of the CPUs, before the first run
LOAD_SHARE = 0.25
#: busy: more than this share of the CPUs in use during the sample before a run
BUSY_SHARE = 0.25
SAMPLE_S = 0.3


@dataclass(frozen=True)
class Load:
    average: float  # the 1-minute load average
    busy: float  # share of all CPUs in use during the sample (0-1)

    def fields(self) -> dict[str, str]:
        return {"load": f"{self.average:.2f}", "busy": f"{self.busy:.2f}"}


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat's first line."""
    values = [int(v) for v in STAT.read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def sample(seconds: float = SAMPLE_S) -> Load:
    busy0, total0 = _cpu_times()
    time.sleep(seconds)
    busy1, total1 = _cpu_times()
    return Load(os.getloadavg()[0], (busy1 - busy0) / max(total1 - total0, 1))


def wait_until_quiet(limit: float, before_start: bool = False, poll: float = 10) -> Load:
    """The load once the machine is quiet; waits up to `limit` seconds, printing why,
    then refuses. `before_start`: the load average counts (nothing of ours has run)."""
    cpus, deadline = os.cpu_count() or 1, time.monotonic() + limit
    while True:
        load = sample()
        busy = load.busy > BUSY_SHARE or (before_start and load.average > LOAD_SHARE * cpus)
        if not busy:
            return load
        if time.monotonic() >= deadline:
            raise ClimstackError(
                f"the machine is busy: load average {load.average:.2f} on {cpus} CPUs, "
                f"{load.busy:.0%} of them in use while nothing of the precise profile ran",
                fix="stop what else runs (another build, a test suite), then run "
                "`climstack bench local --precise` again",
            )
        print(
            f"climstack bench: waiting for a quiet machine (load {load.average:.2f}, "
            f"{load.busy:.0%} busy)",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(poll)
