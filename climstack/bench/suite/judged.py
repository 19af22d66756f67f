"""The suite's outcomes judged against the expected failures (expected.yaml), both ways: a
failure not listed and a listed test that passed are both unexpected; a test that passes
natively on a host MPI and fails in the container on it is ours to explain, first."""

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from climstack.bench.suite.suite_run import Outcome, time_limit
from climstack.errors import ClimstackError

EXPECTED = Path(__file__).with_name("expected.yaml")
#: how a listed reason marks a test that fails only sometimes (a race of the test's own,
#: measured): its failure is expected, its pass is not held against the list
INTERMITTENT = "intermittent:"
#: a container-only stop at the time limit is the machine's when the native run took this
#: share of the limit already (tests of 3 and 4 ranks on 2 cores)
NEAR_LIMIT = 0.75
#: a container route -> the native route of the same ABI its outcomes are compared with
NATIVE_OF = {"bind": "native", "bind-abi": "native-abi"}


@dataclass
class Lane:
    """One host MPI and route: its outcomes and their judgement."""

    host: str
    route: str
    outcomes: list[Outcome]
    expected: dict[str, str]  # test -> why it fails
    not_built: int = 0  # tests the MPI it was built against could not compile
    too_many_ranks: int = 0  # tests of more ranks than a run takes here
    title: str = ""  # the host MPI as reports name it
    passed: int = 0
    failed: list[str] = field(default_factory=list)  # not listed
    expected_failures: list[str] = field(default_factory=list)  # listed, and failed
    unexpected_passes: list[str] = field(default_factory=list)  # listed, yet passed

    def __post_init__(self):
        for outcome in self.outcomes:
            why = reason(outcome.test, self.expected)
            listed = bool(why)
            if outcome.passed:
                self.passed += 1
                if listed and not why.startswith(INTERMITTENT):
                    self.unexpected_passes.append(outcome.test)
            elif listed or marked(outcome.test):
                self.expected_failures.append(outcome.test)
            else:
                self.failed.append(outcome.test)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unexpected_passes


def reason(test: str, expected: dict[str, str]) -> str:
    """Why `test` is listed ("": it is not): by its name, or by a pattern of the list's
    (`part/*`: every run of every test in part/, each of which then must fail)."""
    if test in expected:
        return expected[test]
    return next(
        (why for key, why in expected.items() if "*" in key and fnmatchcase(test, key)), ""
    )


def marked(test: str) -> bool:
    """Does MPICH's own testlist expect it to fail (`xfail=ticket3655`: its reason, a ticket
    of MPICH's)? Such a test failing is expected; passing, on an MPI that has since been
    fixed, it is not held against the list, which is MPICH's, not ours."""
    return any(word.startswith("xfail=") for word in test.split()[1:])


def expected(host: str, route: str, path: Path = EXPECTED) -> dict[str, str]:
    """The listed failures of `host` on `route`, each with its reason (checked)."""
    lists = yaml.safe_load(path.read_text()) or {}
    listed = (lists.get(host) or {}).get(route)
    if listed is None:
        raise ClimstackError(
            f"{path} has no list for host {host}, route {route}",
            fix=f"add `{host}: {{{route}: {{}}}}` (an empty list: every test must pass)",
        )
    unexplained = [test for test, why in listed.items() if not str(why or "").strip()]
    if unexplained:
        raise ClimstackError(
            f"{path}: {host}/{route} lists {', '.join(unexplained)} without a reason",
            fix="give each expected failure its reason",
        )
    return listed


def container_only(lanes: list[Lane]) -> list[tuple[str, str, str]]:
    """(host, route, test) of each test that passed natively on a host MPI and failed on
    it in a container route."""
    return [(lane.host, lane.route, test) for lane, test, _ in _container_only(lanes)]


def causes(lanes: list[Lane]) -> dict[tuple[str, str, str], str]:
    """Each container-only failure -> its named cause ("": none, a defect of ours): the
    reason its lane's list gives, or its time limit, where the native run already took
    NEAR_LIMIT of it (an oversubscribed machine's, not the image's)."""
    found = {}
    for lane, test, native in _container_only(lanes):
        stopped = next(o for o in lane.outcomes if o.test == test).timed_out
        limit = time_limit(test)
        near = stopped and native.seconds >= NEAR_LIMIT * limit
        at_limit = f"at its time limit: natively {native.seconds:.1f} s of {limit} s"
        found[(lane.host, lane.route, test)] = reason(test, lane.expected) or (
            at_limit if near else ""
        )
    return found


def unexplained(lanes: list[Lane]) -> list[tuple[str, str, str]]:
    """The container-only failures without a named cause: defects of ours."""
    return [where for where, cause in causes(lanes).items() if not cause]


def _container_only(lanes: list[Lane]) -> list[tuple[Lane, str, Outcome]]:
    """(container lane, test, the test's native outcome) of each container-only failure."""
    found = []
    for lane in (lane for lane in lanes if lane.route in NATIVE_OF):
        route = NATIVE_OF[lane.route]
        native = next((n for n in lanes if n.host == lane.host and n.route == route), None)
        if native is None:
            continue
        passed = {o.test: o for o in native.outcomes if o.passed}
        found += [(lane, o.test, passed[o.test]) for o in lane.outcomes
                  if not o.passed and o.test in passed]  # fmt: skip
    return found
