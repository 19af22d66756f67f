"""`apptainer build` of the committed recipe itself, offline: every network input is a build
argument (%arguments, upstream by default), pointed here at local clones, a local clingo
index and a source mirror, with the base supplied as `Bootstrap: localimage`. The probes
slice is built end to end and the SIF is run (climstack_dev/recipe_build.py)."""

import os
import subprocess

import pytest

from climstack import pins
from climstack.bind import plan as plans
from climstack.errors import ClimstackError
from climstack.image import build_args
from climstack.launch.runtimes import apptainer
from climstack.stack import containers, environments
from climstack_dev import programs as helpers
from climstack_dev import recipe_build

APPTAINER = apptainer.on_this_machine()
RECIPE = environments.resolve("container-archer2") / containers.RECIPE


def test_build_arguments_default_to_upstream_in_every_stage():
    text = RECIPE.read_text()
    assert build_args.names(text) >= {"spack_git", "clingo_index", "source_mirror", "base"}
    rendered = build_args.render(text, {})
    assert "{{" not in rendered
    assert rendered.count("Bootstrap: docker\nFrom: debian:12\n") == 2
    assert f"--branch {pins.SPACK.clone_ref} https://github.com/spack/spack.git" in rendered
    local = build_args.render(text, {"base": "/images/base.sif", "bootstrap": "localimage"})
    assert local.count("Bootstrap: localimage\nFrom: /images/base.sif\n") == 2


def test_unknown_or_undeclared_build_arguments_are_refused():
    with pytest.raises(ClimstackError) as unknown:
        build_args.render(RECIPE.read_text(), {"spack_url": "x"}, source=str(RECIPE))
    assert "spack_url" in str(unknown.value) and "spack_git" in unknown.value.fix
    with pytest.raises(ClimstackError) as undeclared:
        build_args.render("Bootstrap: docker\nFrom: {{ base }}\n", {})
    assert "base" in str(undeclared.value) and "%arguments" in undeclared.value.fix


@pytest.fixture(scope="module")
def recipe_sif():
    """The probes slice of containers/archer2/app.def, built by Apptainer (cached)."""
    path, seconds = recipe_build.build(
        "container-archer2", pins.cache_dir() / "images" / "recipe-container-archer2.sif"
    )
    print(f"recipe SIF: {path.stat().st_size / 2**20:.0f} MB, built in {seconds:.0f} s")
    return path


def test_recipe_built_offline_carries_its_labels_and_passes_its_test(recipe_sif):
    labels = subprocess.run(
        [APPTAINER, "inspect", "--labels", recipe_sif], capture_output=True, text=True
    )
    assert labels.returncode == 0, labels.stderr
    found = dict(line.split(": ", 1) for line in labels.stdout.splitlines() if ": " in line)
    assert found["org.climstack.target-site"] == "archer2"
    assert len(found["org.climstack.environment-hash"]) == 16
    test = subprocess.run(
        [APPTAINER, "test", recipe_sif], capture_output=True, text=True, timeout=300
    )
    assert test.returncode == 0, test.stderr[-2000:]
    assert "MPI executables checked, 0 failed" in test.stdout
    assert "library: MPICH Version:\t3.4.3" in test.stdout


def test_recipe_sif_loads_the_hosts_mpi_on_two_ranks_in_bind_mode(recipe_sif, tmp_path):
    """Launched from the host as on a Cray, with the plan `climstack bind` renders."""
    mpi = helpers.debian_mpich()
    plan = subprocess.run(
        [pins.PROJECT_ROOT / "bin/climstack", "bind", "local", "--runtime", "apptainer"]
        + ["--out", tmp_path],
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    run = subprocess.run(
        ["bash", "-c", f"{plan.stdout}\nmpiexec -n 2 {APPTAINER} exec {recipe_sif} mpi-probe"],
        capture_output=True,
        text=True,
        timeout=300,
        env=mpi.env(APPTAINER_NO_HOME="1"),
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "library: MPICH Version:\t4.0.2" in run.stdout
    assert f"loaded: {plans.LINKS_DIR}/libmpi.so.12" in run.stdout
    assert "ranks: 2" in run.stdout


def test_recipe_refuses_an_unknown_slice_before_building(tmp_path):
    arguments = {**recipe_build.arguments(), "slice": "everything"}
    proc = subprocess.run(
        recipe_build.command(arguments, tmp_path / "x.sif", RECIPE),
        capture_output=True,
        text=True,
        cwd=pins.PROJECT_ROOT,
        timeout=300,
        env={**os.environ, "APPTAINER_TMPDIR": str(tmp_path)},
    )
    assert proc.returncode != 0
    assert (
        "build argument slice=everything: use all, io, mpi-bench or probes"
        in proc.stdout + proc.stderr
    )
    assert not (tmp_path / "x.sif").exists()
