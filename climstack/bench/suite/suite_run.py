"""One run of MPICH's test suite by MPICH's own runner (`runtests`, the built tree's): each
test under the host MPI's launcher with its testlist's rank count and a time limit
(MPITEST_TIMEOUT, which Hydra's mpiexec enforces: a hang is a named failure), natively or
in an image through the bind plan (MPITEST_PROGRAM_WRAPPER: the runtime's per-rank command
of a job step, the test's directory bound in and the rank started there). Its JUnit file is
read back: test -> passed, or the failure's output."""

import os
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from climstack.common import atomic, process
from climstack.errors import ClimstackError

#: seconds a test may run before it is stopped (runtests' default, 180, times out a hang
#: late; the suite's slowest tests here take under 20 s, oversubscribed)
TIMEOUT = 60
MAX_RANKS = 4  # a 2-core workstation: tests of more ranks are left out of a run, counted


@dataclass(frozen=True)
class Outcome:
    test: str  # "coll/allred2 4": the testlist's directory, program, ranks and arguments
    passed: bool
    seconds: float
    output: str = ""


def run(prefix: Path, mpiexec: str, out: Path, wrapper: str = "", env=None) -> list[Outcome]:
    """Every test of the suite installed at `prefix` on at most MAX_RANKS ranks, through
    `mpiexec` (the host MPI's launcher), each rank as `wrapper` starts it (nothing:
    natively); the runner's output and JUnit file kept in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "junit.xml"
    settings = {"MPITEST_TIMEOUT": str(TIMEOUT), "MPITEST_PROGRAM_WRAPPER": wrapper}
    proc = process.run(
        ["perl", str(prefix / "runtests"), f"-srcdir={prefix}", "-tests=testlist",
         f"-mpiexec={mpiexec}", f"-maxnp={MAX_RANKS}", f"-junitfile={junit}"],
        f"MPICH's test suite ({prefix})",
        cwd=prefix,
        env={**os.environ, **(env or {}), **settings},
        check=False,
        timeout=TIMEOUT * 1000,
    )  # fmt: skip
    atomic.write_text(out / "runtests.log", proc.stdout + proc.stderr)
    if not junit.is_file():
        raise ClimstackError(
            f"MPICH's runtests wrote no {junit} (exit {proc.returncode}):\n"
            + (proc.stderr or proc.stdout)[-2000:],
            fix=f"read {out / 'runtests.log'}",
        )
    return read_junit(junit)


def read_junit(path: Path) -> list[Outcome]:
    """The outcomes runtests' JUnit file records (its test names: `N - ./dir/program ranks
    args`, read as `dir/program ranks args`)."""
    outcomes = []
    for case in ElementTree.parse(path).iter("testcase"):
        name = case.get("name", "").split(" - ", 1)[-1].strip().removeprefix("./")
        failure = case.find("failure")
        output = "" if failure is None else (failure.text or failure.get("message", ""))
        seconds = float(case.get("time") or 0)
        outcomes.append(Outcome(" ".join(name.split()), failure is None, seconds, output))
    return outcomes
