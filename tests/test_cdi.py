"""The bind plan as a CDI spec and as a podman-hpc module: the spec validates against the CDI
schema of its version and says what the plan says (read-only mounts, variables, device nodes,
no hooks); verify refuses, before anything runs, a spec that misses the host MPI's directory
and a spec of another plan; podman-hpc's own code loads the module."""

import copy
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from climstack import pins
from climstack.bind import cdi, podman_hpc
from climstack.bind import plan as planner
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.launch.runtimes import podman
from climstack_dev import programs as helpers


def climstack(*args) -> subprocess.CompletedProcess:
    command = [str(pins.PROJECT_ROOT / "bin" / "climstack"), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """The local site's bind plan (Debian's MPICH), written."""
    made = planner.make_plan(sites.get("local"), environ={})
    return planner.write(made, tmp_path_factory.mktemp("plan"))


def edits(spec: dict) -> dict:
    (device,) = spec["devices"]
    return device["containerEdits"]


def test_spec_is_the_plan_read_only(plan):
    spec = cdi.spec_of(plan)
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == "climstack.org/mpi"
    assert [d["name"] for d in spec["devices"]] == ["local"]
    mounts = edits(spec)["mounts"]
    assert [[m["hostPath"], m["containerPath"]] for m in mounts] == plan.binds
    assert all("ro" in m["options"] and "rbind" in m["options"] for m in mounts)
    mpi_dir = str(Path(plan.mpi["libraries"]["libmpi.so.12"]).parent)
    assert mpi_dir in {m["hostPath"] for m in mounts}
    assert {"hostPath": f"{plan.directory}/lib", "containerPath": planner.LINKS_DIR} in [
        {k: m[k] for k in ("hostPath", "containerPath")} for m in mounts
    ]
    env = dict(e.split("=", 1) for e in edits(spec)["env"])
    assert env == plan.runtime_env() and env["LD_LIBRARY_PATH"] == planner.LINKS_DIR
    assert "hooks" not in edits(spec) and "deviceNodes" not in edits(spec)  # none here


def test_spec_has_the_plans_device_nodes(plan):
    """The device nodes the plan found (site.yaml `devices:`, present on the host)."""
    with_devices = replace(plan, devices=["/dev/xpmem", "/dev/cxi0"])
    nodes = edits(cdi.spec_of(with_devices))["deviceNodes"]
    assert nodes == [
        {"path": "/dev/xpmem", "hostPath": "/dev/xpmem"},
        {"path": "/dev/cxi0", "hostPath": "/dev/cxi0"},
    ]


def test_spec_validates_against_the_schema_of_its_version(plan, tmp_path):
    spec = cdi.spec_of(plan)
    file = tmp_path / "spec.json"
    for change, expected in (
        (lambda s: s.update(cdiVersion="0.9.9"), "key cdiVersion: '0.9.9'"),
        (lambda s: s["devices"][0].update(name="gaea.c6"), "key devices.0.name"),
        (lambda s: s.update(kind="climstack"), "key kind"),
        (lambda s: edits(s)["mounts"][0].pop("hostPath"), "key devices.0.containerEdits"),
        (lambda s: s.update(annotations={"a": "b"}), "annotations"),  # 0.6.0, not 0.5.0
    ):
        bad = copy.deepcopy(spec)
        change(bad)
        file.write_text(json.dumps(bad))
        with pytest.raises(ClimstackError) as err:
            cdi.load(file)
        assert str(file) in err.value.message and expected in err.value.message, err.value
        assert "climstack bind SITE --format cdi" in err.value.fix


def test_bind_format_cdi_writes_the_spec_it_prints(tmp_path):
    proc = climstack("bind", "local", "--format", "cdi", "--out", tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    (file,) = (tmp_path / "plan" / "cdi").glob(f"*/{cdi.FILE}")
    assert file.read_text() == proc.stdout
    assert cdi.load(file) == cdi.spec_of(planner.Plan.load(tmp_path / "plan"))
    assert f"--cdi-spec-dir {file.parent}" in proc.stderr and "--cdi-dirs" in proc.stderr
    assert cdi.spec_dir(planner.Plan.load(tmp_path / "plan")) == file.parent  # the same one
    refused = climstack("bind", "local", "--format", "cdi", "--image", tmp_path)
    assert refused.returncode == 2 and "--format cdi prints the plan" in refused.stderr


def test_podman_hpc_module_loads_with_podman_hpcs_own_code(plan, tmp_path):
    """Its hook's reader and bind rules, and its `run` options for the module."""
    hook_tool = pytest.importorskip("podman_hpc.hook_tool", reason="pip install podman-hpc")
    from podman_hpc.siteconfig import SiteConfig

    file = podman_hpc.write(plan, tmp_path / "modules.d")
    module = hook_tool.read_confs(str(file.parent))["climstack-local"]
    root = tmp_path / "rootfs"
    resolved = {}
    for rule in module["bind"]:
        resolved |= hook_tool.resolve_src_and_dest(rule, str(root), str(file.parent))
    assert resolved == {src: str(root / dst.lstrip("/")) for src, dst in plan.binds}
    config = SiteConfig.__new__(SiteConfig)  # without its probing of the host's podman
    config.modules_dir, config.log_level = str(file.parent), None
    config.default_args = config.default_run_args = []
    config.read_site_modules()
    args = config.get_cmd_extensions("run", {"climstack_local": True})
    assert "--ipc=host" in args and "--pid=host" in args and "--env=PMI_*" in args
    assert f"--env=LD_LIBRARY_PATH={planner.LINKS_DIR}" in args
    assert args[-2:] == ["-e", "ENABLE_CLIMSTACK_LOCAL=1"]  # what makes its hook bind


def test_podman_hpc_refuses_a_path_its_rules_cannot_carry(plan):
    with pytest.raises(ClimstackError, match="contains ':'") as err:
        podman_hpc.module_of(replace(plan, binds=[["/a:b", "/c"]]))
    assert "--format cdi" in err.value.fix


@pytest.fixture(scope="module")
def controls(plan, tmp_path_factory):
    """Specs that must be refused: the MPI directory's mount left out; another site's."""
    spec, work = cdi.spec_of(plan), tmp_path_factory.mktemp("specs")
    mpi_dir = str(Path(plan.mpi["libraries"]["libmpi.so.12"]).parent)
    missing = copy.deepcopy(spec)
    edits(missing)["mounts"] = [m for m in edits(missing)["mounts"] if m["hostPath"] != mpi_dir]
    other = copy.deepcopy(spec)
    other["devices"][0]["name"] = "archer2"
    made = {"missing": missing, "other": other, "own": spec}
    for name, content in made.items():
        (work / f"{name}.json").write_text(cdi.text(content))
    return {name: work / f"{name}.json" for name in made}, mpi_dir


@pytest.mark.parametrize(
    "control, reason",
    [
        ("missing", "does not mount {mpi_dir} at /opt/climstack/host{mpi_dir} (the host MPI's"),
        ("other", "describes device archer2, a spec of another plan: this plan (site local)"),
    ],
)
def test_verify_refuses_a_spec_not_of_the_plan_before_anything_runs(
    control, reason, controls, plan, image
):
    files, mpi_dir = controls
    proc = climstack(
        "verify", helpers.BASE_PROBE, "--image", image, "--plan", plan.directory,
        "--cdi", files[control], "--run", "--launcher", "false",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert reason.format(mpi_dir=mpi_dir) in proc.stdout
    assert "not asked (spec refused)" in proc.stdout and "run: exit" not in proc.stdout
    accepted = climstack(
        "verify", helpers.BASE_PROBE, "--image", image, "--plan", plan.directory,
        "--cdi", files["own"], "--no-oracle",
    )  # fmt: skip
    assert accepted.returncode == 0 and "verdict: ok" in accepted.stdout, accepted.stdout


def test_podman_settings_fall_back_as_podmans_errors_ask():
    """Found by trying: each error names the fallback; ulimits are halved to a floor."""
    found, tried = podman.Settings(), set()
    for error, kind in (
        ("Error: crun: cgroups in hybrid mode not supported", "runtime"),
        ("error setting rlimit type 7: operation not permitted", "ulimits"),
        ("error setting rlimit type 6: operation not permitted", "nproc halved"),
    ):
        found, done = podman.fallback(found, error, tried)
        assert done == kind
        tried.add(done)
    assert found.global_args == ("--runtime", "runc")
    limits = dict(found.ulimits)
    assert f"--ulimit=nproc={limits['nproc']}:{limits['nproc']}" in found.run_args
    assert podman.fallback(found, "Error: no such image", tried) is None
