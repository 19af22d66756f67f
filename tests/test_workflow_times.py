"""make local's record (climstack.stack.workflow_times): read back from the tables make local
prints, before the scheduler (steps) and after it (tasks), and shown as Markdown tables."""

import json
import subprocess

import pytest
from conftest import PROJECT_ROOT

from climstack import workflow
from climstack.errors import ClimstackError
from climstack.stack import build_times, workflow_times

#: make local's tables before the scheduler (steps one after another), under /usr/bin/time -v
BEFORE = """\
==> step 1 of 2: setup (then: stack builds: ARCHER2 image | native)
step                                   wall s     CPU s  CPU/wall
setup                                     499       722      1.45
stack builds: ARCHER2 image | native     1390      2478      1.78
total                                    1889      3200      1.69
slowest package builds                          wall s
adios2    images/container-archer2       498
mom6      spack-user-cache/installs      354
2 packages built, 852 s in all (side by side: overlapping)
\tUser time (seconds): 2900.50
\tSystem time (seconds): 310.25
\tElapsed (wall clock) time (h:mm:ss or m:ss): 31:40.12
"""


def after_output() -> str:
    """make local's tables as the scheduler and build_times print them now."""
    timings = [
        workflow.Timing("setup", 0.0, 120.0, 150.0),
        workflow.Timing("Apptainer", 120.0, 400.0, 580.0),
        workflow.Timing("ARCHER2 image", 130.0, 1300.0, 2200.0),
    ]
    builds = [build_times.Build("adios2", "images/container-archer2", 470.0)]
    return workflow.table(timings) + "\n" + build_times.table(builds) + "\n"


def test_a_run_before_the_scheduler_reads_as_steps_one_after_another():
    record = workflow_times.parse(BEFORE, "before", "empty")
    setup, builds, total = record["tasks"]
    assert (setup["start"], setup["wall"], setup["cpu"]) == (0.0, 499.0, 722.0)
    assert (builds["start"], builds["wall"]) == (499.0, 1390.0)
    assert total["name"] == "total" and total["start"] == 0.0
    assert record["builds"][0] == {"package": "adios2", "where": "images/container-archer2",
                                   "seconds": 498.0}  # fmt: skip
    assert record["built"] == {"count": 2, "seconds": 852.0}
    assert record["time"] == pytest.approx({"wall": 1900.12, "user": 2900.5, "system": 310.25})


def test_a_run_of_the_scheduler_reads_back_what_it_printed():
    record = workflow_times.parse(after_output(), "after", "empty")
    names = [t["name"] for t in record["tasks"]]
    assert names == ["setup", "Apptainer", "ARCHER2 image", "total"]
    assert record["tasks"][1] == {"name": "Apptainer", "start": 120.0, "wall": 400.0,
                                  "cpu": 580.0}  # fmt: skip
    assert record["tasks"][-1]["wall"] == 1430.0  # from the first start to the last end
    assert record["built"] == {"count": 1, "seconds": 470.0} and record["time"] == {}


def test_an_output_without_the_table_is_refused():
    with pytest.raises(ClimstackError, match="no table of make local's tasks or steps"):
        workflow_times.parse("==> step 1 of 9: setup\nerror: ...\n", "x", "empty")


def test_two_records_side_by_side_through_the_command(tmp_path):
    log = tmp_path / "after.log"
    log.write_text(after_output())
    before = tmp_path / "before.json"
    before.write_text(json.dumps(workflow_times.parse(BEFORE, "before", "empty")))
    climstack = str(PROJECT_ROOT / "bin" / "climstack")
    after = tmp_path / "after.json"
    made = subprocess.run(
        [climstack, "bench", "workflow", "--record", str(log), "--label", "after",
         "--cache", "empty", "--out", str(after)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    shown = subprocess.run(
        [climstack, "bench", "workflow", "--report", str(before), str(after)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "| adios2 | images/container-archer2 | 498 | 470 |" in lines
    assert "| mom6 | spack-user-cache/installs | 354 | - |" in lines
    # before: /usr/bin/time's totals; after: the table's total row
    assert "| wall | 31 min 40 s | 23 min 50 s | -470 s |" in lines
    assert "| CPU s (user + system) | 3211 | 2930 | -281 |" in lines
    bad = subprocess.run([climstack, "bench", "workflow", "--report", str(log)],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and f"{log}: not a record of make local" in bad.stderr


def test_two_builds_of_one_package_in_one_tree_are_two_rows():
    """The native stack and the CCE stand-in both build NetCDF-C into the user cache's tree:
    each build keeps its row (paired across runs by its place, slowest first)."""
    timings = [workflow.Timing("native stack", 0.0, 800.0, 700.0)]
    builds = [build_times.Build("netcdf-c", "spack-user-cache/installs", s) for s in (141, 108)]
    record = workflow_times.parse(
        workflow.table(timings) + "\n" + build_times.table(builds) + "\n", "run", "empty"
    )
    lines = workflow_times.builds_table([record, record])
    assert "| netcdf-c | spack-user-cache/installs | 141 | 141 |" in lines
    assert "| netcdf-c | spack-user-cache/installs | 108 | 108 |" in lines
