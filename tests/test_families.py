"""Host library families (NetCDF, HDF5) bound besides MPI.

Discovery on the synthetic Cray tree (GNU and CRAY flavours; the CCE runtime reached only
through the module environment's LD_LIBRARY_PATH) and bad input; then real runs under
Charliecloud: the image's nc-writer (MPI + NetCDF-4) on the host's Debian 12 NetCDF/HDF5,
and verify's refusals of Debian 11's NetCDF 4.7.4 / HDF5 1.10.6 and of the HDF5 1.14.4 of
h5py's wheel, each failing at run time as predicted once forced past the check."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import needs_charliecloud
from test_bind_containers import probe, ready, run

from climstack import pins
from climstack.bind import families, loader
from climstack.bind import plan as plans
from climstack.check import verify
from climstack.errors import ClimstackError
from climstack.inputs import sites
from climstack_dev import cray_tree, io_libraries
from climstack_dev import programs as helpers

NC_WRITER = "/opt/probe/bin/nc-writer"
H5_WRITER = "/opt/probe/bin/h5-writer"
DEBIAN_IO = {"netcdf": "/usr", "hdf5": "/usr/lib/x86_64-linux-gnu/hdf5/serial"}


@pytest.fixture(scope="module")
def cray_root(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to compile the synthetic Cray libraries")
    return cray_tree.cray_tree(tmp_path_factory.mktemp("cray"))


def test_cray_gnu_builds_come_from_the_site_externals(cray_root):
    plan = plans.make_plan(
        sites.get("archer2"),
        view=loader.View(cray_root),
        environ={},
        with_families={"netcdf": None},
    )
    gnu = f"{cray_tree.NETCDF}/gnu/9.1/lib"
    assert plan.families["netcdf"]["source"].startswith(f"{pins.PROJECT_ROOT}/site/archer2/")
    assert plan.families["netcdf"]["flavour"] == "gnu"
    # Cray's SONAME, and the name a Spack-built application asks for
    assert (
        plan.links["libnetcdf_parallel_gnu_91.so.19"] == f"{gnu}/libnetcdf_parallel_gnu_91.so.19"
    )
    assert plan.links["libnetcdf.so.19"] == plan.links["libnetcdf_parallel_gnu_91.so.19"]
    assert plan.links["libnetcdff.so.7"] == f"{gnu}/libnetcdff_parallel_gnu_91.so.7"
    rules = {entry["name"]: entry["rule"] for entry in plan.closure}
    assert rules["libnetcdf.so.19"] == "netcdf family"
    # site.yaml's list and --with add up; HDF5's version is read from .rodata
    plan = plans.make_plan(
        sites.get("archer2"),
        view=loader.View(cray_root),
        environ={},
        with_families=families.parse_with(["netcdf", "hdf5"]),
    )
    assert plan.families["hdf5"]["version"] == "1.12.2"
    assert plan.links["libhdf5.so.200"].endswith("/gnu/9.1/lib/libhdf5_parallel_gnu_91.so.200.2.0")
    assert {"libhdf5_hl.so.200", "libhdf5_fortran.so.200"} <= set(plan.links)
    assert not plan.warnings


def test_cce_flavour_needs_the_cce_runtime_from_the_module_environment(cray_root):
    view = loader.View(cray_root)
    chosen = {"netcdf": None, "hdf5": None}
    with pytest.raises(ClimstackError) as refused:
        plans.make_plan(
            sites.get("archer2"), view=view, environ={}, with_families=chosen, flavour="cray"
        )
    assert "libcraymath.so.1" in str(refused.value) and "LD_LIBRARY_PATH" in refused.value.fix
    # `module load PrgEnv-cray`: PE_ENV=CRAY and the CCE runtime on LD_LIBRARY_PATH
    environ = {"PE_ENV": "CRAY", "LD_LIBRARY_PATH": cray_tree.CCE_RUNTIME}
    plan = plans.make_plan(sites.get("archer2"), view=view, environ=environ, with_families=chosen)
    assert plan.flavour == "cray"
    mpi = plan.mpi["libraries"]["libmpi.so.12"]
    assert mpi == f"{cray_tree.CRAY_MPICH_CCE}/lib-abi-mpich/libmpi.so.12"  # ofi/cray/10.0
    assert plan.links["libnetcdf.so.19"].endswith(
        "/crayclang/14.0/lib/libnetcdf_parallel_cray.so.19"
    )
    rules = {entry["name"]: entry["rule"] for entry in plan.closure}
    for name in cray_tree.CCE_LIBRARIES:
        assert rules[name] == "LD_LIBRARY_PATH", name
        assert plan.links[name] == f"{cray_tree.CCE_RUNTIME}/{name}"
    assert not plan.warnings


def test_a_flavour_mix_is_warned_with_the_reason(cray_root):
    environ = {"LD_LIBRARY_PATH": cray_tree.CCE_RUNTIME}
    plan = plans.make_plan(
        sites.get("archer2"),
        view=loader.View(cray_root),
        prefix=cray_tree.CRAY_MPICH,  # the GNU MPI, given explicitly
        environ=environ,
        with_families={"netcdf": None, "hdf5": None},
        flavour="cray",
    )
    (warning,) = [w for w in plan.warnings if "netcdf" in w]
    assert "cray build" in warning and "gnu build" in warning and "--flavour" in warning


def test_bad_family_input_is_refused_naming_what_was_looked_for(cray_root, tmp_path):
    with pytest.raises(ClimstackError, match="unknown library family 'lapack'") as refused:
        families.parse_with(["netcdf,lapack"])
    assert "netcdf, hdf5, adios2, pnetcdf" in refused.value.fix
    with pytest.raises(ClimstackError, match="absolute path"):
        families.parse_with(["netcdf=usr"])
    # the local site has no NetCDF external (Spack builds it) and no module is loaded
    with pytest.raises(ClimstackError) as refused:
        plans.make_plan(sites.get("local"), environ={}, with_families={"pnetcdf": None})
    message = str(refused.value)
    assert "provides no pnetcdf" in message and "parallel-netcdf" in message
    assert "$CRAY_PARALLEL_NETCDF_PREFIX" in message
    # a prefix without the family's libraries
    with pytest.raises(ClimstackError) as refused:
        plans.make_plan(sites.get("local"), environ={}, with_families={"hdf5": str(tmp_path)})
    assert f"{tmp_path} (--with hdf5={tmp_path}) holds no hdf5 library" in str(refused.value)
    assert f"{tmp_path}/lib64" in str(refused.value)
    # no CRAY build beside the GNU one
    root = tmp_path / "root"
    shutil.copytree(cray_root, root, symlinks=True)
    shutil.rmtree(root / cray_tree.NETCDF.lstrip("/") / "crayclang")
    with pytest.raises(ClimstackError, match="no cray build beside .*netcdf-hdf5parallel"):
        families.find("netcdf", loader.View(root), sites.get("archer2"), {}, "cray")


def test_a_family_in_two_prefixes_joins_their_libraries(tmp_path):
    """Spack installs netcdf-c and netcdf-fortran apart: `--with netcdf=C:FORTRAN`."""
    debian = Path("/usr/lib/x86_64-linux-gnu")
    if not (debian / "libnetcdff.so.7").exists():
        pytest.skip("needs Debian's libnetcdf-dev and libnetcdff7 (bin/setup installs them)")
    c, fortran = tmp_path / "netcdf-c", tmp_path / "netcdf-fortran"
    for prefix, name in ((c, "libnetcdf.so.19"), (fortran, "libnetcdff.so.7")):
        (prefix / "lib").mkdir(parents=True)
        shutil.copy(debian / name, prefix / "lib" / name)
    assert families.parse_with([f"netcdf={c}:{fortran}"]) == {"netcdf": f"{c}:{fortran}"}
    host = families.find("netcdf", loader.View(Path("/")), None, {}, prefix=f"{c}:{fortran}")
    assert host.prefixes == [str(c), str(fortran)]
    assert {"libnetcdf.so.19", "libnetcdff.so.7"} <= set(host.libraries), host.libraries
    with pytest.raises(ClimstackError, match="each prefix must be an absolute path"):
        families.parse_with([f"netcdf={c}:relative/netcdf-fortran"])


# --- real runs: the image's nc-writer on other NetCDF/HDF5 builds ---------------------------


@pytest.fixture(scope="module")
def nc_image(tmp_path_factory):
    if not shutil.which("apt-get"):
        pytest.skip("needs apt to put Debian's NetCDF into the image")
    copy = tmp_path_factory.mktemp("netcdf") / "image"
    subprocess.run(["cp", "-al", str(io_libraries.netcdf_image()), str(copy)], check=True)
    return copy


def loaded(result) -> list[str]:
    return [line.split(": ", 1)[1] for line in result.stdout.splitlines() if "io-library:" in line]


def check(plan, image):
    return verify.check(NC_WRITER, plan, image)


@needs_charliecloud
def test_the_hosts_netcdf_and_hdf5_replace_the_images_own(nc_image, tmp_path):
    mpi = helpers.debian_mpich()
    own = ready(plans.make_plan(sites.get("local"), environ={}), nc_image, tmp_path / "own")
    result = probe(own, nc_image, mpi, executable=NC_WRITER)
    assert result.returncode == 0, result.stderr
    assert "/usr/lib/x86_64-linux-gnu/libnetcdf.so.19" in loaded(result)  # the image's
    plan = ready(
        plans.make_plan(sites.get("local"), environ={}, with_families=DEBIAN_IO),
        nc_image,
        tmp_path / "io",
    )
    report = check(plan, nc_image)
    assert report.passed, report.problems
    assert report.families["netcdf"]["from_host"] == ["libnetcdf.so.19"]
    assert report.families["netcdf"]["imported"] == 8 and not report.families["netcdf"]["missing"]
    assert report.families["hdf5"]["versions"] == {"image": "1.10.8", "host": "1.10.8"}
    result = probe(plan, nc_image, mpi, executable=NC_WRITER)
    assert result.returncode == 0, result.stderr
    assert "ranks: 2" in result.stdout and "netcdf: 4.9.0" in result.stdout
    host = "/opt/climstack/host/usr/lib/x86_64-linux-gnu"
    assert f"{host}/libnetcdf.so.19" in loaded(result)
    assert any(path.startswith(f"{host}/libhdf5_serial.so.103") for path in loaded(result))


@needs_charliecloud
def test_an_older_netcdf_is_refused_and_fails_as_predicted_when_forced(nc_image, tmp_path):
    host = io_libraries.bullseye_host()
    plan = plans.make_plan(sites.get("local"), environ={}, with_families={"netcdf": f"{host}/usr"})
    plan = ready(plan, nc_image, tmp_path)
    report = check(plan, nc_image)
    soname, hdf5 = report.problems  # and its closure brings Debian 11's HDF5 1.10.6 along
    assert "SONAME mismatch: libnetcdf.so.19" in soname and "SONAME major 18" in soname
    assert "HDF5 release mismatch" in hdf5
    # forced: the user links the 4.7.4 library under the name the application asks for
    (tmp_path / "lib" / "libnetcdf.so.19").symlink_to(plan.links["libnetcdf.so.18"])
    report = check(plan, nc_image)
    assert any("linked to the host's libnetcdf.so.18, major 18" in p for p in report.problems)
    assert report.families["netcdf"]["missing"] == ["nc_def_var_quantize"]  # new in 4.8.1
    result = probe(plan, nc_image, helpers.debian_mpich(), executable=NC_WRITER)
    assert result.returncode != 0
    assert "undefined symbol: nc_def_var_quantize" in result.stdout + result.stderr


NFF_USER = """#include <stdio.h>
extern void nf_inq_libvers_(void);  /* NetCDF-Fortran's: imported, never called */
int main(void) { printf("%p\\n", (void *)&nf_inq_libvers_); return 0; }
"""


@needs_charliecloud
def test_a_host_library_reaching_its_dependency_by_its_own_rpath_is_the_hosts(nc_image, tmp_path):
    """A host NetCDF-Fortran with DT_RPATH (libtool's link of Spack's netcdf-fortran) loads
    libnetcdf from the host's netcdf-c prefix, which the plan binds at its path, before
    the plan's links (RPATH outranks LD_LIBRARY_PATH): that is still the host's NetCDF."""
    debian = Path("/usr/lib/x86_64-linux-gnu")
    if not (debian / "libnetcdff.so.7").exists():
        pytest.skip("needs Debian's libnetcdf-dev and libnetcdff7 (bin/setup installs them)")
    c, fortran = tmp_path / "netcdf-c" / "lib", tmp_path / "netcdf-fortran" / "lib"
    for directory, name in ((c, "libnetcdf.so.19"), (fortran, "libnetcdff.so.7")):
        directory.mkdir(parents=True)
        shutil.copy(debian / name, directory / name)
    patchelf = ["patchelf", "--force-rpath", "--set-rpath", str(c), fortran / "libnetcdff.so.7"]
    subprocess.run(patchelf, check=True)
    source, user = tmp_path / "nff_user.c", nc_image / "opt/probe/bin/nff-user"
    source.write_text(NFF_USER)
    link = [f"-Wl,-rpath-link,{c}", fortran / "libnetcdff.so.7"]
    subprocess.run(["gcc", "-o", user, source, *link], check=True)
    prefixes = f"{c.parent}:{fortran.parent}"
    plan = plans.make_plan(sites.get("local"), environ={}, with_families={"netcdf": prefixes})
    plan = ready(plan, nc_image, tmp_path)
    report = verify.check("/opt/probe/bin/nff-user", plan, nc_image)
    assert report.passed, report.problems
    assert report.families["netcdf"]["from_host"] == ["libnetcdf.so.19", "libnetcdff.so.7"]
    result = run(plan, nc_image, ["/opt/probe/bin/nff-user"], env={"LD_DEBUG": "libs"})
    assert result.returncode == 0, result.stderr
    assert f"trying file={c}/libnetcdf.so.19" in result.stderr  # by the host's RPATH


def _site_with(tmp_path: Path, **bind_keys) -> Path:
    site = tmp_path / "site-local"
    shutil.copytree(pins.PROJECT_ROOT / "site" / "local", site)
    config = yaml.safe_load((site / "site.yaml").read_text())
    config["bind"].update(bind_keys)
    (site / "site.yaml").write_text(yaml.safe_dump(config))
    return site


@needs_charliecloud
def test_an_hdf5_release_mismatch_is_refused_unless_the_site_overrides(nc_image, tmp_path):
    host = io_libraries.bullseye_host()
    chosen = {"hdf5": f"{host}/usr"}  # 1.10.6 under the image's 1.10.8: the same SONAME
    plan = ready(
        plans.make_plan(sites.get("local"), environ={}, with_families=chosen), nc_image, tmp_path
    )
    report = check(plan, nc_image)
    (problem,) = report.problems
    assert "HDF5 release mismatch" in problem and "1.10.8" in problem and "1.10.6" in problem
    assert "HDF5_DISABLE_VERSION_CHECK: '1'" in problem and "bind_env" in problem
    # measured, and said in the refusal: Debian's HDF5 checks major.minor only, so this runs
    result = probe(plan, nc_image, helpers.debian_mpich(), executable=NC_WRITER)
    assert result.returncode == 0, result.stderr
    assert any(p.endswith("/libhdf5_serial.so.103.2.0") for p in loaded(result))  # 1.10.6
    # the site's override, from site.yaml (and families: listed there, prefix from --with)
    site = _site_with(tmp_path, families=["hdf5"], bind_env={"HDF5_DISABLE_VERSION_CHECK": "1"})
    plan = plans.make_plan(sites.get(str(site)), environ={}, with_families=chosen)
    plan = ready(plan, nc_image, tmp_path / "override")
    report = check(plan, nc_image)
    assert report.passed, report.problems
    assert report.families["hdf5"]["versions"]["override"] == "HDF5_DISABLE_VERSION_CHECK=1"


@needs_charliecloud
def test_an_hdf5_minor_mismatch_is_refused_and_aborts_as_predicted_when_forced(nc_image, tmp_path):
    wheel = io_libraries.wheel_hdf5()
    plan = plans.make_plan(sites.get("local"), environ={}, with_families={"hdf5": str(wheel)})
    assert plan.families["hdf5"]["version"] == "1.14.4"
    assert "libhdf5.so.310" in plan.links  # the wheel's libhdf5-a6e30693.so.310.4.0
    plan = ready(plan, nc_image, tmp_path)
    report = check(plan, nc_image)
    assert any("SONAME mismatch: libhdf5_serial.so.103" in p for p in report.problems)
    # forced: the 1.14 library under the 1.10 name; the image's libnetcdf calls
    # H5check_version(1, 10, 8), and upstream HDF5 aborts
    (tmp_path / "lib" / "libhdf5_serial.so.103").symlink_to(plan.links["libhdf5.so.310"])
    report = check(plan, nc_image)
    (version,) = [p for p in report.problems if p.startswith("HDF5 version mismatch")]
    assert "built against HDF5 1.10.8" in version and "loads HDF5 1.14.4" in version
    assert "unsafe" in version
    # 1.14 dropped H5Literate (now H5Literate1/2): predicted, and what stops nc-writer
    assert "H5Literate" in report.families["hdf5"]["missing"]
    result = probe(plan, nc_image, helpers.debian_mpich(), executable=NC_WRITER)
    assert result.returncode != 0
    assert "undefined symbol: H5Literate" in result.stderr
    # a serial program whose symbols 1.14 still has: HDF5's own version check stops it
    report = verify.check(H5_WRITER, plan, nc_image)
    assert not report.families["hdf5"]["missing"]
    assert [p for p in report.problems if p.startswith("HDF5 version mismatch")] == [version]
    result = run(plan, nc_image, [H5_WRITER])
    assert result.returncode == -6  # SIGABRT
    assert "Headers are 1.10.8, library is 1.14.4" in result.stderr


@needs_charliecloud
def test_slurm_requests_families_and_its_preflight_checks_them(nc_image, tmp_path):
    def slurm(plan_dir, *extra):
        return subprocess.run(
            [str(pins.PROJECT_ROOT / "bin/climstack"), "slurm", "local", "--plan", str(plan_dir)]
            + ["--image", str(nc_image), "--ntasks", "2", *extra, "--command", NC_WRITER],
            capture_output=True,
            text=True,
        )

    ready(plans.make_plan(sites.get("local"), environ={}), nc_image, tmp_path / "mpi")
    refused = slurm(tmp_path / "mpi", "--with", "netcdf")
    assert refused.returncode != 0 and "binds no host netcdf" in refused.stderr
    assert "climstack bind local --with netcdf --out DIR" in refused.stderr
    chosen = {"netcdf": f"{io_libraries.bullseye_host()}/usr"}  # NetCDF 4.7.4: refused
    ready(
        plans.make_plan(sites.get("local"), environ={}, with_families=chosen),
        nc_image,
        tmp_path / "bad",
    )
    refused = slurm(tmp_path / "bad", "--with", "netcdf")
    assert refused.returncode != 0 and "REFUSED: SONAME mismatch: libnetcdf" in refused.stderr
    ready(
        plans.make_plan(sites.get("local"), environ={}, with_families=DEBIAN_IO),
        nc_image,
        tmp_path / "ok",
    )
    written = slurm(tmp_path / "ok", "--with", "netcdf,hdf5")
    assert written.returncode == 0, written.stderr
    assert "srun" in written.stdout and NC_WRITER in written.stdout
