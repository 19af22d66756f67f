"""Runtimes and launchers are plug-ins: a runtime module that climstack never names (the
test double climstack_dev/runtimes/double.py, found through CLIMSTACK_RUNTIME_PATH as the
registry finds every module of climstack/launch/runtimes) works with `climstack bind`,
`climstack slurm`, launch() and verify's run; and no code outside launch/runtimes/ branches
on a runtime's name."""

import ast
import json
import shlex
import shutil

import pytest
from conftest import PROJECT_ROOT
from test_bad_input import climstack

from climstack.bind import plan as plans
from climstack.check import verify
from climstack.inputs import sites
from climstack.launch import launch, launchers, runtimes
from climstack.launch.runtimes.base import Runtime

DOUBLES = PROJECT_ROOT / "climstack_dev" / "runtimes"
WITH_DOUBLE = {runtimes.PATH_VARIABLE: str(DOUBLES)}


@pytest.fixture
def double(monkeypatch):
    monkeypatch.setenv(runtimes.PATH_VARIABLE, str(DOUBLES))
    return runtimes.get("double")


def test_the_registry_finds_every_runtime_module_and_the_double_on_its_path(monkeypatch):
    monkeypatch.delenv(runtimes.PATH_VARIABLE, raising=False)
    assert set(runtimes.NAMES) == {
        "apptainer",
        "singularity",
        "charliecloud",
        "podman",
        "podman-hpc",
    }
    assert runtimes.LOCAL == ("charliecloud", "apptainer", "podman")  # the local smokes, in order
    with pytest.raises(Exception, match="unknown container runtime 'double'"):
        runtimes.get("double")
    monkeypatch.setenv(runtimes.PATH_VARIABLE, str(DOUBLES))
    assert "double" in runtimes.NAMES and isinstance(runtimes.get("double"), Runtime)
    assert set(launchers.NAMES) == {"mpiexec", "mpirun", "srun"}


def test_bind_renders_and_writes_a_plan_for_the_double(tmp_path):
    out, image = tmp_path / "plan", tmp_path / "image"
    image.mkdir()
    common = ["bind", "local", "--runtime", "double", "--out", out]
    args = climstack(
        *common, "--format", "args", "--image", image, "--command", "prog", "-x", env=WITH_DOUBLE
    )
    assert args.returncode == 0, args.stderr
    argv = shlex.split(args.stdout)
    assert argv[:2] == ["env", f"DOUBLE_IMAGE={image}"] and argv[2].startswith("DOUBLE_BINDS=")
    assert argv[-3:] == [f"LD_LIBRARY_PATH={plans.LINKS_DIR}", "prog", "-x"]
    env = climstack(*common, env=WITH_DOUBLE)
    assert env.returncode == 0, env.stderr
    assert f"export LD_LIBRARY_PATH={plans.LINKS_DIR}" in env.stdout
    assert json.loads((out / "plan.json").read_text())["runtime"] == "double"
    assert plans.Plan.load(out).runtime == "double"  # plan.json takes any runtime module
    without = climstack(*common)  # the module is not on the registry's path
    assert without.returncode == 2 and "invalid choice: 'double'" in without.stderr


def test_slurm_writes_the_doubles_job_lines(tmp_path):
    made = plans.write(
        plans.make_plan(sites.get("local"), environ={}, runtime="double"), tmp_path / "p"
    )
    proc = climstack(
        "slurm", "local", "--plan", made.directory, "--image", "img", "--ntasks", "2",
        "--no-verify", "--command", "prog", env=WITH_DOUBLE,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "runtime double" in proc.stdout
    assert f"export LD_LIBRARY_PATH={plans.LINKS_DIR}" in proc.stdout
    assert "srun --mpi=pmi2 --cpu-bind=cores --nodes=1 --ntasks=2 env DOUBLE_IMAGE=img prog" in (
        proc.stdout
    )


@pytest.mark.skipif(not shutil.which("mpiexec"), reason="needs MPICH's mpiexec (bin/setup)")
def test_launch_and_verify_run_under_the_double(double, tmp_path):
    made = plans.write(
        plans.make_plan(sites.get("local"), environ={}, runtime="double"), tmp_path / "p"
    )
    image = tmp_path / "image"
    image.mkdir()
    say = ["sh", "-c", 'echo "rank in $DOUBLE_IMAGE, $LD_LIBRARY_PATH"']
    with pytest.raises(Exception, match="is not prepared"):  # launch checks the image
        launch.launch(made, double, launchers.get("mpiexec"), image, say, ranks=2)
    assert double.prepare_image(made, image) == ["double-ready"]
    proc = launch.launch(made, double, launchers.get("mpiexec"), image, say, ranks=2)
    assert proc.stdout.splitlines() == [f"rank in {image}, {plans.LINKS_DIR}"] * 2
    ran = verify.run_probe(made, image, "true", [])  # verify --run: by the plan's runtime
    assert ran.returncode == 0 and ran.args[:2] == ["env", f"DOUBLE_IMAGE={image}"]


def test_job_step_joins_heterogeneous_components_in_one_launch(double):
    made = plans.make_plan(sites.get("local"), environ={}, runtime="double")
    srun = launchers.get("srun", mpi="pmi2")
    before, step = launch.job_step(made, double, srun, "img", [(4, 2, ["a"]), (1, 1, ["b"])])
    assert before == double.exports(made).splitlines()
    assert step == (
        "srun --mpi=pmi2 --nodes=2 --ntasks=4 --het-group=0 env DOUBLE_IMAGE=img a \\\n"
        "  : --mpi=pmi2 --nodes=1 --ntasks=1 --het-group=1 env DOUBLE_IMAGE=img b"
    )


def test_nothing_outside_the_runtimes_branches_on_a_runtime_name():
    names = set(runtimes.NAMES)
    found = []
    for path in sorted((PROJECT_ROOT / "climstack").rglob("*.py")):
        relative = path.relative_to(PROJECT_ROOT / "climstack")
        text = path.read_text()
        if relative.parts[:2] == ("launch", "runtimes") or "runtimes" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            compared = isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value in names
                for c in [node.left, *node.comparators]
            )
            asks = isinstance(node, ast.Call) and getattr(node.func, "id", "") == "hasattr"
            if compared or asks:
                found.append(f"climstack/{relative}:{node.lineno}")
    assert not found, "ask the runtime (launch/runtimes/base.py) instead: " + ", ".join(found)
