"""An image nobody here designed (Debian 12 + its own MPICH, programs built by Debian's
mpicc/mpifort with DT_RPATH at Debian's MPICH): verify refuses it naming the RPATH and the
remedies, and each remedy runs it on 2 ranks on the host's MPI under Charliecloud and
Apptainer, the image untouched; the trace shows which libmpich loaded."""

import subprocess

import pytest

from climstack.bind import plan as planner
from climstack.bind import remedy
from climstack.check import verify
from climstack.common.versions import release
from climstack.inputs import sites
from climstack.launch import launch, launchers, runtimes
from climstack_dev import foreign_image, old_loaders
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

C_PROBE = "/opt/foreign/bin/probe-rpath"
FORTRAN = "/opt/foreign/bin/fortran-rpath"
HOST_MPICH = f"{planner.LINKS_DIR}/libmpich.so.12"
NO_HOME = {"APPTAINER_NO_HOME": "1"}


@pytest.fixture(scope="module")
def foreign(image, tmp_path_factory):  # `image`: skips without Charliecloud
    copy = tmp_path_factory.mktemp("foreign") / "image"
    subprocess.run(["cp", "-al", str(foreign_image.foreign_image()), str(copy)], check=True)
    return copy


def plan_for(how, image, tmp_path, runtime=None):
    made = planner.make_plan(sites.get("local"), environ={}, rpath_remedy=how, runtime=runtime)
    made = planner.write(made, tmp_path / f"plan-{how}")
    CHARLIECLOUD.prepare_image(made, image)
    return made


def run(made, image, argv, runtime="charliecloud"):
    mpiexec = launchers.given(["mpiexec.mpich", "-n", "2"])
    return launch.launch(
        made,
        runtimes.get(runtime),
        mpiexec,
        image,
        argv,
        env={**NO_HOME, "LD_DEBUG": "libs"},
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("program", [C_PROBE, FORTRAN])
def test_refused_without_a_remedy_naming_the_rpath_and_the_remedies(program, foreign, tmp_path):
    report = verify.check(program, plan_for(None, foreign, tmp_path), foreign)
    assert report.picks["libmpi.so.12"]["rule"] == "RPATH"
    assert report.remedies == dict.fromkeys(remedy.REMEDIES, "")  # glibc 2.36: all apply
    assert any(
        f"DT_RPATH of {program}" in p and "--rpath-remedy preload | inhibit | runpath" in p
        for p in report.problems
    ), report.problems
    plain = run(plan_for(None, foreign, tmp_path), foreign, [program])
    assert plain.returncode == 0 and f"calling init: {HOST_MPICH}" not in plain.stderr


@pytest.mark.parametrize("how", remedy.REMEDIES)
def test_each_remedy_runs_it_on_the_host_mpi_under_charliecloud(how, foreign, tmp_path):
    made = plan_for(how, foreign, tmp_path)
    for program in (C_PROBE, FORTRAN):
        report = verify.check(program, made, foreign)
        assert report.passed and report.remedy == how, report.problems
        assert report.picks["libmpi.so.12"]["path"].startswith(planner.LINKS_DIR)
        proc = run(made, foreign, [program])
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"calling init: {HOST_MPICH}" in proc.stderr  # ld.so's own trace
        assert "calling init: /usr/lib/x86_64-linux-gnu/libmpich.so.12" not in proc.stderr
    assert "ranks: 2" in run(made, foreign, [C_PROBE]).stdout
    assert f"loaded: {HOST_MPICH}" in run(made, foreign, [C_PROBE]).stdout
    assert "fortran-rpath: rank 0 sum 3" in run(made, foreign, [FORTRAN]).stdout
    assert (foreign / C_PROBE.lstrip("/")).read_bytes() == (
        foreign_image.foreign_image() / C_PROBE.lstrip("/")
    ).read_bytes()  # the image is untouched; runpath's copy is in the plan directory


@pytest.mark.parametrize("how", remedy.REMEDIES)
def test_each_remedy_runs_it_on_the_host_mpi_under_apptainer(how, foreign, tmp_path):
    made = plan_for(how, foreign, tmp_path, runtime="apptainer")
    proc = run(made, foreign, [C_PROBE], runtime="apptainer")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"loaded: {HOST_MPICH}" in proc.stdout and "ranks: 2" in proc.stdout


def test_the_remedy_is_named_only_where_the_image_can_take_it():
    """glibc 2.28's ld.so has no --preload (new in 2.30); `--inhibit-rpath ''` is proven
    from 2.31 on; a library's RPATH is out of reach of inhibit and runpath."""
    old = (2, 28)
    assert "older than 2.30" in remedy.why_not("preload", old, ["/app"], "/app")
    assert "older than 2.31" in remedy.why_not("inhibit", old, ["/app"], "/app")
    assert remedy.why_not("runpath", old, ["/app"], "/app") == ""
    lib = ["/opt/lib/libnetcdf.so.19"]
    assert remedy.why_not("preload", (2, 36), lib, "/app") == ""
    assert "not in the executable" in remedy.why_not("inhibit", (2, 36), lib, "/app")
    assert "not in the executable" in remedy.why_not("runpath", (2, 36), lib, "/app")


def test_a_remedy_outside_bind_mode_is_refused_with_the_fix():
    with pytest.raises(Exception, match="is for bind mode"):
        planner.make_plan(sites.get("local"), mode="hybrid", environ={}, rpath_remedy="preload")


def test_the_newer_mpich_probe_is_refused_whatever_the_remedy(image, tmp_path):
    """A remedy overrides where the MPI comes from, never the MPICH base rule."""
    made = plan_for("preload", image, tmp_path)
    report = verify.check("/opt/probe/bin/mpi-probe-rpath", made, image)
    assert report.image_base == helpers.IMAGE_MPI
    assert any("newer MPICH series" in p for p in report.problems), report.problems


def test_the_glibc_floors_are_what_each_releases_own_loader_does():
    """Each reachable Debian release's ld.so, run as a program on a libc-free RPATH'd
    program (climstack_dev.old_loaders): RPATH beats --library-path, `--inhibit-rpath ''`
    names the main program (its path does not), --preload wins. The inhibit floor claims
    nothing below the oldest release measured (buster's 2.28 is not reachable here)."""
    measured = {s: r for s, r in old_loaders.measure().items() if "error" not in r}
    assert {"bullseye", "bookworm", "trixie"} <= set(measured)
    for suite, result in measured.items():
        assert result["library-path"]["who"] == "rpath", (suite, result)
        assert result["inhibit-other"]["who"] == "rpath", (suite, result)
        assert result["inhibit-rpath"]["who"] == "path", (suite, result)
        assert result["preload"]["who"] == "path", (suite, result)
    oldest = min(release(result["version"])[:2] for result in measured.values())
    assert remedy.NEEDS_GLIBC["inhibit"] >= oldest


def test_runpath_leaves_an_executable_without_rpath_as_it_is(image, tmp_path):
    made = plan_for("runpath", image, tmp_path)
    assert remedy.patched_copy(made, image, helpers.BASE_PROBE) == helpers.BASE_PROBE
    assert not any((tmp_path / "plan-runpath" / "remedy").iterdir())
