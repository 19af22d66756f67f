"""The MPI-5 lane's Fortran side: mpif (libmpif.so.1, the image's own Fortran bindings over
the C ABI) under NetCDF-Fortran, FMS and MOM6 in the image of containers/mpi-abi. The image
check and verify know the layer, with a negative control for each refusal; the handle round
trip names Intel MPI 2021.18's defect; MOM6 runs unchanged on MPICH 5.0.2, Intel MPI 2021.19
and Open MPI 6.0.0rc2 with bit-identical outputs, in both layouts, and as a Slurm step."""

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

import slurm_cluster
from climstack.bench.abi import abi, abi_hosts, abi_model, abi_report
from climstack.bench.model import bitwise, cases
from climstack.bind import elf
from climstack.bind import plan as plans
from climstack.check import verify
from climstack.image import image, image_check
from climstack_dev.programs import spoiled_standard_plan

NAME = "container-mpi-abi"
MPIF_INFO = abi_model.PREFLIGHT


@pytest.fixture(scope="module")
def hosts():
    return {name: abi_hosts.host(name) for name in abi_hosts.MODEL_HOSTS}


@pytest.fixture(scope="module")
def planned(abi_image, hosts, tmp_path_factory):
    out = tmp_path_factory.mktemp("plans")
    return {name: (host, abi.host_plan(host, out, abi_image)) for name, host in hosts.items()}


def in_image(abi_image: Path, path: str) -> Path:
    """The host path of `path` in the image directory, its symlinks followed there."""
    return image_check.resolve_in(abi_image, Path(path))


# --- the image's Fortran side, as built


def test_every_fortran_program_calls_mpi_through_mpif_alone(abi_image):
    """Property (4) of the image check on the view: MOM6 and mpif_info load libmpif.so.1 and
    libmpi_abi.so.1, nothing of an implementation's Fortran."""
    files = image_check.scan(Path(abi.VIEW), sysroot=abi_image)
    by_name = {info.path.name: info for info in files}
    for name in ("MOM6", "mpif_info"):
        info = by_name[name]
        loads = image_check.needed_closure(info, files)
        assert {elf.MPIF_SONAME, "libmpi_abi.so.1"} <= loads, loads
        assert not loads.intersection(elf.IMPLEMENTATION_FORTRAN)
        assert image_check.problems(info, mpich=False, standard=True, loads=loads) == []
    mpif = next(f for f in files if f.soname == elf.MPIF_SONAME)
    assert mpif.needed and "libmpi_abi.so.1" not in mpif.needed  # the program brings it
    assert "MPI_Init" in mpif.mpi_imports() and "mpi_init_" in mpif.exports


def test_the_image_check_refuses_each_wrong_fortran_link(abi_image, tmp_path):
    files = image_check.scan(Path(abi.VIEW), sysroot=abi_image)
    model = next(f for f in files if f.path.name == "MOM6")
    loads = image_check.needed_closure(model, files)
    mpich_fortran = (loads - {elf.MPIF_SONAME}) | {"libmpifort.so.12"}
    assert image_check.fortran_problems(model, mpich_fortran) == [
        "loads libmpifort.so.12 (an MPI implementation's own Fortran)"
    ]
    assert image_check.fortran_problems(model, loads - {elf.MPIF_SONAME}) == [
        "calls MPI from Fortran without libmpif.so.1 (mpif)"
    ]
    both = loads | {"libmpifort_abi.so.1"}
    assert "two Fortran layers" in image_check.fortran_problems(model, both)[0]


# --- verify on the standard plan


def test_verify_accepts_the_mpif_programs_on_every_host(abi_image, planned):
    for name, (host, plan) in planned.items():
        for program in (abi_model.MODEL, MPIF_INFO):
            report = verify.check(program, plan, abi_image)
            assert report.passed, (host.title, program, report.problems)
            # libmpif's C imports, checked against the host's libmpi_abi.so.1
            assert report.imported > 1000 and not report.missing


@pytest.fixture
def relinked(abi_image, tmp_path):
    """A copy of the image's MOM6 in the image's /tmp, changed by patchelf: its image path;
    removed after the test."""
    copy = abi_image / "tmp" / f"{tmp_path.name}-MOM6"

    def make(*patchelf_args: str) -> str:
        shutil.copy2(in_image(abi_image, abi_model.MODEL), copy)
        subprocess.run(["patchelf", *patchelf_args, copy], check=True)
        return f"/tmp/{copy.name}"

    yield make
    copy.unlink(missing_ok=True)


def test_a_program_on_mpichs_own_fortran_library_is_refused(abi_image, planned, relinked):
    program = relinked("--replace-needed", elf.MPIF_SONAME, "libmpifort.so.12")
    report = verify.check(program, planned["mpich"][1], abi_image)
    assert not report.passed
    assert any("loads libmpifort.so.12, an MPI implementation's own" in p for p in report.problems)


def test_mpif_and_a_host_fortran_abi_in_one_process_are_refused(abi_image, planned, relinked):
    program = relinked("--add-needed", "libmpifort_abi.so.1")
    report = verify.check(program, planned["intel"][1], abi_image)
    assert not report.passed
    assert any("two Fortran MPI layers" in p and "mixed" in p for p in report.problems)


def test_a_host_abi_library_lacking_a_call_of_mpif_is_refused(abi_image, hosts, tmp_path):
    """libmpif's imports are checked like any object's: MPI_Comm_toint spoiled in a copy."""
    made = spoiled_standard_plan(
        Path(hosts["mpich"].prefix), tmp_path, "MPI_Comm_toint", "QPI_Comm_toint"
    )
    report = verify.check(abi_model.MODEL, made, abi_image)
    assert not report.passed and "MPI_Comm_toint" in report.missing


# --- the handle round trip and the runs


@pytest.fixture(scope="module")
def model_record(abi_image, planned, tmp_path_factory):
    """`bench abi`'s model lane on the four hosts: `make local`'s record of this image when
    there is one (abi.recorded: its comparisons made again from the runs' files), else one
    run."""
    recorded = abi.recorded(image.inputs_key(NAME))
    if recorded:
        return recorded["model"]
    return abi_model.compare(abi_image, tmp_path_factory.mktemp("model"), planned, repeats=1)


def test_the_preflight_names_intel_2021_18s_defect_and_keeps_its_row(model_record):
    hosts = model_record["hosts"]
    intel = hosts["intel"]
    assert intel["roundtrip"][0].startswith("MPI_Comm_fromint(MPI_Comm_toint(h)) != h")
    assert len(intel["roundtrip"]) == 6  # every user-created handle; the predefined pass
    assert "mpif_info failed" in intel["reason"] and "SIGSEGV" in intel["reason"]
    assert "the handle round trip fails" in intel["reason"] and "main_loop_s" not in intel
    for name in ("mpich", "intel-2021.19", "openmpi"):
        assert hosts[name]["reason"] == "" and hosts[name]["roundtrip"] == ["ok"], hosts[name]
        assert hosts[name]["loaded"] == f"{plans.LINKS_DIR}/libmpi_abi.so.1"
        assert all(t > 0 for t in hosts[name]["main_loop_s"])


def test_mom6_is_bit_identical_on_every_host_and_in_both_layouts(model_record, tmp_path):
    """The hosts with the standard ABI of their own and those through mpi_abi_wrapper."""
    running = ["intel-2021.19", "openmpi", *abi_hosts.WRAPPED]
    assert set(model_record["across_hosts"]) == {f"mpich vs {name}" for name in running}
    for found in model_record["across_hosts"].values():
        assert found["compared"] >= 3 and found["differences"] == [], found
    layout = model_record["layout"]
    assert layout["differences"] == [] and layout["compared"] >= 3
    table = abi_report.model_table(model_record)
    assert "refused: mpif_info failed" in table and "bit-identical to mpich" in table
    assert abi_report.model_status(model_record) == 0
    # the comparison's negative control: one value of one host's ocean.stats changed
    a, b = (Path(model_record["across_hosts"]["mpich vs openmpi"][k]) for k in ("a", "b"))
    changed = tmp_path / "changed"
    shutil.copytree(b, changed)
    lines = (changed / "ocean.stats").read_text().splitlines()
    lines[-1] = lines[-1][:-1] + ("1" if lines[-1][-1] != "1" else "2")
    (changed / "ocean.stats").write_text("\n".join(lines) + "\n")
    comparison = bitwise.compare(a, changed)
    assert not comparison.identical and "ocean.stats" in str(comparison.differences[0])
    record = {
        **model_record,
        "across_hosts": {"mpich vs openmpi": abi.compared_runs(a, changed)},
    }
    assert abi_report.model_status(record) == 1


def test_the_compatibility_table_has_fortran_rows(abi_image, model_record, tmp_path):
    """image ABI x host MPI x language: verify's verdicts computed, the runs' results."""
    results = {"hosts": {}, "ratios": {}, "image": str(abi_image), "model": model_record}
    rows = abi_report.compatibility(results, tmp_path, None, ["Fortran"])
    fortran = {r["host"]: r for r in rows if r["language"] == "Fortran"}
    assert fortran["MPICH 5.0.2"]["verdict"] == abi_report.CONFIRMED
    assert fortran["MPICH 5.0.2"]["ran"] == "MOM6 ran (the reference of the comparison)"
    assert fortran["Open MPI 6.0.0rc2"]["ran"].startswith("MOM6 bit-identical to mpich")
    assert fortran["Intel MPI 2021.18"]["ran"].startswith("refused by preflight: mpif_info")
    # a host without the standard ABI: through the mpi_abi_wrapper Spack built against it
    assert fortran["Debian's MPICH 4.0.2"]["verdict"] == abi_report.CONFIRMED
    assert fortran["Debian's MPICH 4.0.2"]["route"] == "wrapper"
    assert fortran["Debian's MPICH 4.0.2"]["ran"].startswith("MOM6 bit-identical to mpich")


def test_mom6_runs_in_the_image_as_a_slurm_step_on_mpich(abi_image, planned, tmp_path):
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian slurm-wlm, munge)")
    run_dir = cases.prepare(cases.get(abi_model.CASE), tmp_path / "run", abi_model.SETTINGS)
    host, plan = planned["mpich"]
    bound = dataclasses.replace(plan, binds=[*plan.binds, [str(run_dir), "/mnt"]])
    argv = ["/bin/sh", "-c", f"cd /mnt && exec {abi_model.MODEL}"]
    code, output = slurm_cluster.run_step(bound, abi_image, argv, tmp_path, timeout=600)
    assert code == 0, output[-3000:]
    clocks, ranks = cases.clock_table(output, str(tmp_path / "step.sbatch"))
    assert ranks == 2 and clocks[cases.MAIN_LOOP] > 0
    assert (run_dir / "ocean.stats").read_text().count("\n") >= 4
