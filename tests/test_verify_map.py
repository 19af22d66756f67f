"""verify's verdicts come from the whole link map of the process, and the image's own
ld.so confirms it: each case below was `ok` (or refused for the wrong reason) when verify
read only the executable's own DT_NEEDED, and each is built for real into the probe image."""

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from climstack import pins
from climstack.bind import plan as planner
from climstack.check import verdict, verify
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")
APP = "/opt/app"
BASE_LIB = f"{helpers.BASE_PREFIX}/lib"  # the image's own MPICH 3.4.3
NETCDF = {"netcdf": "/usr"}  # Debian's NetCDF, a host family

SOURCES = {
    "app.c": "#include <mpi.h>\nint app_start(int *c, char ***v) { return MPI_Init(c, v); }\n"
    "int app_rank(void) { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }\n",
    "via-lib.c": "int app_start(int *, char ***); int app_rank(void);\n"
    "int main(int c, char **v) { app_start(&c, &v); return app_rank(); }\n",
    "linked-in.c": "int MPI_Init(int *c, char ***v) { return 0; }\n"
    "int MPI_Comm_rank(int comm, int *r) { *r = 0; return 0; }\n"
    "int main(int c, char **v) { int r; MPI_Init(&c, &v); return MPI_Comm_rank(0, &r); }\n",
    "helper.c": "int helper(void) { return 0; }\n",
    "with-helper.c": "#include <mpi.h>\nint helper(void);\n"
    "int main(int c, char **v) { MPI_Init(&c, &v); return helper(); }\n",
    "stub.c": "int MPI_Init(int *c, char ***v) { return 0; }\n",
    "plain-mpi.c": "#include <mpi.h>\nint main(int c, char **v) { return MPI_Init(&c, &v); }\n",
}


def gcc(image: Path, out: str, *args: str, mpi=True) -> str:
    target = image / out.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = [f"-I{helpers.mpich('3.4.3').prefix}/include"] if mpi else []
    proc = subprocess.run(
        ["gcc", *flags, "-o", str(target), *args], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def app(image, tmp_path_factory):
    """Programs nobody here would write on purpose, built into the probe image copy."""
    src = tmp_path_factory.mktemp("src")
    for name, text in SOURCES.items():
        (src / name).write_text(text)
    wheel = str(helpers.mpich("3.4.3").lib)
    lib = image / APP.lstrip("/") / "lib"
    rpath, runpath = "-Wl,--disable-new-dtags", "-Wl,--enable-new-dtags"
    gcc(image, f"{APP}/lib/libapp.so", "-shared", "-fPIC", str(src / "app.c"), f"-L{wheel}",
        "-lmpi", rpath, f"-Wl,-rpath,{BASE_LIB}", "-Wl,-soname,libapp.so")  # fmt: skip
    gcc(image, f"{APP}/bin/via-lib", str(src / "via-lib.c"), f"-L{lib}", "-lapp", runpath,
        f"-Wl,-rpath,{APP}/lib", f"-Wl,-rpath-link,{wheel}")  # fmt: skip
    gcc(image, f"{APP}/bin/linked-in", str(src / "linked-in.c"), mpi=False)
    gcc(image, f"{APP}/lib/libhelper.so", "-shared", "-fPIC", str(src / "helper.c"),
        "-Wl,-soname,libhelper.so")  # fmt: skip
    for name, tags in (("runpath-helper", runpath), ("rpath-helper", rpath)):
        gcc(image, f"{APP}/bin/{name}", str(src / "with-helper.c"), f"-L{wheel}", f"-L{lib}",
            "-lmpi", "-lhelper", tags, f"-Wl,-rpath,{BASE_LIB}:{APP}/lib")  # fmt: skip
    for name in ("libmpichcxx.so.12", "libmpi.so.40"):  # another MPI's files, as stubs
        gcc(image, f"{APP}/other/{name}", "-shared", "-fPIC", str(src / "stub.c"),
            f"-Wl,-soname,{name}", mpi=False)  # fmt: skip
    other = image / APP.lstrip("/") / "other"
    gcc(image, f"{APP}/bin/with-cxx", str(src / "plain-mpi.c"), f"-L{wheel}", "-lmpi",
        "-Wl,--no-as-needed", str(other / "libmpichcxx.so.12"), runpath,
        f"-Wl,-rpath,{BASE_LIB}:{APP}/other")  # fmt: skip
    gcc(image, f"{APP}/bin/open-mpi", str(src / "plain-mpi.c"), str(other / "libmpi.so.40"),
        runpath, f"-Wl,-rpath,{APP}/other")  # fmt: skip
    return image


def ready(made, image, tmp_path, name="plan"):
    made = planner.write(made, tmp_path / name)
    CHARLIECLOUD.prepare_image(made, image)
    return made


def plan_for(image, tmp_path, **options):
    name = "-".join(f"{k}" for k in options) or "plan"
    return ready(
        planner.make_plan(sites.get("local"), environ={}, **options), image, tmp_path, name
    )


@pytest.mark.parametrize("families", [None, NETCDF])
def test_mpi_reached_through_a_library_is_refused_naming_it(app, tmp_path, families):
    """via-lib needs only libapp.so, whose DT_RPATH reaches the image's own MPICH."""
    made = plan_for(app, tmp_path, **({"with_families": families} if families else {}))
    report = verify.check(f"{APP}/bin/via-lib", made, app, runtime_image=app)
    assert not report.ok and report.oracle == "agrees", (report.oracle, report.problems)
    assert any(
        f"the image's own {BASE_LIB}/libmpi.so.12 (RPATH of {APP}/lib/libapp.so)" in p
        for p in report.problems
    ), report.problems
    assert not any("does not use MPI" in p for p in report.problems)
    assert report.picks["libmpi.so.12"]["whose"] == f"{APP}/lib/libapp.so"
    # Debian's libmpich.so.12 preloaded does not answer libapp's libmpi.so.12 (SONAMEs)
    assert f"{BASE_LIB}/libmpi.so.12" in report.remedies["preload"]


@pytest.mark.parametrize("families", [None, NETCDF])
def test_mpi_linked_into_the_program_is_refused_by_name(app, tmp_path, families):
    made = plan_for(app, tmp_path, **({"with_families": families} if families else {}))
    report = verify.check(f"{APP}/bin/linked-in", made, app)
    assert any(
        f"{APP}/bin/linked-in defines MPI_Init (in its symbol table): MPI linked into it" in p
        for p in report.problems
    ), report.problems
    assert not any("does not use MPI" in p for p in report.problems)


def test_a_stripped_program_with_mpich_linked_in_is_refused_by_its_banner(app, tmp_path):
    """Debian's libmpich.a, statically, and stripped: no symbol left to name it."""
    source = tmp_path / "static.c"
    source.write_text(SOURCES["plain-mpi.c"])
    program = gcc(app, f"{APP}/bin/static", str(source), "-I/usr/include/x86_64-linux-gnu/mpich",
                  "/usr/lib/x86_64-linux-gnu/libmpich.a", "-lhwloc", "-lucp", "-lucs", "-s",
                  mpi=False)  # fmt: skip
    report = verify.check(program, plan_for(app, tmp_path, with_families=NETCDF), app)
    assert any(
        "holds an MPI library's banner 'MPIR_CVAR_' (stripped): MPI linked into it" in p
        for p in report.problems
    ), report.problems


def test_inhibit_drops_the_programs_runpath_too_and_the_loader_agrees(app, tmp_path):
    """glibc's --inhibit-rpath '' ignores DT_RUNPATH as well: libhelper.so is then lost."""
    program = f"{APP}/bin/runpath-helper"
    plain = verify.check(program, plan_for(app, tmp_path), app, runtime_image=app)
    assert plain.ok and plain.oracle == "agrees", plain.problems
    made = plan_for(app, tmp_path, rpath_remedy="inhibit")
    report = verify.check(program, made, app, runtime_image=app)
    assert not report.ok and report.oracle == "agrees", (report.oracle, report.problems)
    assert f"the loader finds no libhelper.so (needed by {program})" in report.problems


def test_remedy_advice_comes_from_the_link_map_under_each_remedy(app, tmp_path):
    """rpath-helper's DT_RPATH reaches both the image's MPICH and libhelper.so: inhibit
    would lose libhelper.so, preload would not replace libmpi.so.12 (Debian's SONAME is
    libmpich.so.12); only runpath runs it on the host MPI, and the loader agrees."""
    program = f"{APP}/bin/rpath-helper"
    report = verify.check(program, plan_for(app, tmp_path), app)
    assert report.remedies["inhibit"] == "the loader finds no libhelper.so"
    assert report.remedies["runpath"] == ""
    assert report.remedies["preload"].startswith("under the plan the loader picks the image's")
    assert any("--rpath-remedy runpath)" in p for p in report.problems), report.problems
    made = plan_for(app, tmp_path, rpath_remedy="runpath")
    remedied = verify.check(program, made, app, runtime_image=app)
    assert remedied.ok and remedied.oracle == "agrees", (remedied.oracle, remedied.problems)


def test_an_image_mpi_library_of_another_spelling_is_mixed_mpi(app, tmp_path):
    """Debian's C++ binding is libmpichcxx.so.12; the image's would run beside the host's
    libmpi (PyPI's MPICH 3.4.3 as the host has no C++ library to bind)."""
    made = plan_for(app, tmp_path, prefix=str(helpers.mpich("3.4.3").prefix))
    report = verify.check(f"{APP}/bin/with-cxx", made, app)
    assert any(
        f"the image's own {APP}/other/libmpichcxx.so.12 (RUNPATH of {APP}/bin/with-cxx)" in p
        and "(mixed MPI libraries)" in p
        for p in report.problems
    ), report.problems


def test_an_open_mpi_program_is_refused_saying_so(app, tmp_path):
    report = verify.check(f"{APP}/bin/open-mpi", plan_for(app, tmp_path), app)
    assert not report.passed
    assert "Open MPI (libmpi.so.40)" in report.problems[0], report.problems
    assert "built for the MPICH ABI" not in report.problems[0]


@pytest.mark.parametrize("base", ["x3.4", "5", "unknown"])
def test_an_image_mpich_base_without_major_minor_is_never_compared(base):
    report = verify.Report("/opt/app", image_mpi=f"MPICH {base}", image_base=base,
                           host_mpi="MPICH 4.0.2", host_base="4.0.2")  # fmt: skip
    verify._check_bases(report)
    assert (
        not report.passed and "cannot tell the MPICH base of the image's MPI" in report.problems[0]
    )


def climstack(*args):
    env = {**os.environ, **helpers.debian_mpich().env(), "USER": "root"}
    command = [str(pins.PROJECT_ROOT / "bin" / "climstack"), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def test_without_a_plan_verify_never_says_ok(app):
    proc = climstack("verify", f"{helpers.BASE_PROBE}", "--image", app)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: not checked" in proc.stdout and "verdict: ok" not in proc.stdout
    assert "NOT CHECKED: no --plan" in proc.stdout


def test_run_of_a_refused_plan_never_starts(app, tmp_path):
    """mpi-probe-rpath loads the image's MPICH 5.0.2 whatever the plan binds: verify refuses
    it, so --run does not start it (it once ran and printed "MPICH Version: 5.0.2"), not even
    with --model-only; a run that did load the image's MPI is refused by its `loaded:` line."""
    made = plan_for(app, tmp_path)
    mpiexec = helpers.mpich("5.0.2").bin / "mpiexec"
    for override in ([], ["--model-only"]):
        launcher = ["--launcher", f"{mpiexec} -n 1"]
        proc = climstack("verify", "/opt/probe/bin/mpi-probe-rpath", "--image", app, "--plan",
                         made.directory, "--run", *launcher, *override)  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "run: not started: the plan is refused" in proc.stdout
        assert "run: exit" not in proc.stdout and "MPICH Version" not in proc.stdout
    loaded = {"loaded": f"{helpers.IMAGE_PREFIX}/lib/libmpi.so.12"}
    assert f"it loaded {helpers.IMAGE_PREFIX}/lib/libmpi.so.12" in verify.loaded_mismatch(
        made, loaded
    )
    good = {"loaded": f"{planner.LINKS_DIR}/libmpi.so.12"}
    assert verify.loaded_mismatch(made, good) == ""
    assert "no `loaded:` line" in verify.loaded_mismatch(made, {})
    assert verify.loaded_mismatch(replace(made, links={}), good)  # a plan without MPI


def test_a_model_that_disagrees_with_the_images_loader_is_never_ok(app, tmp_path, monkeypatch):
    """A deliberately wrong model (LD_LIBRARY_PATH before every DT_RPATH) says via-lib loads
    the host's MPI; the image's own ld.so says the image's: verify refuses, naming both."""
    from climstack.bind import loader

    made = plan_for(app, tmp_path)
    original = loader.search_order

    def ld_library_path_first(requester, root, rules, view):
        order = original(requester, root, rules, view)
        return sorted(order, key=lambda entry: entry[1] != "LD_LIBRARY_PATH")

    monkeypatch.setattr(loader, "search_order", ld_library_path_first)
    report = verify.check(f"{APP}/bin/via-lib", made, app, runtime_image=app)
    assert report.oracle == "disagrees" and not report.ok
    lines = [p for p in report.problems if "disagrees with climstack's model" in p]
    assert lines and "please report it" in lines[0], report.problems
    assert (
        f"libmpi.so.12: the model says {planner.LINKS_DIR}/libmpi.so.12, "
        f"ld.so {BASE_LIB}/libmpi.so.12" in lines[0]
    )
    assert "verdict: refused" in verdict.render(report)
