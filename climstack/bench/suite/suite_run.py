"""One run of MPICH's test suite by MPICH's own runner (`runtests`, the built tree's): each
test under the host MPI's launcher with its testlist's rank count and a time limit
(MPITEST_TIMEOUT, which Hydra's mpiexec enforces: a hang is a named failure), natively or
in an image through the bind plan (MPITEST_PROGRAM_WRAPPER: the runtime's per-rank command
of a job step, the test's directory bound in and the rank started there). Its JUnit file is
read back: test -> passed, or the failure's output."""

import os
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, replace
from pathlib import Path

from climstack.common import atomic, process
from climstack.errors import ClimstackError

#: seconds a test may run before it is stopped (runtests' default, 180, times out a hang
#: late; the suite's slowest tests here take under 20 s, oversubscribed)
TIMEOUT = 60
MAX_RANKS = 4  # a 2-core workstation: tests of more ranks are left out of a run, counted

#: how much of each end of a failure's output a record keeps (suite.json)
KEPT_ENDS = 1000


@dataclass(frozen=True)
class Outcome:
    test: str  # "coll/allred2 4": the testlist's directory, program, ranks and arguments
    passed: bool
    seconds: float
    output: str = ""

    @property
    def timed_out(self) -> bool:
        """Stopped at its time limit by the launcher, not a wrong result: in Hydra's words,
        or, where its words were lost with the killed ranks, failed at the limit."""
        stopped = not self.passed and self.seconds >= time_limit(self.test)
        return "APPLICATION TIMED OUT" in self.output or stopped


def time_limit(test: str) -> int:
    """The seconds runtests gives `test`: its testlist's timeLimit=, else TIMEOUT."""
    given = [word.split("=", 1)[1] for word in test.split() if word.startswith("timeLimit=")]
    return int(given[0]) if given else TIMEOUT


@dataclass(frozen=True)
class Planned:
    """The suite's tests as its testlists give them, for one run."""

    lines: list[str]  # "dir/program ranks [settings]", the ones to run
    too_many_ranks: list[str]  # more ranks than MAX_RANKS: left out (runtests would cap them)
    not_built: list[str]  # listed, but the MPI it was built against lacks what it calls

    def shard(self, index: int, count: int) -> "Planned":
        """Shard `index` (1-based) of `count`: every count-th test from the index-th, so each
        shard holds some of every directory (their tests' times differ by directory)."""
        return Planned(*(tests[index - 1 :: count] for tests in
                         (self.lines, self.too_many_ranks, self.not_built)))  # fmt: skip


def planned(prefix: Path, directory: str = "") -> Planned:
    """The tests the testlists under `prefix` list, read as runtests reads them (a line
    naming a directory is that directory's list), on at most MAX_RANKS ranks."""
    lines, too_many, not_built = [], [], []
    for line in (prefix / directory / "testlist").read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        name = f"{directory}/{words[0]}".lstrip("/")
        if (prefix / name).is_dir():
            inner = planned(prefix, name)
            lines, too_many = lines + inner.lines, too_many + inner.too_many_ranks
            not_built += inner.not_built
            continue
        test = " ".join([name, *words[1:]])
        ranks = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
        if ranks > MAX_RANKS:
            too_many.append(test)
        elif not (prefix / name).is_file():
            not_built.append(test)
        else:
            lines.append(test)
    return Planned(lines, too_many, not_built)


def run(
    prefix: Path, mpiexec: str, out: Path, wrapper: str = "", env=None, shard=(1, 1)
) -> list[Outcome]:
    """Every test of the suite installed at `prefix` on at most MAX_RANKS ranks (planned:
    one list, each test started from `prefix`), or those of `shard` (index, count), through
    `mpiexec` (the host MPI's launcher), each rank as `wrapper` starts it (nothing:
    natively); the runner's output and JUnit file kept in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    junit, listed = out / "junit.xml", out / "testlist"
    lines = planned(prefix).shard(*shard).lines
    atomic.write_text(listed, "\n".join(lines) + "\n")
    settings = {"MPITEST_TIMEOUT": str(TIMEOUT), "MPITEST_PROGRAM_WRAPPER": wrapper}
    proc = process.run(
        ["perl", str(prefix / "runtests"), f"-srcdir={prefix}", f"-tests={listed}",
         f"-mpiexec={mpiexec}", f"-junitfile={junit}"],
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
    return named(read_junit(junit), lines)


def named(outcomes: list[Outcome], lines: list[str]) -> list[Outcome]:
    """The outcomes named by the list's lines ("coll/allred2 4"): runtests starts each test
    in its directory and names it by its program alone; it reports them in the list's
    order, leaving out a line it skips (a newer MPI version than the MPI's). A test it runs
    from the top (`strict=FALSE`: "datatype/indexed_misc_oldapi 1") it names by its path."""
    found, at = [], 0
    for outcome in outcomes:
        program = Path(outcome.test.split()[0]).name
        while at < len(lines) and Path(lines[at].split()[0]).name != program:
            at += 1
        if at == len(lines):
            raise ClimstackError(
                f"runtests reported {outcome.test!r}, which the list does not hold next",
                fix="report it: the runner and this reading of it disagree",
            )
        found.append(replace(outcome, test=lines[at]))
        at += 1
    return found


#: what XML 1.0 cannot hold, which runtests copies from a test's output into its JUnit
#: file as it is (Open MPI's abort message ends in a NUL)
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def read_junit(path: Path) -> list[Outcome]:
    """The outcomes runtests' JUnit file records (its test names: `N - ./dir/program ranks
    args`, read as `dir/program ranks args`); a character XML cannot hold is read as its
    escape (`\\x00`)."""
    text = path.read_text(errors="backslashreplace")
    text = NOT_XML.sub(lambda m: m.group().encode("unicode_escape").decode(), text)
    outcomes = []
    for case in ElementTree.fromstring(text).iter("testcase"):
        name = case.get("name", "").split(" - ", 1)[-1].strip().removeprefix("./")
        failure = case.find("failure")
        output = "" if failure is None else (failure.text or failure.get("message", ""))
        seconds = float(case.get("time") or 0)
        outcomes.append(Outcome(" ".join(name.split()), failure is None, seconds, kept(output)))
    return outcomes


def kept(output: str, ends: int = KEPT_ENDS) -> str:
    """A failure's output as a record keeps it: its first and last `ends` characters (the
    error and the runner's verdict); the whole stays in the run's JUnit file."""
    if len(output) <= 2 * ends:
        return output
    left_out = f"[... {len(output) - 2 * ends} characters left out ...]"
    return f"{output[:ends]}\n{left_out}\n{output[-ends:]}"
