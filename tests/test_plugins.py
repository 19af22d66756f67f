"""Network plugins: the bind plan closes over what the MPI loads with dlopen (libfabric
providers, UCX modules, verbs drivers; run.plugins), and `climstack parity` proves by trace,
natively and in a real Charliecloud container, that the same providers load."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import needs_charliecloud

from climstack import pins
from climstack.bind import loader
from climstack.bind import plan as plans
from climstack.bind import network_plugins
from climstack.check import parity
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack_dev import cray_tree
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

PROBE = "/opt/probe/bin/mpi-probe"
FABRIC = "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"
CXI_PLUGIN = f"{FABRIC}/libfabric/libcxi-fi.so"


@pytest.fixture(scope="module")
def cray_root(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to compile the synthetic Cray libraries")
    return cray_tree.cray_tree(tmp_path_factory.mktemp("cray"))


def archer2_expecting(tmp_path: Path, providers: list[str]) -> Path:
    """A copy of the ARCHER2 scope (with the cray-ex scope it includes) expecting `providers`."""
    site = tmp_path / "site" / "archer2"
    shutil.copytree(pins.PROJECT_ROOT / "site" / "archer2", site)
    shutil.copytree(pins.PROJECT_ROOT / "site" / "cray-ex", site.parent / "cray-ex")
    config = yaml.safe_load((site / "site.yaml").read_text())
    config["bind"]["providers"] = providers
    (site / "site.yaml").write_text(yaml.safe_dump(config))
    return site


def without(root: Path, tmp_path: Path, path: str) -> Path:
    copy = tmp_path / "root"
    shutil.copytree(root, copy, symlinks=True)
    (copy / path.lstrip("/")).unlink()
    return copy


def test_plugin_file_names_give_family_and_provider():
    assert network_plugins.identify("libverbs-fi.so") == ("ofi", "verbs")
    assert network_plugins.identify("libverbs-1.1-fi.so") == ("ofi", "verbs-1.1")
    assert network_plugins.identify("libuct_ib_mlx5.so.0.0.0") == ("ucx", "ib_mlx5")
    assert network_plugins.identify("libmlx5-rdmav34.so") == ("verbs", "mlx5")
    assert network_plugins.identify("libmpi_gtl_cuda.so.0") == ("gtl", "cuda")
    assert network_plugins.identify("libfabric.so.1") is None
    assert network_plugins.identify("libuct.so.0") is None


def test_cray_provider_plugin_is_closed_over_and_reachable_from_the_links(cray_root, tmp_path):
    plan = plans.write(
        plans.make_plan(sites.get("archer2"), view=loader.View(cray_root), environ={}), tmp_path
    )
    cxi = next(p for p in plan.plugins if p["key"] == "ofi:cxi")
    assert cxi["path"] == CXI_PLUGIN and "libcxi.so.1" in cxi["needs"] and not cxi["missing"]
    entry = next(e for e in plan.closure if e["name"] == "libcxi.so.1")
    assert entry["needed_by"] == [CXI_PLUGIN]  # listed as needed by the plugin
    assert plan.links["libcxi.so.1"] == "/opt/climstack/host/usr/lib64/libcxi.so.1"
    assert plan.links["libjson-c.so.3"]  # libcxi's own dependency
    # $ORIGIN of libfabric.so.1 loaded through the links is the links directory
    assert plan.links["libfabric"] == f"{FABRIC}/libfabric"
    mlx5 = next(p for p in plan.plugins if p["key"] == "verbs:mlx5")  # plugin_dirs
    assert mlx5["path"] == "/usr/lib64/libibverbs/libmlx5-rdmav34.so"
    assert plan.providers == ["verbs"] and not plan.warnings


def test_missing_need_of_a_plugin_warns_unless_its_provider_is_expected(cray_root, tmp_path):
    root = without(cray_root, tmp_path, "/usr/lib64/libcxi.so.1")
    plan = plans.make_plan(
        sites.get("archer2"), view=loader.View(root), environ={}
    )  # expects verbs
    assert plan.warnings == [
        f"plugin ofi:cxi ({CXI_PLUGIN}) cannot load: the loader cannot find libcxi.so.1"
    ]
    assert "libcxi.so.1" not in plan.links
    site = archer2_expecting(tmp_path, ["cxi"])
    with pytest.raises(ClimstackError) as refused:
        plans.make_plan(sites.get(str(site)), view=loader.View(root), environ={})
    assert f"ofi:cxi ({CXI_PLUGIN}) needs libcxi.so.1" in str(refused.value)
    assert "providers:" in refused.value.fix


def test_site_yaml_refuses_a_malformed_provider(tmp_path):
    site = archer2_expecting(tmp_path, ["cxi", "not a provider"])
    proc = subprocess.run(
        [str(pins.PROJECT_ROOT / "bin" / "climstack"), "bind", str(site), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "site.yaml" in proc.stderr and "providers" in proc.stderr


def test_wheel_mpich_plan_binds_the_rdma_libraries_its_plugins_need(tmp_path):
    mpi = helpers.mpich("3.4.3")
    plan = plans.make_plan(sites.get("local"), prefix=str(mpi.prefix), environ={})
    needed_by = {e["name"]: e["needed_by"] for e in plan.closure}
    for name in ("libibverbs.so.1", "librdmacm.so.1", "libefa.so.1", "libmlx5.so.1"):
        assert name in plan.links, name
        assert any("/lib/mpich/" in who for who in needed_by[name]), needed_by[name]
    verbs = next(p for p in plan.plugins if p["key"] == "ofi:verbs")
    assert {"libibverbs.so.1", "librdmacm.so.1"} <= set(verbs["needs"])
    # libpsm2 (Omni-Path) is not on this host: a warning naming the plugin, not a refusal
    assert any("ofi:psmx2" in w and "libpsm2.so.2" in w for w in plan.warnings)
    assert "libuct_ib.so.0" not in plan.links  # a sibling plugin, found through $ORIGIN


# --- parity, traced in real containers ---------------------------------------------------


def ready(plan, image, directory):
    plan = plans.write(plan, directory)
    CHARLIECLOUD.prepare_image(plan, image)
    return plan


def trace(plan, image, mpi: helpers.Mpi, native: Path, **env) -> parity.Report:
    launcher = [str(mpi.bin / "mpiexec"), "-n", "2"]
    return parity.run(plan, image, [str(native)], PROBE, launcher, env=mpi.env(**env))


#: what the plugins of PyPI's MPICH 3.4.3 need from the host's rdma-core, and no MPI library
RDMA = (
    "libibverbs.so.1",
    "librdmacm.so.1",
    "libefa.so.1",
    "libmlx5.so.1",
    "libnl-3.so.200",
    "libnl-route-3.so.200",
)


@needs_charliecloud
def test_parity_passes_with_plugin_closure_and_names_what_a_plan_without_it_lost(image, tmp_path):
    mpi = helpers.mpich("3.4.3")
    native = helpers.compile_probe(mpi, tmp_path / "native" / "mpi-probe")
    plan = ready(
        plans.make_plan(sites.get("local"), prefix=str(mpi.prefix), environ={}),
        image,
        tmp_path / "ok",
    )
    report = trace(plan, image, mpi, native)
    assert report.ok, parity.render(report)
    assert "ofi:verbs" in report.native.providers and "ofi:verbs" in report.container.providers
    assert "verbs" in report.container.registered
    assert set(report.native.libraries()) == set(report.container.libraries())
    assert len(report.container.mapped) == 2 and not report.shadowed

    old = plans.make_plan(sites.get("local"), prefix=str(mpi.prefix), environ={})
    for name in RDMA:  # the plan without the plugins' closure, as before
        del old.links[name]
    old = ready(old, image, tmp_path / "old")
    proc = subprocess.run(
        [
            str(pins.PROJECT_ROOT / "bin" / "climstack"),
            "parity",
            "--plan",
            old.directory,
            "--image",
            str(image),
            "--native",
            str(native),
            "--probe",
            PROBE,
            "--launcher",
            f"{mpi.bin}/mpiexec -n 2",
        ],
        capture_output=True,
        text=True,
        env=mpi.env(),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lost = [line for line in proc.stdout.splitlines() if line.startswith("lost: ")]
    assert any("libibverbs.so.1" in line for line in lost)
    assert any("librdmacm.so.1" in line for line in lost)
    assert any(line.endswith("/libverbs-fi.so") for line in lost)
    assert (
        "LOST PROVIDER: ofi:verbs: its plugin needs libibverbs.so.1, libnl-3.so.200, "
        "libnl-route-3.so.200, librdmacm.so.1, not in the plan" in proc.stdout
    )
    assert "verbs" not in proc.stdout.split("container:")[1].split("\n")[2]  # not registered


@needs_charliecloud
def test_parity_of_ucx_modules_under_debian_mpich(image, tmp_path):
    """Debian's MPICH 4.0.2 is ch4:ucx: UCX finds its modules in ucx/ beside libucs, which
    in the container is the links directory."""
    mpi = helpers.debian_mpich()
    native = helpers.compile_probe(mpi, tmp_path / "native" / "mpi-probe")
    plan = ready(plans.make_plan(sites.get("local"), environ={}), image, tmp_path / "ok")
    needed_by = {e["name"]: e["needed_by"] for e in plan.closure}  # the modules' rdma-core
    assert all("/ucx/libuct_ib.so" in who for who in needed_by["libmlx5.so.1"])
    assert all("/ucx/libuct_rdmacm.so" in who for who in needed_by["librdmacm.so.1"])
    report = trace(plan, image, mpi, native)
    assert report.ok, parity.render(report)
    assert {"ucx:cma", "ucx:ib", "ucx:rdmacm"} <= set(report.container.providers)
    assert {"self", "sysv", "posix"} <= set(report.container.transports)

    broken = plans.make_plan(sites.get("local"), environ={})
    del broken.links["ucx"]
    report = trace(ready(broken, image, tmp_path / "broken"), image, mpi, native)
    assert not report.ok
    assert {"ucx:cma", "ucx:ib", "ucx:rdmacm"} <= set(report.failed)
    assert any("/ucx/libuct_ib.so" in path for path in report.lost)


@needs_charliecloud
def test_intel_libfabric_finds_its_providers_through_the_links(image, tmp_path):
    """Intel MPI's libfabric loads its providers from beside itself: in the container that is
    the links directory, so each provider is linked there too (found by the parity check)."""
    mpi = helpers.impi()
    native = helpers.compile_probe(helpers.mpich("3.4.3"), tmp_path / "native" / "mpi-probe")
    plan = ready(
        plans.make_plan(sites.get("local"), prefix=str(mpi.prefix), environ={}), image, tmp_path
    )
    assert plan.links["libtcp-fi.so"].endswith("/lib/libtcp-fi.so")
    report = trace(plan, image, mpi, native, I_MPI_FABRICS="ofi")
    assert report.ok, parity.render(report)
    assert {"ofi:tcp", "ofi:shm", "ofi:rxm"} <= set(report.container.providers)
    assert "tcp" in report.container.registered
