"""Bit for bit, all of it (issue 48, finding 5): two run directories of a case (an
`ocean.stats` and NetCDF files written here by netCDF4, laid out as MOM6's: `prog.nc`
NetCDF-4 with a group, `RESTART/MOM.res.nc` 64-bit offset classic) compared by
climstack.bench.model.bitwise and `climstack compare-runs`. Each test changes one thing in one run
and fails on the comparison that looked at top-level variable data only: attributes,
dimensions, groups, NaN bit patterns, signed zeros, unreadable and missing outputs, files
without variables, and `run-case --against` checked before the model runs."""

import argparse
import re
import shutil
import subprocess
import time
from pathlib import Path

import netCDF4
import numpy
import pytest
from conftest import PROJECT_ROOT

from climstack.bench.model import bitwise, cases
from climstack.cli import run_case
from climstack.errors import ClimstackError, ToolFailure

CLIMSTACK = PROJECT_ROOT / "bin" / "climstack"
STATS = (
    "  Step,       Day,  Truncs,      Energy/Mass,      Maximum CFL,  Mean Sea Level\n"
    "       0,    0.000,     0, En 3.0726E-24, CFL  0.00000, SL -2.8527E-15\n"
    "       4,    0.042,     0, En 8.1640E-08, CFL  0.00424, SL -2.8527E-15\n"
)
RECORDS, X = 3, 8


def nan_with_payload(payload: int) -> numpy.float64:
    """A quiet NaN whose low mantissa bits hold `payload` (0: numpy's own NaN)."""
    return numpy.array([0x7FF8000000000000 | payload], dtype=numpy.uint64).view(numpy.float64)[0]


def write_prog(path: Path, history: str) -> None:
    """NetCDF-4 like a diag file: global attributes, an unlimited time, a variable with
    attributes, and a group (`ice`) with its own dimension, attribute and variable."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as data:
        data.setncatts({"title": "MOM benchmark Experiment", "history": history})
        data.createDimension("time", None)
        data.createDimension("xh", X)
        temp = data.createVariable("temp", "f8", ("time", "xh"))
        temp.setncatts({"units": "degC", "long_name": "Potential Temperature"})
        temp[...] = numpy.linspace(3.0, 27.0, RECORDS * X).reshape(RECORDS, X)
        ice = data.createGroup("ice")
        ice.setncattr("model", "SIS2")
        ice.createDimension("cat", 2)
        thick = ice.createVariable("thick", "f4", ("cat",))
        thick[...] = [0.5, 1.25]


def write_restart(path: Path) -> None:
    """A 64-bit offset classic file, as FMS writes MOM6's restart."""
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as data:
        data.createDimension("Time", None)
        data.createDimension("xh", X)
        temp = data.createVariable("Temp", "f8", ("Time", "xh"))
        temp[...] = numpy.cos(numpy.arange(X, dtype=numpy.float64))[None, :]


def make_run(path: Path, history: str = "written by run A") -> Path:
    """A run directory as `climstack run-case` leaves it: ocean.stats and NetCDF outputs."""
    (path / "RESTART").mkdir(parents=True)
    (path / "ocean.stats").write_text(STATS)
    write_prog(path / "prog.nc", history)
    write_restart(path / "RESTART" / "MOM.res.nc")
    return path


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    """Two runs with the same answers; their `history` differs (allowed)."""
    return make_run(tmp_path / "a"), make_run(tmp_path / "b", history="written by run B")


def edit(path: Path, change) -> None:
    """Apply change(dataset) to a NetCDF file in place (raw values: no mask, no scaling)."""
    with netCDF4.Dataset(path, "r+") as data:
        data.set_auto_maskandscale(False)
        change(data)


def compare_runs(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLIMSTACK, "compare-runs", a, b], capture_output=True, text=True, timeout=120
    )


def only_difference(a: Path, b: Path) -> str:
    comparison = bitwise.compare(a, b)
    assert len(comparison.differences) == 1, comparison.summary()
    return str(comparison.differences[0])


def test_identical_runs_compare_every_group_and_exit_0(runs):
    a, b = runs
    comparison = bitwise.compare(a, b)
    assert comparison.identical, comparison.summary()
    assert sorted(comparison.compared) == [
        "RESTART/MOM.res.nc:Temp", "ocean.stats", "prog.nc:ice/thick", "prog.nc:temp",
    ]  # fmt: skip
    proc = compare_runs(a, b)
    assert proc.returncode == 0, proc.stderr
    assert "bit-identical" in proc.stdout and "4 outputs and variables compared" in proc.stdout


def test_an_attribute_that_differs_is_named(runs):
    a, b = runs
    edit(b / "prog.nc", lambda data: data.setncattr("title", "another experiment"))
    assert only_difference(a, b) == (
        "prog.nc: global attribute 'title' differs: "
        "'MOM benchmark Experiment' vs 'another experiment'"
    )
    edit(b / "prog.nc", lambda data: data.setncattr("title", "MOM benchmark Experiment"))
    edit(b / "prog.nc", lambda data: data["temp"].setncattr("units", "K"))
    assert only_difference(a, b) == "prog.nc:temp: attribute 'units' differs: 'degC' vs 'K'"
    edit(b / "prog.nc", lambda data: data["ice"].setncattr("model", "CICE"))
    assert "prog.nc: group /ice: attribute 'model' differs: 'SIS2' vs 'CICE'" in map(
        str, bitwise.compare(a, b).differences
    )


def test_a_dimension_that_differs_is_named(runs):
    """A dimension no variable uses, and one that is unlimited in one run only (the data,
    their shapes and types the same)."""
    a, b = runs
    edit(b / "prog.nc", lambda data: data.createDimension("zl", 22))
    assert only_difference(a, b) == f"prog.nc: dimension 'zl' only in {b}"
    shutil.rmtree(b)
    make_run(b)
    with netCDF4.Dataset(b / "RESTART" / "MOM.res.nc", "w", format="NETCDF3_64BIT_OFFSET") as d:
        d.createDimension("Time", 1)  # fixed, not unlimited
        d.createDimension("xh", X)
        d.createVariable("Temp", "f8", ("Time", "xh"))[...] = numpy.cos(numpy.arange(X))[None]
    assert only_difference(a, b) == "RESTART/MOM.res.nc: dimension 'Time': 1 (unlimited) vs 1"


def test_a_variable_in_a_group_that_differs_is_named(runs):
    a, b = runs

    def one_ulp(data):
        thick = data["ice"]["thick"]
        thick[1] = numpy.nextafter(numpy.float32(1.25), numpy.float32(2))

    edit(b / "prog.nc", one_ulp)
    found = only_difference(a, b)
    assert found.startswith("prog.nc:ice/thick: data differ (max abs 1.19209e-07"), found
    assert found.endswith("at 1 of 2 places"), found


def test_nan_bit_patterns_that_differ_are_named_not_max_abs_0(runs):
    a, b = runs
    places = [(0, 1), (2, 5)]

    def nans(payload):
        def change(data):
            for place in places:
                data["temp"][place] = nan_with_payload(payload)

        return change

    edit(a / "prog.nc", nans(0))
    edit(b / "prog.nc", nans(0x5EED))
    with netCDF4.Dataset(b / "prog.nc") as data:  # the payload was written as it was given
        data.set_auto_maskandscale(False)
        assert data["temp"][0, 1].view(numpy.uint64) == 0x7FF8000000005EED
    found = only_difference(a, b)
    assert found == f"prog.nc:temp: NaN bit patterns differ at 2 of {RECORDS * X} places"
    assert "max abs" not in found
    edit(b / "prog.nc", nans(0))  # the same NaNs: no difference
    assert bitwise.compare(a, b).identical


def test_negative_zero_is_named_not_max_abs_0(runs):
    a, b = runs
    edit(a / "RESTART" / "MOM.res.nc", lambda data: data["Temp"].__setitem__((0, 3), 0.0))
    edit(b / "RESTART" / "MOM.res.nc", lambda data: data["Temp"].__setitem__((0, 3), -0.0))
    found = only_difference(a, b)
    assert found == (
        f"RESTART/MOM.res.nc:Temp: signed zeros differ (-0.0 vs 0.0) at 1 of {X} places"
    )


def test_nan_against_a_number_and_numbers_are_counted_apart():
    x = numpy.array([1.0, 2.0, 3.0, numpy.nan, -0.0])
    y = numpy.array([1.0, 2.5, numpy.nan, nan_with_payload(1), 0.0])
    found = bitwise.compare_arrays(x, y)
    assert (found.values, found.nan_vs_number, found.nan_patterns, found.zero_signs) == (
        2, 1, 1, 1,
    )  # fmt: skip
    assert str(found.difference("f.nc", "v")) == (
        "f.nc:v: data differ (max abs 0.5, max rel 0.2) at 1 of 5 places; NaN in one run only "
        "at 1 of 5 places; NaN bit patterns differ at 1 of 5 places; signed zeros differ "
        "(-0.0 vs 0.0) at 1 of 5 places"
    )
    assert bitwise.compare_arrays(x, x.copy()) is None


def test_one_ulp_in_one_variable_differs_exit_1_named(runs):
    """The negative control of the whole chain: one value one ulp off in one output."""
    a, b = runs

    def one_ulp(data):
        data["Temp"][0, 2] = numpy.nextafter(data["Temp"][0, 2], numpy.inf)

    edit(b / "RESTART" / "MOM.res.nc", one_ulp)
    ulp = numpy.spacing(abs(numpy.cos(2.0)))
    proc = compare_runs(a, b)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT bit-identical" in proc.stderr and "Traceback" not in proc.stderr
    assert f"RESTART/MOM.res.nc:Temp: data differ (max abs {ulp:.6g}, max rel" in proc.stderr
    assert f"at 1 of {X} places" in proc.stderr


@pytest.mark.parametrize("output", ["prog.nc", "RESTART/MOM.res.nc"])
def test_a_truncated_output_is_a_tool_failure_naming_it_exit_3(runs, output):
    """NetCDF-4 cut short does not open; classic cut short opens and reads zeros where the
    data are missing (libnetcdf), so its header tells the size it must have."""
    a, b = runs
    path = b / output
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ToolFailure, match=re.escape(f"{path} does not read as NetCDF")):
        bitwise.compare(a, b)
    proc = compare_runs(a, b)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert str(path) in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr and "NOT bit-identical" not in proc.stderr


def test_an_empty_or_corrupt_output_is_a_tool_failure_naming_it(runs):
    a, b = runs
    prog = a / "prog.nc"
    for content, why in (
        (b"", "an empty file (0 bytes)"),
        (b"CDF\x02" + bytes(3), "truncated within its header (7 bytes read)"),
        (b"not a NetCDF file" * 10, "NetCDF: Unknown file format"),
    ):
        prog.write_bytes(content)
        with pytest.raises(ToolFailure) as failure:
            bitwise.compare(a, b)
        assert failure.value.message.startswith(f"{prog} does not read as NetCDF: ")
        assert why in failure.value.message


def test_an_output_missing_from_one_run_is_a_tool_failure_naming_it(runs):
    a, b = runs
    (b / "RESTART" / "MOM.res.nc").unlink()
    (a / "ice.stats").write_text(STATS)
    with pytest.raises(ToolFailure) as failure:
        bitwise.compare(a, b)
    assert failure.value.message == (
        f"outputs missing: {b / 'RESTART/MOM.res.nc'} (written in {a}), "
        f"{b / 'ice.stats'} (written in {a})"
    )
    proc = compare_runs(a, b)
    assert proc.returncode == 3 and str(b / "RESTART/MOM.res.nc") in proc.stderr, proc.stderr


def test_a_file_without_variables_is_not_counted(runs):
    a, b = runs
    for run in runs:
        with netCDF4.Dataset(run / "Vertical_coordinate.nc", "w") as data:
            data.createDimension("Layer", 22)
            data.setncattr("title", "no variables")
    comparison = bitwise.compare(a, b)
    assert comparison.identical and len(comparison.compared) == 4, comparison.summary()
    assert not any(c.startswith("Vertical_coordinate.nc") for c in comparison.compared)
    # runs with nothing else: an empty ocean.stats and that file alone compare nothing
    for run in runs:
        shutil.rmtree(run / "RESTART")
        (run / "prog.nc").unlink()
        (run / "ocean.stats").write_text("")
    with pytest.raises(ToolFailure, match="nothing was compared"):
        bitwise.compare(a, b)


def test_not_a_run_directory_is_bad_input_exit_2(tmp_path, runs):
    a, _ = runs
    proc = compare_runs(a, tmp_path / "nowhere")
    assert proc.returncode == 2, proc.stderr
    assert f"{tmp_path / 'nowhere'} does not exist" in proc.stderr and "fix:" in proc.stderr


def test_run_case_against_no_run_directory_exits_2_before_the_model_runs(tmp_path):
    """`--program /bin/true` would 'run' at once and leave a run directory: the check of
    --against comes first, so nothing is prepared, launched or written."""
    run_dir = tmp_path / "run"
    for against in (tmp_path / "nonexistent", tmp_path):
        start = time.monotonic()
        proc = subprocess.run(
            [CLIMSTACK, "run-case", "mom6-benchmark", run_dir, "--program", "/bin/true"]
            + ["--against", against],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"{against} " in proc.stderr and "fix:" in proc.stderr
        assert not run_dir.exists(), "the run directory was prepared"
        assert time.monotonic() - start < 30


def test_a_mode_without_its_program_names_a_fix():
    """run-case's refusal when a mode lacks the model (Mode.locate's LookupError)."""
    case = cases.get("mom6-benchmark")

    def fix(mode: str, why: str) -> str:
        return run_case._locate_fix(argparse.Namespace(mode=mode), case, LookupError(why))

    assert "`climstack install local`" in fix("native", "mom6 is not installed")
    assert "--program PREFIX/bin/MOM6" in fix("native", "mom6 is not installed")
    stale = fix("bind", "mom6 is not in the image /x: no /opt/view/bin/MOM6")
    assert stale == "rebuild the image with `climstack image container-archer2 --force`"
    assert "`climstack verify PROGRAM" in fix("bind-noxpmem", "verify refuses /x under ...")


def test_check_raises_naming_the_difference(runs):
    a, b = runs
    assert bitwise.check(a, b).identical
    edit(b / "prog.nc", lambda data: data["temp"].__setitem__((1, 1), 99.0))
    with pytest.raises(ClimstackError, match="prog.nc:temp: data differ"):
        bitwise.check(a, b)
