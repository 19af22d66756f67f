"""Bad input for every command, run as a user runs it (bin/climstack): exit code 2, one
message naming what is wrong, a fix, no traceback, and nothing written. Each refusal has a
control where the same command with good input goes further (or succeeds)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT

from climstack.run import plan as plans

CLIMSTACK = str(PROJECT_ROOT / "bin" / "climstack")


def climstack(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    environ = {**os.environ, "LD_LIBRARY_PATH": "", **(env or {})}
    return subprocess.run(
        [CLIMSTACK, *map(str, args)], capture_output=True, text=True, env=environ, timeout=timeout
    )


def refused(*args, wrong=(), fix=(), env=None) -> str:
    """Run a command that must be refused; `wrong` must be in the message, `fix` in its fix."""
    proc = climstack(*args, env=env)
    message = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, message)
    assert message.startswith(f"climstack {args[0]}: error: "), message
    assert "Traceback" not in message and "\n  fix: " in message, message
    what, advice = message.split("\n  fix: ", 1)
    assert advice.strip(), message
    for text in wrong:
        assert text in what, (text, message)
    for text in fix:
        assert text in advice, (text, message)
    return message


def env_dir(tmp_path: Path, body: str, name: str = "env") -> Path:
    directory = tmp_path / name
    directory.mkdir(parents=True)
    (directory / "spack.yaml").write_text(f"spack:\n{body}")
    return directory


STACK = f"  include:\n  - {PROJECT_ROOT}/environments/stack.yaml\n"


# --- concretize, named-env, smoke --------------------------------------------------------


@pytest.mark.parametrize("command", ["concretize", "smoke", "check-mpi", "containerize"])
def test_unknown_environment_names_the_real_ones(command):
    refused(command, "nosuch", wrong=["no environment 'nosuch'"], fix=["archer2, gaea, local"])


def test_named_env_unknown_environment():
    refused("named-env", "x", "nosuch", wrong=["no environment 'nosuch'"], fix=["container-gaea"])


def test_concretize_and_named_env_refuse_an_environment_without_a_site(tmp_path):
    env = env_dir(tmp_path, STACK + "  specs: [zlib]\n")
    for args in (("concretize", env), ("named-env", "climstack-test-nosite", env)):
        refused(*args, wrong=[str(env / "spack.yaml"), "exactly one site"], fix=["../../site/"])


def test_concretize_names_an_unknown_site(tmp_path):
    env = env_dir(tmp_path / "environments", STACK + "  - ../../site/archer3\n")
    refused("concretize", env, wrong=["site 'archer3'"], fix=["archer2", "site/archer3/"])


def test_smoke_refuses_zero_ranks_and_a_bad_environment(tmp_path):
    refused("smoke", "--ranks", "0", wrong=["--ranks 0"], fix=["--ranks 2"])
    env = env_dir(tmp_path, STACK + "  specs: [zlib]\n")
    refused("smoke", env, wrong=["exactly one site"], fix=["../../site/"])


# --- containerize, check-mpi, image ------------------------------------------------------


@pytest.mark.parametrize("command", ["containerize", "check-mpi", "image"])
def test_a_site_environment_is_no_container(command):
    refused(
        command,
        "local",
        wrong=["environments/local/spack.yaml has no `container:` section"],
        fix=["containers/archer2/spack.yaml"],
    )


def test_check_mpi_names_an_unknown_target_site(tmp_path):
    env = env_dir(
        tmp_path,
        STACK + "  specs: [mpi-probe]\n  container:\n    format: singularity\n"
        "    labels: {org.climstack.target-site: archer3}\n",
    )
    refused("check-mpi", env, wrong=["org.climstack.target-site is 'archer3'"], fix=["archer2"])


@pytest.fixture
def container_copy(tmp_path) -> Path:
    """containers/archer2 copied with its committed recipe; the rest of the project linked."""
    (tmp_path / "containers").mkdir()
    shutil.copytree(PROJECT_ROOT / "containers" / "archer2", tmp_path / "containers" / "archer2")
    (tmp_path / "containers" / "templates").symlink_to(PROJECT_ROOT / "containers" / "templates")
    for name in ("environments", "site", "repo"):
        (tmp_path / name).symlink_to(PROJECT_ROOT / name)
    return tmp_path / "containers" / "archer2"


def test_containerize_check_refuses_a_changed_recipe_naming_the_difference(container_copy):
    ok = climstack("containerize", "--check", container_copy)  # the control: an exact copy
    assert ok.returncode == 0, ok.stderr
    recipe = container_copy / "app.def"
    text = recipe.read_text()
    line = "  spack -e . install --fail-fast\n"
    assert line in text
    recipe.write_text(text.replace(line, "  spack -e . install\n"))
    message = refused(
        "containerize", "--check", container_copy, fix=["bin/climstack containerize"]
    )
    assert f"--- {recipe}" in message and "+++ containerize" in message
    assert "\n-  spack -e . install\n" in message
    assert f"\n+{line}" in message  # what `spack containerize` emits
    assert "--fail-fast" not in recipe.read_text()  # --check writes nothing


def test_image_refuses_to_replace_a_directory_it_did_not_build(tmp_path):
    precious = tmp_path / "home" / "notes.txt"
    precious.parent.mkdir()
    precious.write_text("keep me")
    refused(
        "image",
        "container-archer2",
        precious.parent,
        wrong=[f"{precious.parent} exists and is not an image"],
        fix=["new or empty directory"],
    )
    assert precious.read_text() == "keep me"


# --- bind --------------------------------------------------------------------------------


def site_copy(tmp_path: Path, drop_bind_yaml=False, drop_mpi=False) -> Path:
    site = tmp_path / "site" / "local"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    if drop_bind_yaml:
        (site / "bind.yaml").unlink()
    if drop_mpi:  # the site's MPI external, the last place discovery looks
        packages = yaml.safe_load((site / "packages.yaml").read_text())
        del packages["packages"]["mpich"]
        (site / "packages.yaml").write_text(yaml.safe_dump(packages))
    return site


def test_bind_unknown_site():
    refused("bind", "archer3", wrong=["site/archer3 does not exist"], fix=["archer2, "])


def test_bind_site_without_bind_yaml(tmp_path):
    site = site_copy(tmp_path, drop_bind_yaml=True)
    refused("bind", site, wrong=[f"{site}/bind.yaml does not exist"], fix=["site/local/bind.yaml"])


def test_bind_without_any_host_mpi(tmp_path):
    site = site_copy(tmp_path, drop_mpi=True)
    out = tmp_path / "plan"
    refused("bind", site, "--out", out, wrong=["no host MPI found"], fix=["--prefix"])
    assert not out.exists()
    refused("bind", site, "--prefix", tmp_path, wrong=["no libmpi.so.12 or libmpich.so.12 under"])
    ok = climstack("bind", site, "--prefix", "/usr", "--out", out)  # the control
    assert ok.returncode == 0 and "APPTAINER_BIND" in ok.stdout, ok.stderr


@pytest.mark.parametrize(
    "directory, args, separators",
    [
        ("plan:1", ["--format", "env"], "',:'"),  # Apptainer's exports
        ("plan,1", ["--format", "env"], "',:'"),  # Apptainer's --bind list separator
        ("plan:1", ["--format", "json"], "':'"),  # the site's runtime: Charliecloud
    ],
)
def test_bind_refuses_paths_the_runtime_cannot_express(tmp_path, directory, args, separators):
    out = tmp_path / directory
    refused(
        "bind",
        "local",
        "--out",
        out,
        *args,
        wrong=[f"{out}/lib", f"contains one of {separators}"],
        fix=["without them"],
    )
    assert not out.exists()  # refused before anything is written


def test_bind_comma_is_fine_for_charliecloud(tmp_path):
    """The control: Charliecloud binds one path per option, so a comma is no separator."""
    ok = climstack("bind", "local", "--out", tmp_path / "plan,1", "--format", "json")
    assert ok.returncode == 0, ok.stderr
    assert plans.Plan.load(tmp_path / "plan,1").runtime == "charliecloud"


@pytest.mark.parametrize(
    "args, wrong, fix",
    [
        (["--format", "json", "--image", "x.sif"], "--format json prints the plan", "exec"),
        (["--format", "env", "--command", "true"], "--format env prints the plan", "args"),
        (["--format", "args"], "--format args needs --image", "--image IMAGE"),
        (["--format", "exec", "--image", "/nonexistent/x.sif"], "does not exist", ".sif"),
        (["--prepare-image", "/nonexistent/image"], "is not a directory", "ch-convert"),
    ],
)
def test_bind_format_and_image_options(tmp_path, args, wrong, fix):
    out = tmp_path / "plan"
    refused("bind", "local", "--out", out, *args, wrong=[wrong], fix=[fix])
    assert not out.exists()


def test_bind_exec_names_missing_mount_points_and_a_missing_runtime(tmp_path):
    image = tmp_path / "image"
    (image / "opt").mkdir(parents=True)
    out = ["--out", tmp_path / "plan", "--format", "exec", "--image", image]
    refused("bind", "local", *out, wrong=["lacks the mount points"], fix=["--prepare-image"])
    path = ":".join(p for p in os.environ["PATH"].split(":") if not Path(p, "apptainer").exists())
    refused(
        "bind",
        "local",
        *out,
        "--runtime",
        "apptainer",
        env={"PATH": path},
        wrong=["`apptainer` (apptainer) is not on PATH"],
        fix=["--format args"],
    )


def test_bind_prepare_image_refuses_a_file(tmp_path):
    sif = tmp_path / "app.sif"
    sif.write_bytes(b"SIF")
    refused("bind", "local", "--prepare-image", sif, wrong=["not a directory"], fix=[".sif"])


# --- slurm -------------------------------------------------------------------------------


@pytest.fixture
def plan_dir(tmp_path) -> Path:
    return Path(plans.write(plans.make_plan("local", environ={}), tmp_path / "plan").directory)


def slurm(plan_dir, *args) -> list:
    return ["slurm", "local", "--plan", plan_dir, "--image", "app.sif", "--no-verify", *args]


@pytest.mark.parametrize(
    "component, wrong",
    [
        ("2 /bin/true", "expected 'NODESxTASKS command'"),
        ("1xa /bin/true", "expected 'NODESxTASKS command'"),
        ("1x2", "has no command"),
        ("0x2 /bin/true", "0 nodes and 2 tasks"),
        ("2x1 /bin/true", "2 nodes and 1 tasks"),
        ("1x1 '/bin/true", "No closing quotation"),
    ],
)
def test_slurm_component_parse_errors(plan_dir, component, wrong):
    refused(*slurm(plan_dir, "--component", component), wrong=[wrong], fix=["--component '1x2"])


def test_slurm_component_and_command_together(plan_dir, tmp_path):
    job = tmp_path / "job.sh"
    args = slurm(plan_dir, "--output", job, "--component", "1x1 /bin/true", "--command", "true")
    refused(*args, wrong=["--component and --command both given"], fix=["--command PROG"])
    assert not job.exists()
    ok = climstack(*slurm(plan_dir, "--output", job, "--component", "1x1 /bin/true"))
    assert ok.returncode == 0 and "srun --mpi=pmi2" in job.read_text(), ok.stderr


def test_slurm_without_a_command(plan_dir):
    refused(*slurm(plan_dir), wrong=["no command to run"], fix=["--component 'NODESxTASKS"])
