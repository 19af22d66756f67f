"""The bind plan as a CDI spec and as a podman-hpc module. The spec validates against the
upstream CDI schema (the reference library's at its pinned tag, no transcription) and says
what the plan says (read-only mounts, variables, device nodes, no hooks); the reference `cdi`
applies every spec the project writes as exactly the plan. verify judges a spec on what the
reference applies for the plan's device, top-level edits included, and refuses before
anything runs a spec that misses the host MPI's directory, another plan's, and one that
preloads the image's MPI, runs a hook, mounts writable or sets another variable; podman is
given the user's spec as written (the oracle's run included); podman-hpc's own code loads
the module."""

import copy
import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from climstack import inputs, pins
from climstack.bind import cdi
from climstack.bind import cdi_reference as reference
from climstack.bind import loader
from climstack.bind import plan as planner
from climstack.bind import podman_hpc
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack.launch.runtimes import podman
from climstack_dev import cray_tree
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


def test_the_schema_is_the_reference_librarys_at_its_tag():
    """The upstream schema/schema.json (and the defs.json it names) at the pinned tag, read
    from the checkout in the cache: no transcription of it is left in the project."""
    root = reference.checkout()
    tagged = subprocess.run(
        ["git", "-C", root, "rev-parse", f"{reference.PIN.tag}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    assert (
        tagged.stdout.strip() == reference.PIN.commit == "98a7d735d9592c1ccca0130e06b0709f4b65ecbf"
    )
    upstream = subprocess.run(
        ["git", "-C", root, "show", f"{reference.PIN.tag}:schema/schema.json"],
        capture_output=True,
        text=True,
    )
    assert reference.validator().schema == json.loads(upstream.stdout)
    assert not list(inputs.SCHEMAS.glob("cdi*")), "a transcribed CDI schema is back"


def test_spec_is_checked_against_the_upstream_schema(plan, tmp_path):
    """What the schema says, as a ClimstackError naming the file, the key and the fix."""
    spec = cdi.spec_of(plan)
    file = tmp_path / "spec.json"
    for change, expected in (
        (lambda s: edits(s)["mounts"][0].pop("hostPath"), "key devices.0.containerEdits.mounts.0"),
        (lambda s: s["devices"][0].update(name=7), "key devices.0.name: 7 is a int"),
        (lambda s: s.update(devices={"local": {}}), "key devices:"),
        (lambda s: s.pop("kind"), "'kind' is a required property"),
    ):
        bad = copy.deepcopy(spec)
        change(bad)
        file.write_text(json.dumps(bad))
        with pytest.raises(ClimstackError) as err:
            cdi.load(file)
        assert str(file) in err.value.message and expected in err.value.message, err.value
        assert "container-device-interface v1.1.0" in err.value.message
        assert "climstack bind SITE --format cdi" in err.value.fix


def test_the_reference_rejects_what_its_code_checks(plan, tmp_path):
    """What the schema leaves to the library's code (versions, names, the features of a
    version, unknown keys, variables), refused in the reference's own words."""
    spec = cdi.spec_of(plan)
    for change, expected in (
        (lambda s: s.update(cdiVersion="0.9.9"), 'invalid version "0.9.9"'),
        (lambda s: s.update(annotations={"a": "b"}), "the spec version must be at least v0.6.0"),
        (lambda s: s.update(kind="climstack"), "invalid vendor"),
        (lambda s: s.update(extra=1), 'unknown field "extra"'),
        (lambda s: edits(s)["env"].append("NOVALUE"), 'invalid environment variable "NOVALUE"'),
    ):
        bad = copy.deepcopy(spec)
        change(bad)
        file = tmp_path / "spec.json"
        file.write_text(json.dumps(bad))
        refused, checked = cdi.judge(plan, file)
        (reason,) = refused
        assert reason.startswith(
            f"the reference cdi (container-device-interface v1.1.0) rejects {file}: "
        )
        assert expected in reason and checked is plan, reason


def written(variant: str, plan: planner.Plan, work: Path) -> planner.Plan:
    """Every kind of spec the project writes: the local plan's (what `bind --format cdi`
    writes), with device nodes, the oracle's variant (LD_TRACE_LOADED_OBJECTS: what podman
    runs for verify), hybrid mode's, and ARCHER2's on a synthetic Cray PE (site variables,
    many binds)."""
    if variant == "devices":
        return replace(plan, devices=["/dev/null", "/dev/zero"])
    if variant == "oracle":
        return replace(plan, env={**plan.env, "LD_TRACE_LOADED_OBJECTS": "1"})
    if variant == "hybrid":
        made = planner.make_plan(sites.get("local"), mode="hybrid", environ={})
        return planner.write(made, work)
    if variant == "archer2":
        if not shutil.which("gcc"):
            pytest.skip("needs gcc to compile the synthetic Cray libraries")
        view = loader.View(cray_tree.cray_tree(work / "cray"))
        return planner.write(planner.make_plan(sites.get("archer2"), view=view, environ={}), work)
    return plan


@pytest.mark.parametrize("variant", ["local", "devices", "oracle", "hybrid", "archer2"])
def test_the_reference_applies_every_spec_the_project_writes_as_the_plan(variant, plan, tmp_path):
    """`cdi validate` finds nothing wrong, `cdi inject` applies the plan's binds (read-only),
    its variables and device nodes and nothing else, and verify accepts the spec."""
    plan = written(variant, plan, tmp_path)
    file = cdi.spec_dir(plan) / cdi.FILE
    assert reference.errors(file) == []
    oci, said = reference.inject(file, cdi.device(plan))
    assert oci is not None, said
    mounts = oci.get("mounts", [])
    assert sorted([m["source"], m["destination"]] for m in mounts) == sorted(plan.binds)
    assert all("ro" in m["options"] for m in mounts)
    assert oci["process"]["env"] == [f"{k}={v}" for k, v in sorted(plan.runtime_env().items())]
    assert [d["path"] for d in oci.get("linux", {}).get("devices", [])] == plan.devices
    assert "hooks" not in oci and not oci["process"]["user"].get("additionalGids")
    refused, checked = cdi.judge(plan, file.parent)
    assert refused == [] and isinstance(checked, cdi.Applied) and checked.spec == str(file)
    assert checked.runtime_env() == plan.runtime_env() and checked.devices == plan.devices
    assert sorted(checked.binds) == sorted(plan.binds)


def test_bind_format_cdi_writes_the_spec_it_prints(tmp_path):
    proc = climstack("bind", "local", "--format", "cdi", "--out", tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    (file,) = (tmp_path / "plan" / "cdi").glob(f"*/{cdi.FILE}")
    assert file.read_text() == proc.stdout
    assert cdi.load(file) == cdi.spec_of(planner.Plan.load(tmp_path / "plan"))
    assert f"--cdi-spec-dir {file.parent}" in proc.stderr and "--cdi-dirs" in proc.stderr
    assert cdi.spec_dir(planner.Plan.load(tmp_path / "plan")) == file.parent  # the same one
    assert cdi.judge(planner.Plan.load(tmp_path / "plan"), file)[0] == []  # the reference's
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
    # one container per node, its ranks joined: without the variables of separate ranks
    # (UCX_TLS=^cma made rendezvous messages 10x slower, benchmarks/podman_launch.py)
    assert config.shared_run is True  # podman-hpc's own reading of the module
    assert plan.separate_env and not any(
        a.startswith(f"--env={key}=") for key in plan.separate_env for a in args
    )


def test_podman_hpc_refuses_a_path_its_rules_cannot_carry(plan):
    with pytest.raises(ClimstackError, match="contains ':'") as err:
        podman_hpc.module_of(replace(plan, binds=[["/a:b", "/c"]]))
    assert "--format cdi" in err.value.fix


#: the image's own MPI, which mpi-probe-343 is built against (programs.BASE_PREFIX)
IMAGE_MPI = f"{helpers.BASE_PREFIX}/lib/libmpi.so.12"


@pytest.fixture(scope="module")
def controls(plan, tmp_path_factory):
    """Specs that must be refused: the MPI directory's mount left out; another site's; and
    the plan's own with one edit added: a preload of the image's MPI in the top-level edits
    (which a runtime applies with the device's), a hook, a writable mount, a variable."""
    spec, work = cdi.spec_of(plan), tmp_path_factory.mktemp("specs")
    mpi_dir = str(Path(plan.mpi["libraries"]["libmpi.so.12"]).parent)
    made = {"own": spec, "missing": copy.deepcopy(spec), "other": copy.deepcopy(spec)}
    edits(made["missing"])["mounts"] = [
        m for m in edits(made["missing"])["mounts"] if m["hostPath"] != mpi_dir
    ]
    made["other"]["devices"][0]["name"] = "archer2"
    for name, top, added in (
        ("preload", True, {"env": [f"LD_PRELOAD={IMAGE_MPI}"]}),
        ("hook", False, {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/true"}]}),
        ("writable", True, {"mounts": [{"hostPath": str(work), "containerPath": "/scratch"}]}),
        ("variable", False, {"env": ["MPICH_ASYNC_PROGRESS=1"]}),
    ):
        made[name] = copy.deepcopy(spec)
        target = made[name].setdefault("containerEdits", {}) if top else edits(made[name])
        for key, entries in added.items():
            target[key] = target.get(key, []) + entries
    for name, content in made.items():
        (work / f"{name}.json").write_text(cdi.text(content))
    return {name: work / f"{name}.json" for name in made}, mpi_dir


@pytest.mark.parametrize(
    "control, reason",
    [
        ("missing", "does not mount {mpi_dir} at /opt/climstack/host{mpi_dir} (the host MPI's"),
        ("other", "describes device archer2, a spec of another plan: this plan (site local)"),
        (
            "preload",
            "preloads {image_mpi} (LD_PRELOAD, its top-level containerEdits): the image's own "
            "MPI, loaded ahead of the host MPI the plan binds",
        ),
        (
            "hook",
            "runs hook /usr/bin/true (createContainer, its device local's containerEdits): the "
            "plan runs none",
        ),
        (
            "writable",
            "mounts {work} at /scratch writable (its top-level containerEdits), not read-only",
        ),
        (
            "variable",
            "sets MPICH_ASYNC_PROGRESS=1 (its device local's containerEdits), which the plan "
            "does not",
        ),
    ],
)
def test_verify_refuses_a_spec_not_of_the_plan_before_anything_runs(
    control, reason, controls, plan, image
):
    """Judged on what the reference cdi applies for the device, top-level edits included:
    before this, the device's edits alone were read, and `preload`, `writable` (top-level)
    and `hook` were accepted."""
    files, mpi_dir = controls
    assert (image / IMAGE_MPI.lstrip("/")).is_file()  # the image's own MPI, preloaded
    proc = climstack(
        "verify", helpers.BASE_PROBE, "--image", image, "--plan", plan.directory,
        "--cdi", files[control], "--run", "--launcher", "false",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    expected = reason.format(mpi_dir=mpi_dir, image_mpi=IMAGE_MPI, work=files["own"].parent)
    assert f"{files[control]} {expected}" in proc.stdout, proc.stdout
    assert "not asked: the spec was refused" in proc.stdout and "run: exit" not in proc.stdout


def test_verify_accepts_the_plans_own_spec_and_the_loader_confirms_it(controls, plan, image):
    runtimes.get("charliecloud").prepare_image(plan, image)
    files, _ = controls
    accepted = climstack(
        "verify", helpers.BASE_PROBE, "--image", image, "--plan", plan.directory,
        "--cdi", files["own"],
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "\nverdict: ok\n" in accepted.stdout + "\n", accepted.stdout


def test_podman_is_given_the_users_spec_as_written(plan, tmp_path, monkeypatch):
    """The spec verify judged (YAML, its variables split between the top-level and the
    device's edits, mounts `ro` alone) is what podman gets, byte for byte, in a spec
    directory of its own; the oracle's variable goes beside it (--env), not into a spec."""
    spec = cdi.spec_of(plan)
    env = edits(spec).pop("env")
    spec["containerEdits"] = {"env": env[:1]}
    edits(spec)["env"] = env[1:]
    for mount in edits(spec)["mounts"]:
        mount["options"] = ["ro"]
    file = tmp_path / "users.yaml"
    file.write_text(yaml.safe_dump(spec))
    refused, checked = cdi.judge(plan, file)
    assert refused == [] and checked.spec == str(file)
    traced = replace(checked, env={**checked.env, "LD_TRACE_LOADED_OBJECTS": "1"})  # oracle's
    on_podman = podman.Podman()
    for option in (True, False):  # --cdi-spec-dir, or bound over /var/run/cdi (4.3)
        found = podman.Settings(spec_dir_option=option)
        monkeypatch.setattr(on_podman, "settings", lambda image, found=found: found)
        argv = on_podman.exec_args(traced, "image", ["true"])
        given = Path(
            argv[argv.index("--cdi-spec-dir") + 1]
            if option
            else argv[argv.index(podman.SPEC_NAMESPACE) + 1]
        )
        assert [p.read_bytes() for p in given.iterdir()] == [file.read_bytes()]
        assert "--env=LD_TRACE_LOADED_OBJECTS=1" in argv
        assert [a for a in argv if a.startswith("--env=") and "=" in a[6:]] == [
            "--env=LD_TRACE_LOADED_OBJECTS=1"
        ]
    own = on_podman.exec_args(replace(plan, env={**plan.env, "X": "1"}), "image", ["true"])
    assert not any(a.startswith("--env=X") for a in own)  # a plan's own spec carries it


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
