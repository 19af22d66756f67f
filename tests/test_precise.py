"""The precise profile (`bench local --precise`, run by `make bench`; issue "Native speed,
proven"): its procedure on outputs recorded from a real run on this kind of machine
(tests/data/precise: OSU latency, MOM6's clock table and the start-up rows, every mode
and repeat), and its two shims on real processes. The profile itself is a benchmark, not a
test: here only what it decides from what it measured."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
from conftest import PROJECT_ROOT

from climstack.bench.precise import coverage, profile, shims, stopping, summary
from climstack.bench.report import headline, stats, verdicts
from climstack.bench.results import collect

DATA = Path(__file__).parent / "data" / "precise"
RECORDED = json.loads((DATA / "recorded.json").read_text())
RULE = stopping.Rule(RECORDED["target"], RECORDED["min_repeats"], RECORDED["cap"])


def rows_up_to(raw: Path, benchmark: str, repeat: int) -> list[headline.Row]:
    """The headline of `benchmark`'s recorded runs of repeats 1..`repeat`, as the run saw it
    after that repeat."""
    files = [
        p
        for p in sorted(raw.glob(f"{benchmark}.*.r*.out"))
        if int(p.name.rsplit(".r", 1)[1][:-4]) <= repeat
    ]
    found = collect.read_paths(files)
    return headline.rows(found[0], found[1])


@pytest.mark.parametrize("benchmark", sorted(RECORDED["repeats"]))
def test_the_stopping_rule_replays_the_recorded_run(benchmark):
    """Replayed repeat by repeat, the rule stops each benchmark exactly where the run did:
    not before its cells are narrower than the target (or the cap)."""
    raw = DATA / "raw"
    stopped = next(
        n for n in range(1, RULE.cap + 1) if stopping.stop(rows_up_to(raw, benchmark, n), n, RULE)
    )
    assert stopped == RECORDED["repeats"][benchmark]
    final = rows_up_to(raw, benchmark, stopped)
    assert final and (stopped == RULE.cap or not stopping.open_cells(final, RULE))
    if stopped > RULE.min_repeats:  # the repeat before held a cell open
        assert stopping.open_cells(rows_up_to(raw, benchmark, stopped - 1), RULE)


def test_the_rule_on_cells_it_cannot_narrow():
    """Before MIN_REPEATS nothing stops; a failed cell does not hold a benchmark open; a
    wide one does, until the cap."""
    group = headline.Group(("local", "vm", "j"), "osu", "allreduce", 4)
    narrow = headline.Cell("within 2%", 1.0, 0.99, 1.01, repeats=5)
    wide = headline.Cell("inconclusive (5 repeats)", 1.0, 0.9, 1.1, repeats=5)
    row = headline.Row(group, [2], [], {"bind": narrow, "fabric": headline.Cell("failed")})
    rule = stopping.Rule(0.04, 5, 15)
    assert not stopping.stop([row], 4, rule) and stopping.stop([row], 5, rule)
    row.cells["hybrid"] = wide
    assert not stopping.stop([row], 14, rule) and stopping.stop([row], 15, rule)
    assert [(m, round(w, 3)) for _, m, w in stopping.open_cells([row], rule)] == [
        ("hybrid", 0.222)
    ]


def recorded_page(tmp_path, raw: Path) -> dict:
    return summary.build(raw.parent, RECORDED["repeats"], RULE, 0)


def test_the_control_is_judged_as_in_the_recorded_run(tmp_path):
    """The control (bind with clocks 5% fast) against bind: found (slower, its interval
    holding 1.05) in the rows where the run found it, MOM6's main loop among them; the
    launch of /bin/true is timed from outside, so not by its clocks. Every run pinned."""
    page = recorded_page(tmp_path, DATA / "raw")
    caught = {f"{r['benchmark']} {r['operation']}": r["control"]["caught"] for r in page["rows"]}
    assert caught == RECORDED["caught"]
    assert caught["mom6 main loop (model)"] and not caught["startup launch of /bin/true"]
    assert page["pinned"] == page["runs"] > 0


def test_the_control_without_its_effect_is_not_found(tmp_path):
    """Negative control of the control: its runs replaced by bind's of another repeat (no
    effect), it is found in no row. (No bind cell here says "within 2%" even ungated; the
    gate's own test, on data where one does: tests/test_precise_controls.py.)"""
    raw = tmp_path / "raw"
    shutil.copytree(DATA / "raw", raw)
    repeats = max(RECORDED["repeats"].values())
    for path in raw.glob(f"*.{profile.CONTROL}.r*.out"):
        benchmark, rest = path.name.split(f".{profile.CONTROL}.r")
        repeat = int(rest[:-4])
        other = raw / f"{benchmark}.bind.r{repeat % repeats + 1}.out"
        if other.is_file():
            text = other.read_text().replace("mode=bind ", f"mode={profile.CONTROL} ", 1)
            path.write_text(text.replace(f"repeat={repeat % repeats + 1} ", f"repeat={repeat} "))
    page = summary.build(tmp_path, RECORDED["repeats"], RULE, 0)
    assert not any(r["control"]["caught"] for r in page["rows"])
    said = [r["modes"]["bind"]["verdict"] for r in page["rows"]]
    assert "within 2%" not in said


def test_the_a_a_control_and_the_rules_effect_on_it(tmp_path):
    """Native against native: the recorded cells and the resampled rates are on the page;
    none of the 6 cells claims an effect, within the bound the resampled rates give (their
    Poisson binomial's 95% point: 2); the rule ends between MIN_REPEATS and the cap. A
    planted effect failing the bound: tests/test_precise_controls.py."""
    page = recorded_page(tmp_path, DATA / "raw")
    totals = summary.aa_totals(page)
    assert (totals["cells"], totals["claimed"], totals["unpaired"]) == (6, 0, 0)
    rates = [r["aa_rates"]["claims"] for r in page["rows"]]
    assert totals["bound"] == coverage.most_claims(rates) == 2 and totals["ok"]
    assert RULE.min_repeats <= totals["mean_repeats"] <= RULE.cap
    assert "at most 2 expected at 95% from the resampled rates: passed" in summary.markdown(page)


def test_resampling_finds_the_nominal_rate_and_a_known_effect():
    """On normal noise, a fixed number of repeats claims an effect that is not there at
    about the nominal 5%; a true 5% in 1% noise is claimed in every trial, never "within
    2%"; no effect in 0.5% noise is "within 2%" in every trial."""
    noise = list(numpy.random.default_rng(1).normal(0, 0.02, 200))
    none = coverage.rates(noise, RULE)
    assert 0.02 <= none["claims_fixed"] <= 0.09, none
    known = coverage.rates([x / 2 for x in noise], RULE, effect=1.05)
    assert known["claims"] == 1 and known["within"] == 0
    quiet = coverage.rates([x / 4 for x in noise], RULE)
    assert quiet["within"] == 1 and quiet["mean_repeats"] == RULE.min_repeats


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return shims.build(tmp_path_factory.mktemp("shims"))


CLOCKS = (
    "import time; a, b = time.monotonic(), time.time(); time.sleep(0.2); "
    "print(time.monotonic() - a, time.time() - b)"
)


@pytest.mark.parametrize("share", [0.0, profile.SLOWDOWN])
def test_the_slowdown_shim_runs_the_clocks_fast_by_its_share(built, tmp_path, share):
    """A real process sleeping 0.2 s measures 0.2 s x (1 + share) on its wall clocks."""
    argv = shims.prefix(built, tmp_path, share) + [sys.executable, "-c", CLOCKS]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    for measured in map(float, out):
        assert 0.2 * (1 + share) <= measured <= 0.2 * (1 + share) + 0.01, out


def test_the_affinity_probe_reads_the_pinning_from_inside(built, tmp_path):
    """Two ranks bound to a core each are seen pinned; unbound, they are not."""
    mpiexec = shutil.which("mpiexec.mpich") or shutil.which("mpiexec")
    for bind, expected in ((["-bind-to", "core"], True), (["-bind-to", "none"], False)):
        log = tmp_path / bind[1]
        log.mkdir()
        argv = [mpiexec, "-n", "2", *bind, *shims.prefix(built, log, 0), "/bin/true"]
        subprocess.run(argv, check=True, timeout=60)
        ranks = shims.read_affinity(log)
        assert sorted(ranks) == ["0", "1"], ranks
        assert shims.pinned(ranks, 2) is expected or os.cpu_count() < 2, ranks


def test_precise_refuses_options_it_cannot_honour():
    for extra in (["--modes", "bind"], ["--reuse"]):
        proc = subprocess.run(
            [PROJECT_ROOT / "bin" / "climstack", "bench", "local", "--precise", *extra],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and "--precise runs its own modes" in proc.stderr


def test_the_start_up_rows_are_read():
    found = collect.read_paths(sorted((DATA / "raw").glob("startup.native.r1.out")))
    records = {r.operation: r for r in found[0]}
    assert set(records) == {"launch", "MPI_Init"} and not found[2]
    assert records["launch"].unit == "s" and records["MPI_Init"].unit == "ms"
    assert math.isclose(records["launch"].resolution, 0.001)


def test_within_2_percent_needs_the_control_found_in_its_row():
    """The gate and the control's test, at their edges (verdicts.judge: every page's)."""
    within = stats.Estimate(1.0, 0.99, 1.01, 15)
    assert verdicts.judge(within, control=True) == "within 2%"
    assert verdicts.judge(within, control=False) == verdicts.NOT_CLAIMED
    assert verdicts.judge(within, control=None) == "within 2%"  # no control in the batch
    slower = stats.Estimate(1.03, 1.01, 1.05, 15)
    assert verdicts.judge(slower, control=False) == "3% slower"

    def control(low, high):
        return headline.Cell("-", (low * high) ** 0.5, low, high, repeats=15)

    assert verdicts.caught(control(1.01, 1.06)) and verdicts.caught(control(1.05, 1.05))
    assert not verdicts.caught(control(0.99, 1.06))  # not "slower"
    assert not verdicts.caught(control(1.01, 1.04))  # the known 5% outside it
    assert not verdicts.caught(None) and not verdicts.caught(headline.Cell("no pairs"))
