"""The benchmark verdicts hold (issue 48): runs are paired only within one batch (site, host,
job) and never merged; the mode order rotates; verdicts come from a confidence interval,
one rule for the table, the plot and the docs; a fresh --out; bad input refused before any
work with exit status 2; one catalogue row adds a mode. Each test is a negative control
that the old harness failed."""

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from climstack.bench.report import headline, plots, report, stats
from climstack.bench.results import collect, headers
from climstack.bench.run import catalogue, jobs, local, matrix
from climstack.bench.results.records import Record
from climstack.errors import EXIT_CODES
from climstack.inputs import sites

CLIMSTACK = PROJECT_ROOT / "bin" / "climstack"
DATA_BENCH = Path(__file__).parent / "data" / "bench"
OSU = """# OSU MPI Latency Test v7.4
# Size          Latency (us)
1                       {small:.2f}
16384                   {large:.2f}
"""


def climstack(*args, timeout=120):
    return subprocess.run(
        [CLIMSTACK, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def run(mode, repeat, small, large=10.0, order=0, **where) -> str:
    """One OSU latency run after its header line, as the runner and the jobs write it."""
    fields = {"benchmark": "osu", "mode": mode, "ranks": 2, "nodes": 1, **where}
    fields |= {"repeat": repeat} | ({"order": order} if order else {})
    return headers.header(fields) + "\n" + OSU.format(small=small, large=large)


def test_two_sites_sharing_mode_and_repeat_are_reported_apart(tmp_path):
    """Centre A ran native only, centre B bind only, both repeat 1 and 2: the old key
    (operation, size, mode, repeat) paired A's native with B's bind. Now each batch is its
    own row, and B's bind has no native to pair with."""
    (tmp_path / "a.out").write_text(
        run("native", 1, 2.0, site="archer2", host="ln01", job="11")
        + run("native", 2, 2.0, site="archer2", host="ln01", job="11")
    )
    (tmp_path / "b.out").write_text(
        run("bind", 1, 2.0, site="gaea", host="c6n1", job="22")
        + run("bind", 2, 2.0, site="gaea", host="c6n1", job="22")
        + run("native", 1, 1.0, site="gaea", host="c6n1", job="23")  # another job of B
    )
    records, failures, problems = collect.read_paths([tmp_path])
    assert not problems and len(records) == 10
    rows = headline.rows(records, failures)
    batches = {row.group.batch for row in rows}
    assert batches == {("archer2", "ln01", "11"), ("gaea", "c6n1", "22"), ("gaea", "c6n1", "23")}
    gaea = [row for row in rows if row.group.batch == ("gaea", "c6n1", "22")]
    assert {row.cells["bind"].verdict for row in gaea} == {"no native"}
    head, body = headline.table(rows)
    assert head[0] == "runs" and {line[0] for line in body} == {
        "archer2 · ln01 · job 11", "gaea · c6n1 · job 22", "gaea · c6n1 · job 23"
    }  # fmt: skip


def test_colliding_outputs_are_left_out_and_named_not_overwritten(tmp_path):
    """Two files saying the same batch, mode and repeat: the first is kept, the second is
    named under Left out with the fix (the old series dict kept whichever came last)."""
    (tmp_path / "1.out").write_text(run("native", 1, 2.0, site="x", job="7"))
    (tmp_path / "2.out").write_text(run("native", 1, 9.0, site="x", job="7"))
    records, _, problems = collect.read_paths([tmp_path])
    assert {r.value for r in records if r.bytes == 1} == {2.0}
    (problem,) = problems
    assert problem.path == str(tmp_path / "2.out") and str(tmp_path / "1.out") in problem.message
    assert "collide" in problem.message and "job=" in problem.fix
    proc = climstack("bench", "report", tmp_path)
    assert proc.returncode == 1 and "collide with" in proc.stderr


def test_only_rotated_runs_are_said_to_alternate(tmp_path):
    """The report says the runs were interleaved only when every header says its place in
    the order; outputs numbered by file order are said to be just that."""
    ordered = [run(m, r, 2.0, order=o, site="x", job="1") for m, r, o in
               (("native", 1, 1), ("bind", 1, 2), ("bind", 2, 1), ("native", 2, 2))]  # fmt: skip
    (tmp_path / "ordered.out").write_text("".join(ordered))
    (tmp_path / "bare.out").write_text(
        run("native", 1, 2.0, site="y") + run("bind", 1, 2.0, site="y")
    )
    records, failures, problems = collect.read_paths([tmp_path])
    text = report.markdown(records, failures, problems)
    assert "x · unknown · job 1: up to 2 repeats per mode; interleaved: each repeat ran" in text
    assert "y · unknown · job unknown: up to 1 repeat per mode; repeat numbers from the" in text
    assert "not recorded" in text and "A B A B" not in text


def test_the_mode_order_rotates_per_repeat():
    """Native ran first in every repeat; now each mode takes each place once over as many
    repeats as modes (a Latin square), and the runs say their place."""
    modes = ["native", "bind", "hybrid"]
    runs = matrix.runs([("osu", modes)], 3)
    firsts = [r.mode for r in runs if r.order == 1]
    assert firsts == ["native", "bind", "hybrid"]
    for mode in modes:
        assert sorted(r.order for r in runs if r.mode == mode) == [1, 2, 3]


@pytest.mark.parametrize(
    "ratios, verdict",
    [
        ([1.30, 1.32, 1.28], "30% slower"),  # consistent: the interval excludes 1
        ([0.5, 0.51, 0.49, 0.5], "2.0x faster"),
        ([1.0, 1.005, 0.995, 1.002, 0.998], "within 2%"),  # the interval inside 1 +- 0.02
        ([1.01, 1.03, 0.99], "inconclusive (3 repeats)"),  # the old rule: "within 3%"
        ([1.30, 0.90], "inconclusive (2 repeats)"),  # the old rule: "noisy"
        ([1.6], "inconclusive (1 repeat)"),  # the old rule: "1.6x slower (1 repeat)"
        # one outlier among consistent repeats widens the interval, it does not flip it
        ([1.30, 1.31, 1.29, 1.30, 1.05], "25% slower"),
    ],
)
def test_verdicts_come_from_the_interval(ratios, verdict):
    assert stats.estimate(ratios).verdict == verdict


def test_more_repeats_narrow_the_interval_they_never_make_noise():
    """The old `noisy` grew likelier with more repeats (the range only widens); the
    interval of the same effect narrows."""
    few = stats.estimate([1.10, 1.05, 1.15])
    many = stats.estimate([1.10, 1.05, 1.15] * 4)
    assert many.high - many.low < few.high - few.low
    assert few.verdict.startswith("inconclusive") and many.verdict == "10% slower"


def test_opposite_effects_across_sizes_are_flagged_not_averaged():
    """Small messages 30% slower, large ones 30% faster: the geometric mean over sizes is
    about 1; the cell names both effects."""
    records = []
    for repeat in (1, 2, 3):
        for mode, small, large in (("native", 1.0, 10.0), ("bind", 1.3, 7.7)):
            records += [
                Record(
                    "osu",
                    "allreduce",
                    size,
                    2,
                    1,
                    mode,
                    "none",
                    "x",
                    "latency",
                    value,
                    "us",
                    repeat,
                )  # fmt: skip
                for size, value in ((8, small * (1 + repeat / 1000)), (4096, large))
            ]
    [row] = headline.rows(records, [])
    cell = row.cells["bind"]
    assert abs(cell.ratio - 1) < 0.01
    assert cell.effects == "opposite effects: slower at 8 B, faster at 4096 B"
    assert cell.effects in headline.cell_text(cell)


def test_one_threshold_in_the_table_the_plot_and_the_docs(tmp_path):
    """`within 2%` is stats.WITHIN everywhere: the verdicts, the plot's band, the text
    under the headline and docs/benchmarks.md (the old plot drew +-2%, the table used 5%)."""
    assert stats.WITHIN == 0.02
    assert f"within 1 ± {stats.WITHIN:g}" in headline.EXPLAINED
    docs = (PROJECT_ROOT / "docs" / "benchmarks.md").read_text()
    assert stats.METHOD in docs and f"1 ± {stats.WITHIN:g}" in docs
    assert "every range spans 1" not in docs and "noisy" not in docs
    records = [
        Record("osu", "latency", 8, 2, 1, m, "none", "x", "latency", v * (1 + r / 100), "us", r)
        for r in (1, 2, 3)
        for m, v in (("native", 1.0), ("bind", 1.01))
    ]
    [row] = headline.rows(records, [])
    assert row.cells["bind"].verdict == "within 2%"  # 1.01 in every repeat: a zero-width interval
    path = plots.summary([row], tmp_path / "summary.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_adding_a_mode_is_one_catalogue_row(monkeypatch, tmp_path):
    """A new mode, one row: --modes takes it (locally and for --emit), the legend names it,
    the plots give it a colour, the emitted scripts run it on the plan its row names, and
    the local runner plans its runs."""
    row = catalogue.ModeRow(
        "bind-late", "bind, the host MPI loaded late", "container (late binding)", "bind"
    )
    monkeypatch.setattr(catalogue, "ROWS", [*catalogue.ROWS, row])
    assert local.mode_names("native,bind-late") == ["native", "bind-late"]
    assert ["bind-late", "bind, the host MPI loaded late", "container (late binding)"] in (
        catalogue.legend({"native", "bind-late"})
    )
    assert plots.colour("bind-late") != plots.colour("bind")
    seed = next(c for c in jobs.SEEDS if c.name == "osu-latency")
    comparison = replace(seed, ranks=2, nodes=1, modes=("native", "bind-late"))
    plans, failed = jobs.make_plans(sites.get("local"), tmp_path, Path("/"), ["bind-late"])
    assert not failed and plans["bind-late"].mode == "bind"
    text = jobs.script(sites.get("local"), comparison, plans, str(tmp_path / "img"), 2, {})
    assert "run_bind_late() {" in text and "bench bind-late 2 1" in text
    from climstack.bench.run import runner

    osu = [b for b in runner.LOCAL if b.name == "osu_latency"]
    assert [r.mode for r in runner.plan(osu, ["native", "bind-late"], 2)] == [
        "native", "bind-late", "bind-late", "native"
    ]  # fmt: skip


def test_bench_local_refuses_bad_input_before_any_work(tmp_path):
    """--repeats 0 ran nothing and exited 0; a mistyped --image started an image build at
    that path; a non-empty --out mixed old results into the report. Each is refused with
    exit status 2 and a fix, and nothing is written."""
    cases = [
        (["--repeats", "0"], "--repeats 0: at least 1"),
        (["--image", tmp_path / "imgae"], "no such image directory"),
        (["--modes", "native,bnid"], "unknown mode(s) bnid"),
        (["--force", "--resume"], "not allowed with argument"),
    ]
    for args, message in cases:
        proc = climstack("bench", "local", "--out", tmp_path / "out", *args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "out").exists() and not (tmp_path / "imgae").exists()
    old = tmp_path / "old"
    (old / "raw").mkdir(parents=True)
    (old / "raw" / "osu_latency.native.r1.out").write_text("an earlier run\n")
    proc = climstack("bench", "local", "--out", old, "--modes", "native")
    assert proc.returncode == 2 and "holds an earlier run's results" in proc.stderr
    assert "--force" in proc.stderr and "--resume" in proc.stderr
    assert (old / "raw" / "osu_latency.native.r1.out").read_text() == "an earlier run\n"
    # a command without --resume does not offer it (bench suite's fix named it, and the
    # rerun it advised failed on an unknown argument)
    proc = climstack("bench", "suite", "--out", old)
    assert proc.returncode == 2 and "holds an earlier run's results" in proc.stderr
    assert "--force" in proc.stderr and "--resume" not in proc.stderr


def test_exit_codes_are_one_table():
    """0 ok, 1 a negative verdict, 2 bad input, 3 a tool or program failed, 4 ok by the
    model alone: one table, in the code and in the docs."""
    assert sorted(EXIT_CODES) == [0, 1, 2, 3, 4]
    docs = (PROJECT_ROOT / "docs" / "exit-codes.md").read_text()
    for code in EXIT_CODES:
        assert f"| {code} |" in docs


def test_a_failed_program_exits_3_not_2(tmp_path):
    """A model that crashes read as "bad input" (every error exited 2); now a program's
    failure exits 3, naming the program and its output."""
    crash = tmp_path / "MOM6"
    crash.write_text("#!/bin/sh\necho 'FATAL: the ocean boiled' >&2\nexit 7\n")
    crash.chmod(0o755)
    proc = climstack(
        "run-case", "mom6-benchmark", tmp_path / "run", "--program", crash, "--ranks", "1"
    )
    assert proc.returncode == 3, proc.stderr
    assert "failed (exit 7)" in proc.stderr and "the ocean boiled" in proc.stderr


def test_one_ulp_in_one_output_reaches_the_report_and_the_exit_status(tmp_path):
    """The negative control of bit for bit: two run directories of a model (real NetCDF,
    real ocean.stats), one value one ulp apart. The runner's comparison writes `differs`,
    the report's headline cell says NOT bit-identical naming the variable, and `bench
    report` exits 1; the identical pair exits 0."""
    import netCDF4
    import numpy

    from climstack.bench.model import cases
    from climstack.bench.run import runner

    out = tmp_path / "out"
    runs = runner.work_root(out) / "mom6"
    for mode in ("native", "bind", "hybrid"):
        run_dir = runs / f"{mode}.r1"
        run_dir.mkdir(parents=True)
        (run_dir / "ocean.stats").write_text("  Step  Day  Energy/Mass\n  0  0.00  1.0E-12\n")
        (run_dir / cases.RECORD).write_text("{}\n")
        with netCDF4.Dataset(run_dir / "prog.nc", "w") as nc:
            nc.createDimension("x", 4)
            values = numpy.linspace(0.1, 0.4, 4)
            if mode == "bind":  # one ulp, in one place
                values[2] = numpy.nextafter(values[2], 1.0)
            nc.createVariable("temp", "f8", ("x",))[:] = values
    batch = runner.Batch.here(out)
    body = (DATA_BENCH / "mom6-native.out").read_text().split("\n", 1)[1]
    (out / "raw").mkdir()
    for mode in ("native", "bind", "hybrid"):
        fields = {"benchmark": "mom6", "mode": mode, "ranks": 128, "site": batch.site,
                  "host": batch.host, "job": batch.job, "repeat": 1, "order": 1}  # fmt: skip
        (out / "raw" / f"mom6.{mode}.r1.out").write_text(headers.header(fields) + "\n" + body)
    mom6 = [b for b in runner.LOCAL if b.name == "mom6"]
    runner.compare_models(mom6, out, batch)
    checks = {c.mode: c for c in collect.read_checks([out / "raw"])}
    assert checks["hybrid"].verdict == "bit-identical" and checks["bind"].verdict == "differs"
    assert "prog.nc:temp" in checks["bind"].detail
    proc = climstack("bench", "report", out / "raw", "--out", tmp_path / "report")
    assert proc.returncode == 1 and "NOT bit-identical to native" in proc.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    row = next(line for line in text.splitlines() if "| mom6 | Total runtime" in line)
    assert "NOT bit-identical (repeat 1: prog.nc:temp" in row and "bit-identical (1 run)" in row
    (out / "raw" / "mom6.bind.r1.out").unlink()
    shutil.rmtree(runs / "bind.r1")
    runner.compare_models(mom6, out, batch)
    proc = climstack("bench", "report", out / "raw", "--out", tmp_path / "again")
    assert proc.returncode == 0, proc.stderr
