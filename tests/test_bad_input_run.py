"""Bad input for the run-time commands (bind, slurm) through bin/climstack: exit code 2,
what is wrong and the fix, nothing written; each with its control (test_bad_input.py)."""

import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT
from test_bad_input import climstack, refused

from climstack.bind import plan as plans
from climstack.inputs import sites

# --- bind --------------------------------------------------------------------------------


def site_copy(tmp_path: Path, drop_site_yaml=False, drop_mpi=False) -> Path:
    site = tmp_path / "site" / "local"
    shutil.copytree(PROJECT_ROOT / "site" / "local", site)
    if drop_site_yaml:
        (site / "site.yaml").unlink()
    if drop_mpi:  # the site's MPI external, the last place discovery looks
        packages = yaml.safe_load((site / "packages.yaml").read_text())
        del packages["packages"]["mpich"]
        (site / "packages.yaml").write_text(yaml.safe_dump(packages))
    return site


def test_bind_unknown_site():
    refused("bind", "archer3", wrong=["site/archer3 does not exist"], fix=["archer2, "])


def test_bind_site_without_site_yaml(tmp_path):
    site = site_copy(tmp_path, drop_site_yaml=True)
    refused("bind", site, wrong=[f"{site}/site.yaml does not exist"], fix=["site/local/site.yaml"])


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
    # (Apptainer is never missing for site local: bin/apptainer stands in, test_apptainer.py)
    path = ":".join(
        p for p in os.environ["PATH"].split(":") if not Path(p, "singularity").exists()
    )
    refused(
        "bind",
        "local",
        *out,
        "--runtime",
        "singularity",
        env={"PATH": path},
        wrong=["`singularity` (singularity) is not on PATH"],
        fix=["--format args"],
    )


def test_bind_prepare_image_refuses_a_file(tmp_path):
    sif = tmp_path / "app.sif"
    sif.write_bytes(b"SIF")
    refused("bind", "local", "--prepare-image", sif, wrong=["not a directory"], fix=[".sif"])


# --- slurm -------------------------------------------------------------------------------


@pytest.fixture
def plan_dir(tmp_path) -> Path:
    return Path(plans.make(sites.get("local"), out=tmp_path / "plan", environ={}).directory)


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


def test_slurm_takes_the_site_from_the_plan_and_refuses_another(plan_dir, tmp_path):
    job = tmp_path / "job.sh"
    args = ["--plan", plan_dir, "--image", "app.sif", "--no-verify", "--output", job]
    ok = climstack("slurm", *args, "--command", "true")
    assert ok.returncode == 0 and "# bind plan: site local" in job.read_text(), ok.stderr
    job.unlink()
    refused(
        "slurm", "archer2", *args, "--command", "true",
        wrong=[f"the plan {plan_dir} was made for site local, not archer2"],
        fix=["drop the site argument", "climstack bind archer2 --out DIR"],
    )  # fmt: skip
    assert not job.exists()


def test_slurm_without_a_command(plan_dir):
    refused(*slurm(plan_dir), wrong=["no command to run"], fix=["--component 'NODESxTASKS"])
