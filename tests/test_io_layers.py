"""The comparison of I/O layers and the host's ADIOS2 bound in.

benchio with ADIOS2 (Farr and Henty's) read in its real format, beside EPCC's older
benchio; the field's tables of the report; which modes run what. Then in the ARCHER2
image: ADIOS2's own adios2_iotest and bpls run there; `bind --with adios2` binds the
host's ADIOS2 (here the image's build copied out with the HDF5 it links, as a centre's
module tree holds one: a second ADIOS2 build for the host is not worth its CPU time),
verify checks its SONAMEs and symbols, benchio writes through it, and a host ADIOS2 of
another major (the same libraries renamed 3.0 by patchelf) or minor is refused."""

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path, PurePosixPath

import pytest
from conftest import needs_charliecloud

from climstack.bench.report import headline, seeds
from climstack.bench.results import collect, formats
from climstack.bench.run import catalogue, local, runner
from climstack.bench.results.records import Record
from climstack.bind import families, loader
from climstack.bind import plan as plans
from climstack.check import verify
from climstack.image import image, image_check
from climstack.inputs import sites
from climstack.launch import launch, launchers, runtimes

DATA = Path(__file__).parent / "data" / "bench"
CHARLIECLOUD = runtimes.get("charliecloud")
LAYERS = {"MPI-IO", "HDF5", "ADIOS2 BP4"}
BENCHIO = f"{image.VIEW}/bin/benchio"


def numbered(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text().splitlines(), start=1))


def test_benchio_with_adios2_reads_each_layer_and_the_engine_that_wrote():
    """A real output (bind mode, 2 ranks, this image): MPI-IO, HDF5 and ADIOS2 named by the
    engine adios2.xml chose; the rate in MiB/s from benchio's GiB/s."""
    lines = numbered(DATA / "benchio-adios2.out")
    assert formats.detect(lines) == "benchio-adios2"
    problems = []
    found = list(formats.FORMATS["benchio-adios2"].parse(lines, lambda *p: problems.append(p)))
    assert not problems
    rates = {m.operation: m for m in found if m.metric == "rate"}
    assert set(rates) == LAYERS
    assert all(m.unit == "MiB/s" and m.value > 0 and m.ranks == 2 for m in rates.values())
    assert rates["HDF5"].bytes == 2 * 128**3 * 8  # two ranks' 128^3 doubles
    # EPCC's older benchio (its banner too) stays its own format
    assert formats.detect(numbered(DATA / "benchio.out")) == "benchio"


def test_an_adios2_write_without_its_engine_or_garbled_is_a_problem(tmp_path):
    text = (DATA / "benchio-adios2.out").read_text()
    cases = {
        "no-engine.out": (
            "\n".join(line for line in text.splitlines() if "ADIOS2 engine" not in line),
            "without the `ADIOS2 engine =` line",
            {"MPI-IO", "HDF5"},
        ),
        "garbled.out": (
            text.replace("GiB/s", "GiB/s?", 1),
            "not a benchio write",
            {"HDF5", "ADIOS2 BP4"},
        ),
    }
    for name, (body, why, kept) in cases.items():
        (tmp_path / name).write_text(body)
        records, _, problems = collect.read_paths([tmp_path / name])
        assert any(why in p.message for p in problems), (name, problems)
        assert {r.operation for r in records} == kept, name


def test_the_io_layers_run_in_the_image_and_native_cce_runs_netcdf_bench_only():
    runs = runner.plan(list(runner.LOCAL), catalogue.names(local=True), 1)
    modes = {}
    for run in runs:
        modes.setdefault(run.benchmark, set()).add(run.mode)
    for engine in ("bp4", "bp5", "hdf5"):
        assert modes[f"benchio-adios2-{engine}"] == {"bind", "hybrid"}
    assert {"native-cce", "bind-host-netcdf-cray"} <= modes["netcdf-bench"]
    cce = {"native-cce", "bind-host-netcdf-cray"}  # the stand-in builds C only
    assert not any(cce & m for b, m in modes.items() if b != "netcdf-bench")
    assert local.needs_cce(["native"]) is False and local.needs_cce(["bind-host-netcdf-cray"])


def record(benchmark, operation, mode, value, repeat=1):
    return Record(benchmark, operation, None, 2, 1, mode, "none", "local", "rate", value,
                  "MiB/s", repeat)  # fmt: skip


def test_the_fields_tables_put_the_seed_beside_the_median():
    netcdf = [
        record("netcdf-bench", "write", mode, value, repeat)
        for mode, values in (
            ("native", (100, 110, 120)),
            ("native-cce", (90, 95, 99)),
            ("bind", (101,)),
            ("bind-host-netcdf", (104,)),
            ("bind-host-netcdf-cray", (98,)),
        )  # fmt: skip
        for repeat, value in enumerate(values, 1)
    ]
    layers = [
        record("benchio-adios2", op, mode, value)
        for op, value in (
            ("MPI-IO", 300),
            ("HDF5", 200),
            ("ADIOS2 BP4", 800),
            ("ADIOS2 BP5", 700),
            ("ADIOS2 HDF5", 150),
        )  # fmt: skip
        for mode in ("bind", "hybrid")
    ]
    head, rows = seeds.netcdf_table(netcdf)
    by = {row[0]: dict(zip(head, row)) for row in rows}
    assert by["native GNU"]["seed (MiB/s)"] == "1453" and by["native GNU"]["ours (MiB/s)"] == "110"
    assert by["native CCE"]["ours (MiB/s)"] == "95" and by["native CCE"]["repeats"] == "3"
    assert by["native CCE"]["ours / native"] == "0.86"
    assert by["container + host CCE NetCDF"]["seed (MiB/s)"] == "1464"
    head, rows = seeds.layers_table(layers)
    by = {row[0]: dict(zip(head, row)) for row in rows}
    assert by["ADIOS2 BP4"]["seed / HDF5"] == "4.12" and by["ADIOS2 BP4"]["bind / HDF5"] == "4.00"
    assert (
        by["MPI-IO"]["seed (GB/s)"] == "-" and by["ADIOS2 HDF5 engine"]["hybrid (MiB/s)"] == "150"
    )
    assert by["HDF5"]["seed (GB/s)"] == "3.23"
    assert seeds.blocks([])[:1] == []
    # a second batch (another job) gets its own tables: runs are never pooled across jobs
    other = [replace(r, job="4711", value=r.value * 2) for r in netcdf]
    section = seeds.blocks(netcdf + other)
    assert [b[1] for b in section if b[0] == "p" and b[1].startswith("Runs:")] == [
        "Runs: local · unknown · job unknown", "Runs: local · unknown · job 4711"
    ]  # fmt: skip
    tables = [b for b in section if b[0] == "table"]
    assert [dict(zip(t[1], t[2][0]))["ours (MiB/s)"] for t in tables] == ["110", "220"]
    # never run natively, the layers have no row in the headline (its ratios to native)
    assert headline.rows(layers, []) == [] and headline.rows(netcdf, [])


# --- in the image --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def archer2_image():
    if not shutil.which("ch-run"):
        pytest.skip(needs_charliecloud.kwargs["reason"])
    return image.build(local.IMAGE, image.default_destination(local.IMAGE))


def in_image(made, image_dir, argv, work: Path, ranks=2, env=None):
    """`argv` in the image under the plan `made`, on `ranks` ranks of the host's mpiexec,
    started in `work` (bound at its own path)."""
    work.mkdir(parents=True, exist_ok=True)
    made = replace(made, binds=[*made.binds, [str(work), str(work)]])
    CHARLIECLOUD.prepare_image(made, image_dir)
    given = launchers.given(launchers.get("mpiexec").argv(ranks))
    command = launch.command(made, CHARLIECLOUD, given, image_dir, argv, ranks, ranks, str(work))
    environ = {**os.environ, "USER": "root", **CHARLIECLOUD.env(home=False), **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=environ)


def plan_for(mode: str, directory: Path, families_asked=None) -> plans.Plan:
    made = plans.make_plan(
        sites.get("local"), mode, loader.View(), runtime="charliecloud",
        with_families=families_asked,
    )  # fmt: skip
    return plans.write(made, directory)


@needs_charliecloud
def test_adios2_iotest_and_bpls_run_in_the_image(archer2_image, tmp_path):
    """ADIOS2's own benchmark, built with the image's ADIOS2: two steps of a 3-D array per
    rank through BP5, then bpls reads the variable back."""
    work = tmp_path / "iotest"
    work.mkdir()
    (work / "w.txt").write_text(
        "group io_w\n  array double T 3 16 16 16 X Y Z\napp 1\n  steps 2\n  write out.bp io_w\n"
    )
    (work / "w.xml").write_text(
        '<?xml version="1.0"?>\n<adios-config>\n  <io name="io_w">\n'
        '    <engine type="BP5"/>\n  </io>\n</adios-config>\n'
    )
    made = plan_for("hybrid", tmp_path / "plan")
    iotest = f"{image.VIEW}/bin/adios2_iotest"
    argv = [iotest, "-a", "1", "-c", "w.txt", "-x", "w.xml", "-w", "-d", "2", "1", "1", "-t"]
    result = in_image(made, archer2_image, argv, work)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ADIOS IOTEST App 1 total time" in result.stdout
    listing = in_image(made, archer2_image, [f"{image.VIEW}/bin/bpls", "-l", "out.bp"], work, 1)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert "double   T" in listing.stdout and "2*{32, 16, 16}" in listing.stdout, listing.stdout


#: the libraries ADIOS2 links beside HDF5 (spack-packages 2026), in the image Debian 12's
ADIOS2_LIBRARIES = ("libyaml-cpp.so", "libpugixml.so")
DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu"


def host_adios2(image_dir: Path, root: Path, version: str | None = None) -> Path:
    """The image's ADIOS2 libraries and the HDF5, YAML and XML libraries they link, copied
    to `root`/lib as a centre's module tree holds them; `version`: renamed to that
    SOVERSION (patchelf), standing for another release."""
    lib = root / "lib"
    lib.mkdir(parents=True)
    view = image_check.resolve_in(image_dir, PurePosixPath(image.VIEW, "lib"))
    for name in sorted(p.name for p in view.iterdir()):
        if name.startswith(("libadios2_", "libhdf5.so")) and ".so." in name:
            real = image_check.resolve_in(image_dir, PurePosixPath(image.VIEW, "lib", name))
            shutil.copyfile(real, lib / name)
    for needed in elf_needed(lib / "libadios2_core.so.2.10"):  # its own libraries (Debian's)
        if needed.startswith(ADIOS2_LIBRARIES):
            real = image_check.resolve_in(image_dir, PurePosixPath(DEBIAN_LIB, needed))
            shutil.copyfile(real, lib / needed)
    if version:
        for path in sorted(lib.glob("libadios2_*.so.2.10*")):
            stem = path.name.split(".so.")[0]
            renamed = lib / f"{stem}.so.{version}"
            path.rename(renamed)
            subprocess.run(["patchelf", "--set-soname", renamed.name, renamed], check=True)
        for path in lib.glob("libadios2_*"):
            for needed in elf_needed(path):
                if needed.startswith("libadios2_") and needed.endswith(".so.2.10"):
                    new = needed.replace(".so.2.10", f".so.{version}")
                    subprocess.run(["patchelf", "--replace-needed", needed, new, path], check=True)
    return root


def elf_needed(path: Path) -> list[str]:
    from climstack.bind import elf

    return list(elf.read(path).needed)


@needs_charliecloud
def test_the_hosts_adios2_is_bound_checked_and_written_through(archer2_image, tmp_path):
    host = host_adios2(archer2_image, tmp_path / "host-adios2")
    assert families.find("adios2", loader.View(), None, {}, prefix=str(host)).libraries
    made = plan_for("bind", tmp_path / "plan", {"adios2": str(host)})
    report = verify.check(BENCHIO, made, archer2_image)
    assert report.passed, report.problems
    adios2 = report.families["adios2"]
    assert "libadios2_fortran_mpi.so.2.10" in adios2["from_host"] and not adios2["missing"]
    assert adios2["versions"] == {"image": ["2.10"], "host": ["2.10"]}
    work = tmp_path / "work"
    (work / "striped").mkdir(parents=True)
    (work / "adios2.xml").write_text(runner.adios2_xml("BP5"))
    argv = [BENCHIO, "32", "32", "32", "local", "adios", "striped"]
    result = in_image(made, archer2_image, argv, work, env={"LD_DEBUG": "libs"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ADIOS2 engine = BP5" in result.stdout and "GiB/s" in result.stdout
    assert f"calling init: {plans.LINKS_DIR}/libadios2_core_mpi.so.2.10" in result.stderr


@needs_charliecloud
def test_a_host_adios2_of_another_major_or_minor_is_refused(archer2_image, tmp_path):
    for version, refusal in (("3.0", "ADIOS2 major mismatch"), ("2.9", "SONAME mismatch")):
        host = host_adios2(archer2_image, tmp_path / version, version)
        made = plan_for("bind", tmp_path / f"plan-{version}", {"adios2": str(host)})
        report = verify.check(BENCHIO, made, archer2_image)
        assert not report.passed and any(refusal in p for p in report.problems), report.problems
        if version == "3.0":
            assert "Build the image against the host's ADIOS2 3.x" in " ".join(report.problems)
