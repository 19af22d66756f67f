"""Every environment concretizes --fresh, offline, the same on any host (real Spack)."""

import pytest
import yaml
from conftest import lock_nodes, roots

from climstack import spack
from climstack.stack import environments, lock_cache
from climstack_dev import LOCK_HASHES
from climstack_dev.cpe_tree import cray_sites

#: site -> (target of its compute nodes' CPU, OS of the Cray PE externals), from the
#: machines' published hardware: ARCHER2 EPYC 7742, Gaea C5 EPYC 7H12, Gaea C6 EPYC 9654,
#: Setonix EPYC 7763 (Milan), Frontier EPYC 7A53 (Trento)
CRAY_SITES = {
    "archer2": ("zen2", "sles15"),
    "gaea-c5": ("zen2", "sles15"),
    "gaea-c6": ("zen4", "sles15"),
    "setonix": ("zen3", "sles15"),
    "frontier": ("zen3", "sles15"),
    "lumi": ("zen3", "sles15"),
    "perlmutter": ("zen3", "sles15"),
}


def test_every_cray_site_is_checked_here():
    """A new Cray site (site/<name>/ with Cray PE externals) must name its CPU above."""
    assert set(CRAY_SITES) == set(cray_sites())


#: packages that on a Cray site must come from the Cray PE, never be built
CRAY_PE = {
    "cray-mpich",
    "cray-pmi",
    "libfabric",
    "xpmem",
    "hdf5",
    "netcdf-c",
    "netcdf-fortran",
    "cray-libsci",
    "gcc",
    "cce",
}
BENCHMARKS = {"osu-micro-benchmarks", "mpibench", "netcdf-bench", "benchio"}
STACK = {"hdf5", "netcdf-c", "netcdf-fortran"}


def by_name(lock):
    nodes = {}
    for node in lock_nodes(lock):
        nodes.setdefault(node["name"], []).append(node)
    return nodes


def mpi_providers(lock):
    specs = lock["concrete_specs"]
    return {
        specs[dep["hash"]]["name"]
        for node in lock_nodes(lock)
        for dep in node.get("dependencies", [])
        if "mpi" in dep["parameters"].get("virtuals", [])
    }


@pytest.mark.parametrize("site", sorted(CRAY_SITES))
def test_cray_site_uses_the_cray_pe(concretized, site):
    target, cray_os = CRAY_SITES[site]
    lock = concretized(site)
    nodes = by_name(lock)

    assert mpi_providers(lock) == {"cray-mpich"}
    for name in STACK | {"cray-mpich"}:
        (node,) = nodes[name]
        assert "external" in node, f"{name} was not taken from the Cray PE"
        assert node["external"]["path"].startswith("/opt/cray/"), node["external"]
    assert nodes["hdf5"][0]["parameters"]["mpi"] and nodes["hdf5"][0]["parameters"]["fortran"]
    assert nodes["netcdf-c"][0]["parameters"]["mpi"]

    built_pe = [
        n["name"] for n in lock_nodes(lock) if n["name"] in CRAY_PE and "external" not in n
    ]
    assert built_pe == [], f"Cray PE packages would be built from source: {built_pe}"

    wrong_target = {n["name"] for n in lock_nodes(lock) if n["arch"]["target"]["name"] != target}
    assert not wrong_target, f"not target={target}: {wrong_target}"
    wrong_os = {n["name"] for n in lock_nodes(lock) if n["arch"]["platform_os"] != cray_os}
    assert not wrong_os, f"not os={cray_os}: {wrong_os}"

    assert BENCHMARKS <= {r["name"] for r in roots(lock)}


def test_local_site_uses_debian_packages(concretized):
    lock = concretized("local")
    nodes = by_name(lock)
    assert mpi_providers(lock) == {"mpich"}
    (mpich,) = nodes["mpich"]
    assert mpich["external"]["path"] == "/usr" and mpich["version"] == "4.0.2"
    (hdf5,) = nodes["hdf5"]
    assert hdf5["external"]["path"].endswith("hdf5/mpich")
    assert "openmpi" not in nodes
    assert BENCHMARKS <= {r["name"] for r in roots(lock)}


def test_the_solver_options_that_save_time_keep_archer2s_dags(concretized, tmp_path):
    """stack.yaml's concretizer:static_analysis only prunes the problem: ARCHER2's DAG
    hashes are those of a solve without it (the same held for every environment when it
    was adopted: benchmarks/concretize_times.py --compare)."""
    env = tmp_path / "archer2"
    env.mkdir()
    manifest = environments.absolute_manifest(environments.resolve("archer2"))
    manifest["spack"]["concretizer"] = {"static_analysis": False}
    (env / "spack.yaml").write_text(yaml.safe_dump(manifest))
    lock_cache.concretize(env)
    without = yaml.safe_load((env / "spack.lock").read_text())
    assert set(without["concrete_specs"]) == set(concretized("archer2")["concrete_specs"])


def test_every_lockfile_records_the_hashes_of_its_own_nodes(concretized):
    """The DAG hashes a lockfile records are those Spack derives from the nodes it records,
    so a lockfile (and a buildcache keyed by it) means the same to every Spack. Spack v1.1.0
    broke this for 43 of container-archer2's 45 nodes (it hashed externals before naming
    their namespace, spack/spack#51708); v1.1.1, pinned since, solves the same DAGs."""
    locks = []
    for name, env_dir in environments.find_environments().items():
        concretized(name)
        locks.append(str(env_dir / "spack.lock"))
    found = spack.DEFAULT.python(LOCK_HASHES, *locks)
    assert found == {lock: [] for lock in locks}
