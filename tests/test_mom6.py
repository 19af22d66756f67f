"""GFDL's MOM6, a real climate model: our recipe passes Spack's audit, installs from
offline sources, runs MOM6-examples' ocean_only benchmark case (cases/, shortened) natively
on 2 ranks through `climstack run-case`; two runs compare bit-identical (`ocean.stats`,
every NetCDF variable's data), and so does the image's build run on the host MPI (bind
mode); a perturbed parameter and an altered output do not, and the comparison names the
variables that differ."""

import json
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

import netCDF4
import numpy
import pytest
from conftest import PROJECT_ROOT

from climstack import spack
from climstack.bench.model import bitwise, cases
from climstack.bench.run import modes
from climstack.errors import ClimstackError
from climstack.launch import launchers
from climstack.stack import environments, install

CLIMSTACK = PROJECT_ROOT / "bin" / "climstack"
#: 24 steps of DT = 900 s, 6 hours (the case writes ocean.stats and prog.nc every hour)
SHORT = {"DAYMAX": "0.25"}


@pytest.fixture(scope="module")
def mom6() -> str:
    """MOM6 as the local environment installs it from offline sources (`climstack install`:
    the source mirror filled with the archives of MOM6 with its submodules, of FMS and of
    FMS's recipe patch; a no-op once installed)."""
    program = install.install(environments.resolve("local"))["mom6"] / "bin" / "MOM6"
    assert program.is_file(), program
    return str(program)


def run_case(run_dir: Path, *options) -> str:
    """`climstack run-case` of the shortened case on 2 ranks; its output."""
    proc = subprocess.run(
        [CLIMSTACK, "run-case", "mom6-benchmark", run_dir, "--ranks", "2", *options]
        + [f"--set={key}={value}" for key, value in SHORT.items()],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def native(ranks: int = 2):
    return modes.native(launchers.get("mpiexec").argv(ranks), {}).wrap


@pytest.fixture(scope="module")
def two_runs(mom6, tmp_path_factory):
    """The shortened case run twice natively on 2 ranks: once through the command line
    (`climstack run-case`), once through cases.run."""
    top = tmp_path_factory.mktemp("mom6-runs")
    assert "mom6-benchmark (native): main loop" in run_case(top / "a", "--program", mom6)
    first = json.loads((top / "a" / cases.RECORD).read_text())
    second = cases.run(cases.get("mom6-benchmark"), top / "b", mom6, native(), SHORT)
    assert json.loads((top / "b" / cases.RECORD).read_text()) == asdict(second)
    return top, first, asdict(second)


def test_the_recipe_passes_spack_audit():
    proc = spack.run("audit", "packages", "mom6", env=environments.resolve("local"), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAILED" not in proc.stdout


def test_a_run_records_the_main_loop_time_and_its_outputs(two_runs):
    top, first, second = two_runs
    for record in (first, second):
        assert record["ranks"] == 2
        assert 0 < record["main_loop_s"] < record["wall_s"]
        assert record["clocks"]["Total runtime"] >= record["main_loop_s"]
        assert "ocean.stats" in record["digests"]
        assert any(name.endswith(".nc") for name in record["digests"])
    assert "#override DAYMAX = 0.25" in (top / "a" / "MOM_override").read_text()
    assert "#override NIGLOBAL = 180" in (top / "a" / "MOM_override").read_text()
    # time-stepped evidence: ocean.stats every model hour (0 to 6), prog.nc hours 1 to 6
    stats = (top / "a" / "ocean.stats").read_text().splitlines()
    assert len([line for line in stats if line.strip()[:1].isdigit()]) == 7
    with netCDF4.Dataset(top / "a" / "prog.nc") as prog:
        assert len(prog.dimensions["time"]) == 6


def test_two_native_runs_are_bit_identical(two_runs):
    top, first, second = two_runs
    comparison = bitwise.compare(top / "a", top / "b")
    assert comparison.identical, comparison.summary()
    assert "ocean.stats" in comparison.compared
    assert len([c for c in comparison.compared if ".nc:" in c]) >= 5
    assert first["digests"]["ocean.stats"] == second["digests"]["ocean.stats"]
    proc = subprocess.run(
        [CLIMSTACK, "compare-runs", top / "a", top / "b"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "bit-identical" in proc.stdout


def test_the_images_build_on_the_host_mpi_is_bit_identical_to_native(two_runs):
    """`run-case --mode bind`: the image's MOM6 (built in the image, on its MPICH 3.4.3 with
    its Fortran bindings) on the host's MPI bound in, verified before it runs, gives the
    local build's answers bit for bit (`--against` exits 1 otherwise)."""
    top, first, _ = two_runs
    out = run_case(top / "bind", "--mode", "bind", "--against", top / "a")
    assert "mom6-benchmark (bind): main loop" in out and "bit-identical" in out
    record = json.loads((top / "bind" / cases.RECORD).read_text())
    assert record["digests"]["ocean.stats"] == first["digests"]["ocean.stats"]


def test_under_apptainer_one_container_per_node_it_is_bit_identical_to_native(two_runs):
    """The same under Apptainer, the node's ranks in one container (`--sharens`, what job
    scripts and image modules write): the SIF mounted once, the answers unchanged."""
    top, first, _ = two_runs
    out = run_case(
        top / "sharens", "--mode", "bind", "--runtime", "apptainer", "--against", top / "a"
    )
    assert "mom6-benchmark (bind): main loop" in out and "bit-identical" in out
    assert "--sharens" in json.loads((top / "sharens" / cases.RECORD).read_text())["argv"]


def test_a_perturbed_parameter_fails_the_comparison_naming_the_variables(two_runs, mom6):
    """Vertical viscosity KV 1.0e-4 -> 1.1e-4: the model's answers change, and so must the
    verdict, loudly (exit 1), with each differing variable and its largest differences."""
    top, _, _ = two_runs
    settings = {**SHORT, "KV": "1.1E-04"}
    cases.run(cases.get("mom6-benchmark"), top / "kv", mom6, native(), settings)
    comparison = bitwise.compare(top / "a", top / "kv")
    assert not comparison.identical
    differing = {(d.path, d.variable) for d in comparison.differences}
    assert ("ocean.stats", None) in differing
    assert ("RESTART/MOM.res.nc", "u") in differing, comparison.summary()
    # the restart's checksum attribute of u differs too: its data's difference is named
    u = next(d for d in comparison.differences if d.variable == "u" and d.max_abs is not None)
    assert u.max_abs > 0 and 0 < u.max_rel <= 2
    with pytest.raises(ClimstackError, match="NOT bit-identical"):
        bitwise.check(top / "a", top / "kv")
    proc = subprocess.run(
        [CLIMSTACK, "compare-runs", top / "a", top / "kv"], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "NOT bit-identical" in proc.stderr
    assert "RESTART/MOM.res.nc:u: data differ (max abs" in proc.stderr


def test_an_altered_output_value_is_named(two_runs, tmp_path):
    """One value of one variable changed in the last bit: the data differ, not the stats."""
    top, _, _ = two_runs
    altered = tmp_path / "altered"
    shutil.copytree(top / "b", altered)
    with netCDF4.Dataset(altered / "RESTART" / "MOM.res.nc", "r+") as data:
        temp = data.variables["Temp"]
        temp.set_auto_maskandscale(False)
        values = numpy.array(temp[...])
        flat = values.reshape(-1)
        flat[flat.size // 2] = numpy.nextafter(flat[flat.size // 2], numpy.inf)
        temp[...] = values
    comparison = bitwise.compare(top / "a", altered)
    assert [(d.path, d.variable) for d in comparison.differences] == [
        ("RESTART/MOM.res.nc", "Temp")
    ], comparison.summary()
    assert 0 < comparison.differences[0].max_rel < 1e-15


def test_overrides_replace_the_case_line_and_add_new_ones():
    text = "! note\n#override DAYMAX = 1.0\n#override NIGLOBAL = 180\n"
    assert cases.overridden(text, {"DAYMAX": "0.25", "KV": "2e-4"}) == (
        "! note\n#override DAYMAX = 0.25\n#override NIGLOBAL = 180\n#override KV = 2e-4\n"
    )
    assert cases.parse_settings(["DAYMAX=0.5"]) == {"DAYMAX": "0.5"}
    for bad in ("DAYMAX", "daymax=1", "DAYMAX="):
        with pytest.raises(ClimstackError, match="is not KEY=VALUE"):
            cases.parse_settings([bad])


def test_a_run_directory_in_use_is_refused(tmp_path):
    (tmp_path / "ocean.stats").write_text("old\n")
    with pytest.raises(ClimstackError, match="is not empty"):
        cases.prepare(cases.get("mom6-benchmark"), tmp_path)
    with pytest.raises(ClimstackError, match="no case 'no-such-case'"):
        cases.get("no-such-case")


def test_bad_input_is_refused_before_anything_is_written(tmp_path):
    def refused(*args):
        proc = subprocess.run([CLIMSTACK, *map(str, args)], capture_output=True, text=True)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and "fix:" in proc.stderr
        return proc.stderr

    run_dir = tmp_path / "run"
    assert "no case 'nope'" in refused("run-case", "nope", run_dir, "--program", "/bin/true")
    assert "is not KEY=VALUE" in refused(
        "run-case", "mom6-benchmark", run_dir, "--program", "/bin/true", "--set", "DAYMAX"
    )
    assert "no such file" in refused(
        "run-case", "mom6-benchmark", run_dir, "--program", tmp_path / "MOM6"
    )
    assert "a container mode runs the image's build" in refused(
        "run-case", "mom6-benchmark", run_dir, "--mode", "bind", "--program", "/bin/true"
    )
    assert not run_dir.exists()
    assert "no run directory of a case" in refused("compare-runs", tmp_path, tmp_path)
