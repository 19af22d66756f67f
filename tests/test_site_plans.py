"""Every Cray site's bind plan, on a synthetic Cray PE in the layout the sites publish,
carries what the site's container guide binds by hand (site/<site>/site.yaml), and renders
for the runtime the site runs (Singularity on ARCHER2 and Setonix, Apptainer on Gaea)."""

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
#: the module environment: this tree's libfabric (each site pins its own version)
ENVIRON = {"LD_LIBRARY_PATH": "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"}


@pytest.fixture(scope="module")
def cray_root(tmp_path_factory):
    return cray_tree.cray_tree(tmp_path_factory.mktemp("cray"))


@pytest.mark.parametrize("site", CRAY_SITES)
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


@pytest.mark.parametrize("site", CRAY_SITES)
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
    """site/frontier on a CPE 25.09 tree (cray_tree.cray9_tree): the MPI found from the
    scope's external, its ANL base read as 4.1.2, libfabric 2.3.1 and what the site lists."""
    root = cray_tree.cray9_tree(tmp_path / "frontier")
    frontier = sites.get("frontier")
    plan = plans.make_plan(frontier, view=loader.View(root), environ={})
    assert (
        plan.mpi["libraries"]["libmpi.so.12"]
        == f"{cray_tree.CRAY_MPICH_9}/lib-abi-mpich/libmpi.so.12"
    )
    assert plan.mpi["version"] == "Cray MPICH 9.0.1.498 (ANL MPICH base 4.1.2)"
    closure = {entry["name"]: entry["host"] for entry in plan.closure}
    assert closure["libfabric.so.1"] == "/opt/cray/libfabric/2.3.1/lib64/libfabric.so.1.27.0"
    assert closure["libpmi.so.0"] == "/opt/cray/pe/pmi/6.1.16/lib/libpmi.so.0"
    assert closure["libxpmem.so.0"] == "/opt/cray/xpmem/2.11.3/lib64/libxpmem.so.0"
    assert set(frontier.bind["bind_libraries"]) <= set(plan.links)
    assert {"/run/cxi", "/var/spool/slurmd"} <= {dst for _, dst in plan.binds}
    assert [(p["key"], p["missing"]) for p in plan.plugins] == [("ofi:cxi", [])]
    # the container pin this base allows, and one it refuses (containers/frontier: 4.1.2)
    mpich_base.check_container_mpich("4.1.2", "9.0.1", "containers/frontier/spack.yaml")
    with pytest.raises(ClimstackError):
        mpich_base.check_container_mpich("4.3.1", "9.0.1", "containers/frontier/spack.yaml")


def test_archer2_and_setonix_run_singularity_gaea_apptainer():
    runtime = {s: sites.get(s).bind["runtime"] for s in CRAY_SITES}
    assert runtime["archer2"] == runtime["setonix"] == "singularity"
    assert runtime["gaea-c5"] == runtime["gaea-c6"] == runtime["frontier"] == "apptainer"


def test_bind_env_format_speaks_the_sites_runtime(cray_root, tmp_path):
    import subprocess

    from conftest import PROJECT_ROOT

    argv = [str(PROJECT_ROOT / "bin/climstack"), "bind", "archer2", "--root", str(cray_root)]
    argv += ["--format", "env", "--out", str(tmp_path / "plan")]
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "export SINGULARITY_BIND=" in proc.stdout and "APPTAINER" not in proc.stdout
