"""verify: symbol by symbol, on real MPI libraries, then proven by running the programs."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from climstack import pins
from climstack.bind import elf, loader
from climstack.bind import plan as planner
from climstack.check import verdict, verify
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import cray_tree
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

#: tests that use the probe image skip through its fixture (conftest.image) without
#: Charliecloud; those reading ELF files or a synthetic tree run anyway
BIN = "/opt/probe/bin"


@pytest.fixture(scope="module")
def plans(image, tmp_path_factory):
    """Bind plans for the two MPICH hosts: Debian's 4.0.2 and PyPI's 3.4.3 (Cray MPICH 8's
    base), written and with their mount points in the image."""
    made = {}
    for name, prefix in (("debian", None), ("mpich-3.4.3", helpers.mpich("3.4.3").prefix)):
        plan = planner.make_plan(sites.get("local"), prefix=prefix and str(prefix), environ={})
        made[name] = planner.write(plan, tmp_path_factory.mktemp(name))
        CHARLIECLOUD.prepare_image(made[name], image)
    return made


def run_in(plan, image, program, mpi):
    return verify.run_probe(plan, image, program, [str(mpi.bin / "mpiexec"), "-n", "1"])


@pytest.mark.parametrize(
    "library, functions",
    [
        (("mpich-5.0.2", "lib/libmpi.so.12"), 707),
        (("impi-rt", "lib/libmpi.so.12"), 689),
        (("mpich-3.4.3", "lib/libmpi.so.12"), 406),
        ((None, "/usr/lib/x86_64-linux-gnu/libmpich.so.12"), 626),
    ],
)
def test_exported_mpi_functions_per_library(library, functions):
    wheel, path = library
    info = elf.read(helpers.wheel(wheel) / path if wheel else Path(path))
    assert len({s for s in info.mpi_exports() if s.startswith("MPI_")}) == functions


@pytest.mark.parametrize(
    "library, version",
    [
        (("mpich-5.0.2", "lib/libmpi.so.12"), "MPICH 5.0.2"),
        (("mpich-3.4.3", "lib/libmpi.so.12"), "MPICH 3.4.3"),
        (("impi-rt", "lib/libmpi.so.12"), "Intel MPI 2021.18.1 (ANL MPICH base 3.4a2)"),
        ((None, "/usr/lib/x86_64-linux-gnu/libmpich.so.12"), "MPICH 4.0.2"),
    ],
)
def test_mpich_base_read_from_the_library_without_running_it(library, version):
    wheel, path = library
    assert str(elf.mpich_version(helpers.wheel(wheel) / path if wheel else Path(path))) == version


def test_mpi4_program_refused_on_mpich_343_host_and_fails_as_predicted(image, plans):
    """The case of an MPICH-4 container on Cray MPICH 8.1 (ANL base 3.4a2)."""
    report = verify.check(f"{BIN}/mpi4", plans["mpich-3.4.3"], image)
    assert not report.passed
    assert report.missing == ["MPI_Info_create_env", "MPI_Isendrecv"]
    assert report.image_mpi == "MPICH 5.0.2" and report.host_mpi == "MPICH 3.4.3"
    proc = run_in(plans["mpich-3.4.3"], image, f"{BIN}/mpi4", helpers.mpich("3.4.3"))
    assert proc.returncode != 0
    assert "undefined symbol: MPI_Info_create_env" in proc.stderr


def test_host_mpi_needing_a_newer_glibc_is_refused_and_fails_as_predicted(image, tmp_path):
    """A host (Debian sid, glibc 2.41+) whose MPICH needs GLIBC_2.38 and newer, bound into
    our Debian 12 image (glibc 2.36): verify names the versions, and ld.so agrees."""
    view = loader.View(helpers.newer_glibc_host())
    plan = planner.write(planner.make_plan(sites.get("local"), view=view, environ={}), tmp_path)
    CHARLIECLOUD.prepare_image(plan, image)
    report = verify.check(f"{BIN}/mpi-probe", plan, image)
    assert not report.passed and "GLIBC_2.38" in report.glibc_missing
    assert f"need {', '.join(report.glibc_missing)} from the image's C library" in verdict.render(
        report
    )
    proc = verify.run_probe(plan, image, f"{BIN}/mpi-probe", [])
    refused = set(re.findall(r"version `(GLIBC_[\d.]+)' not found", proc.stderr))
    assert proc.returncode != 0 and "GLIBC_2.38" in refused, proc.stderr[-2000:]
    assert refused <= set(report.glibc_missing)  # ld.so names nothing verify did not


def test_mpi41_program_refused_on_debian_mpich_402_and_fails_as_predicted(image, plans):
    report = verify.check(f"{BIN}/mpi41", plans["debian"], image)
    assert report.missing == ["MPI_Status_set_source"]
    assert "lacks 1 MPI symbols the application imports: MPI_Status_set_source" in verdict.render(
        report
    )
    proc = run_in(plans["debian"], image, f"{BIN}/mpi41", helpers.debian_mpich())
    assert proc.returncode != 0 and "undefined symbol: MPI_Status_set_source" in proc.stderr


@pytest.mark.parametrize("host, series", [("debian", "4.0"), ("mpich-3.4.3", "3.4")])
def test_program_built_on_a_newer_mpich_refused_though_no_symbol_is_missing(
    host, series, image, plans
):
    """MPICH's ABI holds backward only. Until 2026-11 these tests accepted the MPI-3
    mpi-probe built on 5.0.2 on both hosts, because every symbol it imports is there;
    the handles and datatypes it passes are not checked by any symbol."""
    report = verify.check(f"{BIN}/mpi-probe", plans[host], image)
    assert report.missing == [] and report.image_base == "5.0.2"
    assert any(
        f"({report.image_mpi}) is of a newer MPICH series than the host's" in p
        and f"rebuild the image on an MPICH {series}.x" in p
        for p in report.problems
    ), report.problems
    assert "verdict: refused" in verdict.render(report)


def test_an_unknown_mpich_base_is_never_ok():
    report = verify.Report("/opt/app", image_mpi="", host_mpi="MPICH 4.0.2", host_base="4.0.2")
    verify._check_bases(report)
    assert (
        not report.passed and "cannot tell the MPICH base of the image's MPI" in report.problems[0]
    )


@pytest.mark.parametrize("host", ["debian", "mpich-3.4.3"])
def test_mpi3_program_accepted_and_really_loads_the_host_mpi(host, image, plans):
    report = verify.check(helpers.BASE_PROBE, plans[host], image)
    assert report.passed, report.problems
    assert report.picks["libmpi.so.12"]["path"] == f"{planner.LINKS_DIR}/libmpi.so.12"
    assert report.picks["libmpi.so.12"]["rule"] == "LD_LIBRARY_PATH"
    assert report.runpath == [f"{helpers.BASE_PREFIX}/lib"] and not report.rpath
    mpi = helpers.debian_mpich() if host == "debian" else helpers.mpich("3.4.3")
    proc = verify.run_probe(
        plans[host], image, helpers.BASE_PROBE, [str(mpi.bin / "mpiexec"), "-n", "2"]
    )
    probe = verify.parse_probe(proc.stdout)
    assert probe["library"].split()[-1] == report.host_mpi.split()[-1]
    assert probe["loaded"] == f"{planner.LINKS_DIR}/libmpi.so.12" and probe["ranks"] == "2"


def test_rpath_program_refused_with_the_reason(image, plans):
    report = verify.check(f"{BIN}/mpi-probe-rpath", plans["debian"], image)
    assert report.picks["libmpi.so.12"]["rule"] == "RPATH"
    assert any("DT_RPATH" in p and "--enable-new-dtags" in p for p in report.problems)
    assert any("not the host MPI" in p for p in report.problems)


def test_verify_reports_where_libxpmem_comes_from(cray_app):
    root, plan, executable = cray_app
    report = verify.check(executable, plan, root)
    assert report.picks["libxpmem.so.0"]["path"] == f"{planner.LINKS_DIR}/libxpmem.so.0"
    assert report.picks["libxpmem.so.0"]["host"].endswith("/opt/xpmem/lib64/libxpmem.so.0")
    assert report.host_mpi == "Cray MPICH 8.1.27.4 (ANL MPICH base 3.4a2)"
    assert report.missing == ["MPI_Comm_rank"]  # the synthetic Cray library lacks it


@pytest.fixture
def cray_app(tmp_path):
    """A synthetic Cray host and, in the same root as its image, an MPI executable linked
    against the image's libmpi.so.12 and its libxpmem.so.0 stub."""
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to compile the synthetic Cray libraries")
    root = cray_tree.cray_tree(tmp_path / "root")
    cray_tree.shared_library(root, "/opt/view/lib/libxpmem.so.0", "libxpmem.so.0")
    cray_tree.shared_library(
        root,
        "/opt/view/lib/libmpi.so.12",
        "libmpi.so.12",
        source="int MPI_Init(int *a, char ***b) { return 0; }\n"
        "int MPI_Comm_rank(int c, int *r) { return 0; }\n",
    )
    source = tmp_path / "app.c"
    source.write_text(
        "int MPI_Init(int *, char ***); int MPI_Comm_rank(int, int *);\n"
        "int main(void) { int r; MPI_Init(0, 0); return MPI_Comm_rank(0, &r); }\n"
    )
    executable = root / "opt/view/bin/app"
    executable.parent.mkdir(parents=True)
    lib = root / "opt/view/lib"
    subprocess.run(
        [
            "gcc",
            "-o",
            str(executable),
            str(source),
            str(lib / "libmpi.so.12"),
            "-Wl,--no-as-needed",
            str(lib / "libxpmem.so.0"),
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,/opt/view/lib",
        ],
        check=True,
    )
    plan = planner.write(
        planner.make_plan(sites.get("archer2"), view=loader.View(root), environ={}),
        tmp_path / "plan",
    )
    return root, plan, "/opt/view/bin/app"


def test_cli_exit_codes_and_run(image, plans):
    climstack = str(pins.PROJECT_ROOT / "bin" / "climstack")
    env = {**os.environ, **helpers.debian_mpich().env(), "USER": "root"}
    ok = subprocess.run(
        [
            climstack,
            "verify",
            helpers.BASE_PROBE,
            "--image",
            str(image),
            "--plan",
            plans["debian"].directory,
            "--run",
            "--launcher",
            "mpiexec -n 2",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "verdict: ok" in ok.stdout and "MPICH Version:\t4.0.2" in ok.stdout
    # the image's ld.so not asked: the model's ok alone starts nothing unless told to
    unasked = [*ok.args, "--no-oracle"]
    held = subprocess.run(unasked, capture_output=True, text=True, env=env)
    assert held.returncode == 4, held.stdout + held.stderr
    assert "run: not started: ok by the model alone: --no-oracle" in held.stdout
    assert "run: exit" not in held.stdout
    told = subprocess.run([*unasked, "--model-only"], capture_output=True, text=True, env=env)
    assert told.returncode == 4, told.stdout + told.stderr
    assert "run: --model-only: started on the model's ok alone" in told.stdout
    assert "run: exit 0; library: MPICH Version:\t4.0.2" in told.stdout
    refused = subprocess.run(
        [
            climstack,
            "verify",
            f"{BIN}/mpi41",
            "--image",
            str(image),
            "--plan",
            plans["debian"].directory,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert refused.returncode == 1 and "MPI_Status_set_source" in refused.stdout


needs_gfortran = pytest.mark.skipif(
    not shutil.which("gfortran"), reason="needs gfortran (Debian's mpich pulls it in)"
)


@needs_gfortran
def test_fortran_mpi41_call_refused_on_debian_mpich_and_fails_as_predicted(image, plans):
    """Fortran bindings count too: mpi_status_set_source_ is in Intel MPI's libmpifort (the
    program's MPI), not in Debian's libmpichfort 4.0.2 (the host's)."""
    report = verify.check(f"{BIN}/mpi41f", plans["debian"], image)
    assert report.missing == ["mpi_status_set_source_"], report.problems
    assert report.picks["libmpi.so.12"]["path"].startswith(f"{planner.LINKS_DIR}/")
    proc = run_in(plans["debian"], image, f"{BIN}/mpi41f", helpers.debian_mpich())
    assert proc.returncode != 0 and "undefined symbol: mpi_status_set_source_" in proc.stderr


@needs_gfortran
def test_fortran_mpi3_program_built_on_intel_runs_on_debian_mpich(image, plans):
    report = verify.check(f"{BIN}/mpi3f", plans["debian"], image)
    assert report.passed, report.problems
    assert {"mpi_init_", "mpi_comm_rank_", "mpi_finalize_"} <= set(
        elf.read(image / BIN.lstrip("/") / "mpi3f").mpi_imports()
    )
    proc = verify.run_probe(
        plans["debian"],
        image,
        f"{BIN}/mpi3f",
        [str(helpers.debian_mpich().bin / "mpiexec"), "-n", "2"],
    )
    assert proc.returncode == 0 and "mpi3f: 0" in proc.stdout, proc.stderr[-2000:]


def test_fortran_library_from_the_image_with_c_from_the_host_is_refused(image, plans):
    """PyPI's MPICH 3.4.3 has no Fortran library: the image's would be mixed with it."""
    if not (image / BIN.lstrip("/") / "mpi3f").exists():
        pytest.skip("needs gfortran (Debian's mpich pulls it in)")
    report = verify.check(f"{BIN}/mpi3f", plans["mpich-3.4.3"], image)
    assert not report.passed
    assert any("libmpifort.so.12" in p for p in report.problems), report.problems


def test_probe_image_key_covers_gfortran(monkeypatch, tmp_path):
    """Without gfortran the image has no mpi3f/mpi41f: it must be another cached image."""
    true = shutil.which("true")
    path = [d for d in os.environ["PATH"].split(":") if not Path(d, "gfortran").exists()]
    monkeypatch.setenv("PATH", ":".join(path))
    assert shutil.which("gfortran") is None
    without = helpers.probe_image_key()
    (tmp_path / "gfortran").symlink_to(true)
    monkeypatch.setenv("PATH", ":".join([str(tmp_path), *path]))
    assert helpers.probe_image_key() != without
