"""The bit-for-bit claims the MPI-5 lane's tests read from `make local`'s `bench abi` record
(abi.recorded, issue 70, part 6): made again from the files the runs left beside abi.json,
by the comparing code of the tree under test, never read from the record (whose key
covers the image's inputs, not bench/abi or bench/model). Here on a record laid out as
`bench abi` leaves one, with real run directories and NetCDF files (netCDF4) that claim
bit-identical outputs: a changed file is found, a record without its runs is not read."""

import json
import shutil
from pathlib import Path

import netCDF4
import numpy
import pytest
from test_bitwise import edit, make_run

from climstack.bench.abi import abi, abi_hosts, abi_report
from climstack.errors import ToolFailure

KEY = "the-image-inputs"
#: the hosts of the model lane that ran MOM6 (Intel MPI 2021.18 is refused by preflight)
RAN = ("mpich", "intel-2021.19", "openmpi")
#: the record's claim of MOM6's outputs: bit-identical, as many compared as MOM6 writes
CLAIM = {"compared": 120, "differences": []}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CLIMSTACK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write_bench(path: Path) -> None:
    """A NetCDF file as NetCDF-Bench's bench.nc: one 3-D variable of floats."""
    path.parent.mkdir(parents=True)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as data:
        for name, size in zip(("t", "x", "y"), (2, 4, 4)):
            data.createDimension(name, size)
        variable = data.createVariable("data", "f4", ("t", "x", "y"))
        variable[...] = numpy.arange(32.0).reshape(2, 4, 4)


def make_record(cache: Path, when: str = "20261127-101500") -> Path:
    """bench/abi-<when>/ in the cache: abi.json saying every output is bit-identical, the
    NetCDF-Bench files and MOM6's run directories it names, the same data in each."""
    out = cache / "bench" / f"abi-{when}"
    for name in abi_hosts.NAMES:
        write_bench(abi.netcdf_file(out, name))
    mom6 = out / "model" / "mom6"
    runs = {name: make_run(mom6 / f"{name}-1") for name in RAN}
    layout = make_run(mom6 / "mpich-layout-2x1")
    native = make_run(mom6 / "native-1")
    record = {
        "image_key": KEY,
        "hosts": {name: {"title": name} for name in abi_hosts.NAMES},
        "netcdf": {f"mpich vs {name}": {"variables": 9, "differences": []}
                   for name in abi_hosts.NAMES[1:]},  # fmt: skip
        "model": {
            "hosts": {name: {"title": name, "reason": ""} for name in abi_hosts.MODEL_HOSTS},
            "across_hosts": {
                f"mpich vs {name}": {"a": str(runs["mpich"]), "b": str(runs[name]), **CLAIM}
                for name in RAN[1:]
            },
            "layout": {"host": "mpich", "layouts": ["1,2", "2,1"], "a": str(runs["mpich"]),
                       "b": str(layout), **CLAIM},  # fmt: skip
            "native": {
                "host": "mpich",
                "program": "/native/bin/MOM6",
                "a": str(native),
                "b": str(runs["mpich"]),
                **CLAIM,
            },
        },
    }
    (out / "abi.json").write_text(json.dumps(record, indent=2) + "\n")
    return out


def nudged(data) -> None:
    """The first value of the file's first float variable one bit up."""
    variable = next(v for v in data.variables.values() if v.dtype.kind == "f")
    values = numpy.array(variable[...])
    values.flat[0] = numpy.nextafter(values.flat[0], numpy.inf)
    variable[...] = values


def test_the_record_is_read_with_every_comparison_made_from_the_runs_files(cache):
    out = make_record(cache)
    record = abi.recorded(KEY)
    assert record["directory"] == str(out)
    assert set(record["netcdf"]) == {f"mpich vs {name}" for name in abi_hosts.NAMES[1:]}
    assert all(v["variables"] == 1 and not v["differences"] for v in record["netcdf"].values())
    model = record["model"]
    # ocean.stats, prog.nc's temp and ice/thick, the restart's Temp: counted here, not read
    for found in [*model["across_hosts"].values(), model["layout"], model["native"]]:
        assert found["compared"] == 4 and found["differences"] == [], found
    assert set(abi.model_pairs(model)) == {*model["across_hosts"], "layouts", "image vs native"}
    assert abi_report.status(record["netcdf"]) == abi_report.model_status(model) == 0
    assert abi.recorded("other-inputs") is None


def test_a_changed_output_fails_though_the_record_says_bit_identical(cache):
    """One value changed in one host's ocean.stats, one in the other layout's prog.nc and
    one in Open MPI's bench.nc, after the record was written: each pair differs, named."""
    out = make_record(cache)
    mom6 = out / "model" / "mom6"
    stats = mom6 / "openmpi-1" / "ocean.stats"
    stats.write_text(stats.read_text().replace("SL -2.8527E-15\n", "SL -2.8528E-15\n", 1))
    edit(mom6 / "mpich-layout-2x1" / "prog.nc", nudged)
    edit(abi.netcdf_file(out, "openmpi"), nudged)
    record = abi.recorded(KEY)
    model = record["model"]
    assert model["across_hosts"]["mpich vs intel-2021.19"]["differences"] == []
    [stats_differ] = model["across_hosts"]["mpich vs openmpi"]["differences"]
    assert stats_differ.startswith("ocean.stats: text differs from line 2")
    [layout_differs] = model["layout"]["differences"]
    assert layout_differs.startswith("prog.nc:temp: data differ (max abs")
    assert record["netcdf"]["mpich vs intel"]["differences"] == []
    [data_differ] = record["netcdf"]["mpich vs openmpi"]["differences"]
    assert data_differ.startswith("bench.nc:data: data differ")
    assert abi_report.status(record["netcdf"]) == abi_report.model_status(model) == 1
    assert model["native"]["differences"] == []
    table = abi_report.model_table(model)
    assert "DIFFERS from mpich: ocean.stats" in table and "2,1 on mpich: DIFFERENT" in table


def test_the_image_against_the_native_build_is_made_again_too(cache):
    """The image's MOM6 against the native build's: once written by `bench abi` and read
    back as it was; a changed native output now makes the record differ, and exit 1."""
    out = make_record(cache)
    stats = out / "model" / "mom6" / "native-1" / "ocean.stats"
    stats.write_text(stats.read_text().replace("SL -2.8527E-15\n", "SL -2.8528E-15\n", 1))
    model = abi.recorded(KEY)["model"]
    assert all(not pair["differences"] for pair in model["across_hosts"].values())
    [differs] = model["native"]["differences"]
    assert differs.startswith("ocean.stats: text differs from line 2")
    assert abi_report.model_status(model) == 1
    shutil.rmtree(out / "model" / "mom6" / "native-1")  # its runs gone: not read
    assert abi.recorded(KEY) is None


def test_a_record_whose_runs_are_gone_is_not_read(cache):
    """Its claims could not be made again: the newest record with its files is read, and
    with none, no record (the tests run the lane)."""
    older = make_record(cache, "20261126-090000")
    newer = make_record(cache, "20261127-101500")
    shutil.rmtree(newer / "model" / "mom6" / "openmpi-1")
    assert abi.recorded(KEY)["directory"] == str(older)
    abi.netcdf_file(older, "intel").unlink()
    assert abi.recorded(KEY) is None


def test_an_output_that_does_not_read_is_no_verdict(cache):
    out = make_record(cache)
    prog = out / "model" / "mom6" / "intel-2021.19-1" / "prog.nc"
    prog.write_bytes(prog.read_bytes()[:200])
    with pytest.raises(ToolFailure, match="prog.nc"):
        abi.recorded(KEY)
