"""Every Cray site's bind plan, on a synthetic Cray PE in the layout the sites publish,
carries what the site's container guide binds by hand (site/<site>/site.yaml), and renders
for the runtime the site runs (Singularity on ARCHER2 and Setonix, Apptainer on Gaea)."""

from pathlib import Path

import pytest

from climstack.bind import loader
from climstack.bind import plan as plans
from climstack.cray import mpich_base
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import cray_tree
from climstack_dev.cpe_tree import cray_sites

CRAY_SITES = cray_sites()
#: the sites whose libraries the ARCHER2-like tree has; Perlmutter's XPMEM is the system's
#: (/usr/lib64), on a tree of its own below
ARCHER2_LAYOUT = [s for s in CRAY_SITES if s != "perlmutter"]
#: the sites whose runtime runs a SIF (Singularity, Apptainer); Perlmutter runs podman-hpc
SIF_SITES = [
    s for s in CRAY_SITES if runtimes.get(sites.get(s).bind["runtime"]).image_format == "sif"
]
#: the module environment: this tree's libfabric (each site pins its own version)
ENVIRON = {"LD_LIBRARY_PATH": "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"}


@pytest.fixture(scope="module")
def cray_root(tmp_path_factory):
    return cray_tree.cray_tree(tmp_path_factory.mktemp("cray"))


@pytest.mark.parametrize("site", ARCHER2_LAYOUT)
def test_the_plan_carries_the_sites_published_extras(cray_root, site):
    config = sites.get(site).bind
    plan = plans.make_plan(
        sites.get(site), view=loader.View(cray_root), prefix=cray_tree.CRAY_MPICH, environ=ENVIRON
    )
    assert set(config["bind_libraries"]) <= set(plan.links)
    assert "libxpmem.so.0" in plan.links and "libmpi.so.12" in plan.links
    targets = {dst for _, dst in plan.binds}
    for extra in config["binds"]:
        assert extra.get("target", extra["path"]) in targets, extra
    assert plan.env == {k: str(v) for k, v in {**config["env"], **config["bind_env"]}.items()}
    assert not [a for a in plan.absent if not a.startswith("/dev/")]  # devices: not here


@pytest.mark.parametrize("site", SIF_SITES)
def test_the_plan_renders_for_the_sites_runtime(cray_root, site):
    plan = plans.make_plan(
        sites.get(site), view=loader.View(cray_root), prefix=cray_tree.CRAY_MPICH, environ=ENVIRON
    )
    runtime = runtimes.get(plan.runtime)
    argv = runtime.exec_args(plan, "app.sif", ["true"])
    assert argv[:2] == [{"singularity": "singularity"}.get(plan.runtime, "apptainer"), "exec"]
    exports = runtime.exports(plan)
    assert "export SINGULARITY_BIND=" in exports
    assert ("export APPTAINER_BIND=" in exports) == (plan.runtime == "apptainer")


def test_frontier_binds_cray_mpich_9_from_its_own_layout(tmp_path):
    """site/frontier on a CPE 26.03 tree (cray_tree.cray9_tree): the MPI found from the
    scope's external, its ANL base read as 4.2.2, libfabric 2.3.1 and what the site lists."""
    root = cray_tree.cray9_tree(tmp_path / "frontier")
    frontier = sites.get("frontier")
    plan = plans.make_plan(frontier, view=loader.View(root), environ={})
    assert (
        plan.mpi["libraries"]["libmpi.so.12"]
        == f"{cray_tree.CRAY_MPICH_9}/lib-abi-mpich/libmpi.so.12"
    )
    assert plan.mpi["version"] == "Cray MPICH 9.1.0 (ANL MPICH base 4.2.2)"
    closure = {entry["name"]: entry["host"] for entry in plan.closure}
    assert closure["libfabric.so.1"] == "/opt/cray/libfabric/2.3.1/lib64/libfabric.so.1.27.0"
    assert closure["libpmi.so.0"] == "/opt/cray/pe/pmi/6.1.17/lib/libpmi.so.0"
    assert closure["libxpmem.so.0"] == "/opt/cray/xpmem/2.11.3/lib64/libxpmem.so.0"
    assert set(frontier.bind["bind_libraries"]) <= set(plan.links)
    assert {"/run/cxi", "/var/spool/slurmd"} <= {dst for _, dst in plan.binds}
    assert [(p["key"], p["missing"]) for p in plan.plugins] == [("ofi:cxi", [])]
    # the container pin this base allows, and one it refuses (containers/frontier: 4.2.2);
    # 9.0.1's base, 4.1, refuses the 4.2 pin
    mpich_base.check_container_mpich("4.2.2", "9.1.0", "containers/frontier/spack.yaml")
    with pytest.raises(ClimstackError):
        mpich_base.check_container_mpich("4.3.1", "9.1.0", "containers/frontier/spack.yaml")
    with pytest.raises(ClimstackError):
        mpich_base.check_container_mpich("4.2.2", "9.0.1", "containers/frontier/spack.yaml")


def test_perlmutter_runs_the_plan_as_its_own_podman_hpc_module(tmp_path):
    """podman-hpc's own code reads the module the runtime writes into the plan's directory:
    its hook binds every bind of the plan, `run --climstack-perlmutter` adds the variables
    and namespaces, and `shared_run` gives one container per node; a job exports the
    modules directory and each rank runs `podman-hpc run`."""
    hook_tool = pytest.importorskip("podman_hpc.hook_tool", reason="pip install podman-hpc")
    from podman_hpc.siteconfig import SiteConfig

    root = cray_tree.cray9_tree(tmp_path / "perlmutter", xpmem="/usr/lib64")
    perlmutter = sites.get("perlmutter")
    for bind in perlmutter.bind["binds"]:  # the run-time directories podman-hpc's module binds
        (root / bind["path"].lstrip("/")).mkdir(parents=True, exist_ok=True)
    plan = plans.write(plans.make_plan(perlmutter, view=loader.View(root)), tmp_path / "plan")
    assert set(perlmutter.bind["bind_libraries"]) <= set(plan.links)
    assert {b["path"] for b in perlmutter.bind["binds"]} <= {dst for _, dst in plan.binds}
    runtime = runtimes.get(plan.runtime)
    argv = runtime.exec_args(plan, "registry.nersc.gov/x/app:1", ["osu_bw"])
    modules = tmp_path / "plan" / "podman-hpc"
    assert argv == [
        "env", f"PODMANHPC_MODULES_DIR={modules}", "podman-hpc", "run", "--rm",
        "--climstack-perlmutter", "registry.nersc.gov/x/app:1", "osu_bw",
    ]  # fmt: skip
    module = hook_tool.read_confs(str(modules))["climstack-perlmutter"]
    assert module["bind"] == [f"{s}:{d}" for s, d in plan.binds] + [
        f"{node}:{node}" for node in plan.devices
    ]
    root, here = tmp_path / "rootfs", [(s, d) for s, d in plan.binds if Path(s).exists()]
    assert here  # the plan's own directories (its links) are on this host
    for src, dst in here:  # as its hook mounts them
        rule = hook_tool.resolve_src_and_dest(f"{src}:{dst}", str(root), str(modules))
        assert rule == {src: str(root / dst.lstrip("/"))}
    config = SiteConfig.__new__(SiteConfig)  # without its probing of the host's podman
    config.modules_dir, config.log_level = str(modules), None
    config.default_args = config.default_run_args = []
    config.read_site_modules()
    args = config.get_cmd_extensions("run", {"climstack_perlmutter": True})
    assert {"--ipc=host", "--pid=host", "--env=SLURM_*", "--env=PALS_*"} <= set(args)
    assert config.shared_run is True
    lines, rank = runtime.job_lines(plan, "app:1", ["osu_bw"], here=True)
    assert f"export PODMANHPC_MODULES_DIR={modules}" in lines
    assert rank.startswith("podman-hpc run --rm --climstack-perlmutter ")
    assert rank.endswith(' "--volume=$PWD:$PWD" "--workdir=$PWD" app:1 osu_bw')


def test_archer2_and_setonix_run_singularity_gaea_apptainer():
    runtime = {s: sites.get(s).bind["runtime"] for s in CRAY_SITES}
    assert runtime["archer2"] == runtime["setonix"] == runtime["lumi"] == "singularity"
    assert runtime["gaea-c5"] == runtime["gaea-c6"] == runtime["frontier"] == "apptainer"
    assert runtime["perlmutter"] == "podman-hpc"


def test_bind_env_format_speaks_the_sites_runtime(cray_root, tmp_path):
    import subprocess

    from conftest import PROJECT_ROOT

    argv = [str(PROJECT_ROOT / "bin/climstack"), "bind", "archer2", "--root", str(cray_root)]
    argv += ["--format", "env", "--out", str(tmp_path / "plan")]
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "export SINGULARITY_BIND=" in proc.stdout and "APPTAINER" not in proc.stdout
