"""The MPI-5 standard ABI lane, its C side (the Fortran side: test_mpi_abi_fortran.py): the
image of containers/mpi-abi (its C programs link libmpi_abi.so.1 alone), `bind --abi
standard` on each host MPI of the ABI this machine provides (MPICH 5.0.2, Intel MPI 2021.18,
Open MPI 6.0.0rc2 in a sid root filesystem), verify's checks with a negative control for
each refusal, and the image run unchanged on the three, each with its own launcher, also as
a Slurm step."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT
from spython.main.parse.parsers import SingularityParser

import slurm_cluster
from climstack import spack
from climstack.bench.abi import abi, abi_report
from climstack.bind import discover, loader
from climstack.bind import plan as plans
from climstack.check import verify
from climstack.errors import ClimstackError
from climstack.image import build_args, image
from climstack.inputs import sites
from climstack.bench.abi import abi_hosts
from climstack.stack import containers, environments, lock_cache
from climstack_dev.programs import compile_probe, mpich, spoiled_standard_plan

NAME = "container-mpi-abi"
PROBE = f"{abi.VIEW}/bin/mpi-probe"
#: the image's programs verify reads: the probe, an OSU benchmark, NetCDF-Bench (HDF5, NetCDF)
PROGRAMS = (PROBE, abi.image_program("osu_latency"), f"{abi.VIEW}/bin/benchtool")


@pytest.fixture(scope="module")
def hosts():
    """The hosts with the standard ABI of their own (through mpi_abi_wrapper:
    test_abi_wrapper.py)."""
    return {name: abi_hosts.host(name) for name in abi_hosts.OWN_ABI}


def standard_plan(host: abi_hosts.Host, out: Path) -> plans.Plan:
    made = plans.make_plan(
        sites.get("local"), "bind", loader.View(host.root), host.prefix, abi="standard"
    )
    return plans.write(made, out)


# --- the recipe and its Spack environment


def test_the_recipe_builds_on_debian_13_with_the_wheel_and_no_xpmem(tmp_path):
    text = (environments.resolve(NAME) / containers.RECIPE).read_text()
    (tmp_path / "app.def").write_text(build_args.render(text, {}))
    stages = SingularityParser(str(tmp_path / "app.def")).recipe
    build, final = stages["build"], stages["final"]
    assert build.fromHeader == final.fromHeader == "debian:13"  # glibc 2.41 >= Open MPI's 2.38
    post = "\n".join(build.install)
    assert "--prefix /opt/mpich-5.0.2 mpich==5.0.2" in post  # the image's MPI, as external
    assert "--link-xpmem" not in post and "climstack.image.image_check /opt/views/view" in post
    assert "/opt/mpich-5.0.2 /opt" in final.layer_files["build"]
    assert (
        "site/container-mpi-abi /opt/climstack/site/container-mpi-abi" in build.files
    )  # the ABI scope and its overlay repo


def test_the_environment_links_every_mpi_program_to_the_standard_abi(tmp_path):
    """Concretized for real: MPICH is the overlay recipe's, +abi, the wheel's 5.0.2, under
    mpif (the provider of mpi); the C slice and the model, without the xpmem stub."""
    env = environments.resolve(NAME)
    lock_cache.concretize(env)
    mpich_ = containers.check_mpi(env)
    assert mpich_["version"] == "5.0.2" and mpich_["parameters"]["abi"] is True
    assert mpich_["namespace"] == "climstack_mpi_abi" and mpich_["external"]
    nodes = json.loads((env / "spack.lock").read_text())["concrete_specs"].values()
    names = {n["name"] for n in nodes}
    assert {"mpi-probe", "osu-micro-benchmarks", "mpibench", "netcdf-bench", "hdf5"} <= names
    assert {"mpif", "netcdf-fortran", "fms", "mom6"} <= names
    assert "xpmem-stub" not in names and "openmpi" not in names


OVERLAY = PROJECT_ROOT / "site" / "container-mpi-abi" / "repo"


def test_the_overlay_recipe_passes_spacks_audit_and_style():
    proc = spack.run(
        "audit", "packages", "mpich", "mpif", env=environments.resolve(NAME), check=False
    )
    assert proc.returncode == 0 and "FAILED" not in proc.stdout, proc.stdout + proc.stderr
    ours = PROJECT_ROOT / "repo"  # the style settings of our main repository
    for tool in (
        ["flake8", "--config", ours / ".flake8"],
        ["black", "--check", "--config", ours / "pyproject.toml"],
        ["isort", "--check-only", "--settings-path", ours],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", *tool, OVERLAY / "packages"], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def _abi_env(tmp_path: Path, mpich_: str, mpi: str = "mpif") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "spack.yaml").write_text(
        f"""spack:
  include: [{PROJECT_ROOT}/environments/stack.yaml, {PROJECT_ROOT}/site/container-mpi-abi]
  specs: [mpi-probe]
  packages:
    all:
      providers:
        mpi:: [{mpi}]
    mpi::
      require: [{mpi}]
    mpich:
      require:: ['{mpich_}']
      buildable: true
  container: {{format: singularity}}
"""
    )
    return tmp_path


def test_an_mpich_without_the_standard_abi_is_refused(tmp_path):
    """By check-mpi when MPICH is the MPI (a C-only image), by the solve under mpif."""
    env = _abi_env(tmp_path / "c", "@4.3.2 ~abi", mpi="mpich")
    lock_cache.concretize(env)
    with pytest.raises(ClimstackError) as error:
        containers.check_mpi(env)
    assert "mpich@4.3.2 ~abi cannot build the MPI-5 standard ABI image" in str(error.value)
    assert "5.0.2" in error.value.fix
    with pytest.raises(ClimstackError) as error:
        lock_cache.concretize(_abi_env(tmp_path / "fortran", "@4.3.2 ~abi"))
    assert "mpif depends on mpich@5.0.2:+abi" in str(error.value)


def test_the_recipe_refuses_mpich_5_0_1_whose_pmpi_lives_apart(tmp_path):
    env = _abi_env(tmp_path, "@5.0.1 +abi")
    with pytest.raises(ClimstackError) as error:
        lock_cache.concretize(env)
    assert "libpmpi_abi" in str(error.value)


# --- discovery, on the real libraries


def test_each_host_mpi_is_found_by_its_standard_abi_library(hosts, tmp_path):
    expected = {"mpich": "MPICH 5.0.2", "intel": "Intel MPI 2021.18", "openmpi": "Open MPI 6"}
    for name, host in hosts.items():
        made = standard_plan(host, tmp_path / name)
        assert made.abi == "standard" and made.mpi["version"].startswith(expected[name])
        assert "libmpi_abi.so.1" in made.links and "libmpi.so.12" not in made.links
        # only Intel MPI has a Fortran ABI
        assert ("libmpifort_abi.so.1" in made.links) == (name == "intel")


@pytest.mark.parametrize("prefix", ["/usr", "mpich-3.4.3"])
def test_a_host_without_the_standard_abi_is_refused_with_the_alternatives(prefix):
    """Debian's MPICH 4.0.2 and MPICH 3.4.3 (Cray MPICH 8.1's base) have no libmpi_abi."""
    where = prefix if prefix.startswith("/") else str(mpich("3.4.3").prefix)
    with pytest.raises(ClimstackError) as error:
        plans.make_plan(sites.get("local"), "bind", prefix=where, abi="standard", environ={})
    assert "no MPI-5 standard ABI library (libmpi_abi.so.1" in str(error.value)
    assert "without --abi standard" in error.value.fix and "--mode hybrid" in error.value.fix


def test_distribution_names_are_found_and_two_need_a_choice(hosts, tmp_path):
    """Debian names the files libmpi_abi_<implementation>.so.1.0.0 (SONAME libmpi_abi.so.1)
    and lets update-alternatives pick libmpi_abi.so.1."""
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy2(
        Path(hosts["mpich"].prefix) / "lib/libmpi_abi.so.1", lib / "libmpi_abi_mpich.so.1.0.0"
    )
    found = discover.find_standard(str(tmp_path), loader.View(), "--prefix")
    assert found.libraries["libmpi_abi.so.1"] == str(lib / "libmpi_abi_mpich.so.1.0.0")
    assert found.version == "MPICH 5.0.2"
    openmpi = hosts["openmpi"].root / "usr/lib/x86_64-linux-gnu/libmpi_abi_openmpi.so.1.0.0"
    shutil.copy2(openmpi, lib / "libmpi_abi_openmpi.so.1.0.0")
    with pytest.raises(ClimstackError) as error:
        discover.find_standard(str(tmp_path), loader.View(), "--prefix")
    assert "holds 2 MPI-5 ABI libraries" in str(error.value)
    assert "update-alternatives" in error.value.fix
    (lib / "libmpi_abi.so.1").symlink_to("libmpi_abi_openmpi.so.1.0.0")
    found = discover.find_standard(str(tmp_path), loader.View(), "--prefix")
    assert found.version.startswith("Open MPI 6")


# --- verify


def test_the_images_programs_pass_verify_on_every_host(abi_image, hosts, tmp_path):
    for name, host in hosts.items():
        made = standard_plan(host, tmp_path / name)
        for program in PROGRAMS:
            report = verify.check(program, made, abi_image)
            assert report.passed, (name, program, report.problems)
            assert report.abi == "standard" and report.missing == []
            pick = report.picks["libmpi_abi.so.1"]
            assert pick["path"] == f"{plans.LINKS_DIR}/libmpi_abi.so.1"


def test_an_abi_mismatch_is_refused_both_ways(abi_image, hosts, tmp_path):
    wheel = mpich("5.0.2")
    mpich_abi_program = compile_probe(wheel, tmp_path / "mpich-abi-probe")
    standard = standard_plan(hosts["mpich"], tmp_path / "standard")
    report = verify.check(str(mpich_abi_program), standard)
    assert not report.passed and "built for the MPICH ABI (libmpi.so.12)" in report.problems[0]
    assert "bind without --abi standard" in report.problems[0]
    mpich_plan = plans.write(
        plans.make_plan(sites.get("local"), "bind", prefix=str(wheel.prefix), environ={}),
        tmp_path / "mpich",
    )
    report = verify.check(PROBE, mpich_plan, abi_image)
    assert not report.passed and "built for the MPI-5 standard ABI" in report.problems[0]
    assert "--abi standard" in report.problems[0]


def _fortran_program(tmp_path: Path, intel: abi_hosts.Host) -> Path:
    """A Fortran MPI program on the standard ABI: Intel's libmpifort_abi.so.1 and
    libmpi_abi.so.1 (the only Fortran ABI there is), RUNPATH at Intel's lib."""
    source = tmp_path / "hello.f90"
    source.write_text(
        "program hello\n  integer :: ierr\n  call mpi_init(ierr)\n"
        "  call mpi_finalize(ierr)\nend program hello\n"
    )
    lib = Path(intel.prefix) / "lib"
    output = tmp_path / "hello-fortran-abi"
    subprocess.run(
        ["gfortran", "-o", output, source, f"-L{lib}", "-lmpifort_abi", "-lmpi_abi",
         "-Wl,--enable-new-dtags", f"-Wl,-rpath,{lib}"],
        check=True,
    )  # fmt: skip
    return output


def test_a_fortran_program_needs_a_host_with_a_fortran_abi(hosts, tmp_path):
    program = str(_fortran_program(tmp_path, hosts["intel"]))
    report = verify.check(program, standard_plan(hosts["mpich"], tmp_path / "mpich"))
    assert not report.passed
    assert any("has no Fortran ABI (libmpifort_abi.so.1" in p for p in report.problems)
    report = verify.check(program, standard_plan(hosts["intel"], tmp_path / "intel"))
    assert report.passed, report.problems


def test_a_host_library_without_pmpi_is_refused(abi_image, hosts, tmp_path):
    """As MPICH 5.0.0-5.0.1 built it: PMPI_Send not in libmpi_abi.so.1 (spoiled in a copy)."""
    made = spoiled_standard_plan(Path(hosts["mpich"].prefix), tmp_path, "PMPI_Send", "QMPI_Send")
    report = verify.check(PROBE, made, abi_image)
    assert not report.passed
    assert any("lack the PMPI_* twins" in p and "PMPI_Send" in p for p in report.problems)
    assert verify.check(PROBE, standard_plan(hosts["mpich"], tmp_path / "whole"), abi_image).passed


def test_an_image_whose_glibc_is_older_than_open_mpis_is_refused(hosts, abi_image, tmp_path):
    """The same probe in a Debian 12 root (this host's glibc 2.36): sid's Open MPI needs
    GLIBC_2.38 from the image's C library."""
    old = tmp_path / "debian12"
    for directory in ("usr/lib/x86_64-linux-gnu", "usr/lib64", "opt/probe"):
        (old / directory).mkdir(parents=True)
    (old / "lib").symlink_to("usr/lib")  # Debian's merged /usr
    (old / "lib64").symlink_to("usr/lib64")
    for name in ("libc.so.6", "libm.so.6"):
        shutil.copy2(f"/lib/x86_64-linux-gnu/{name}", old / "usr/lib/x86_64-linux-gnu" / name)
    shutil.copy2("/lib64/ld-linux-x86-64.so.2", old / "usr/lib64")
    shutil.copytree("/etc/ld.so.conf.d", old / "etc/ld.so.conf.d")  # the multiarch directory
    shutil.copy2("/etc/ld.so.conf", old / "etc/ld.so.conf")
    probe = loader.View(abi_image).resolve(PROBE)[1]
    shutil.copy2(probe, old / "opt/probe/mpi-probe")
    report = verify.check(
        "/opt/probe/mpi-probe", standard_plan(hosts["openmpi"], tmp_path / "p"), old
    )
    assert "GLIBC_2.38" in report.glibc_missing
    assert any("use an image with a newer glibc" in p for p in report.problems)


# --- runs: one image, three host MPIs, each its own launcher


def test_one_image_runs_on_the_three_host_mpis(abi_image, hosts, tmp_path):
    titles = {"mpich": "MPICH Version:", "intel": "Intel(R) MPI Library", "openmpi": "Open MPI v6"}
    for name, host in hosts.items():
        made = abi.host_plan(host, tmp_path / name, abi_image)
        output = abi.in_image(made, host, abi_image, [PROBE])
        found = verify.parse_probe(output)
        assert found["library"].startswith(titles[name]), output
        assert found["loaded"] == f"{plans.LINKS_DIR}/libmpi_abi.so.1"
        assert found["ranks"] == "2" and found["abi"] == "1.0"
        latency = abi.in_image(
            made, host, abi_image, [abi.image_program("osu_latency"), "-m", "8:8"]
        )
        assert abi._by_size(latency, "osu_latency")[0][8] > 0


def test_the_image_runs_as_a_slurm_step_on_mpich(abi_image, hosts, tmp_path):
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian slurm-wlm, munge)")
    made = abi.host_plan(hosts["mpich"], tmp_path / "plan", abi_image)
    code, output = slurm_cluster.run_step(made, abi_image, [PROBE], tmp_path)
    assert code == 0, output
    found = verify.parse_probe(output)
    assert found["library"].startswith("MPICH Version:") and found["abi"] == "1.0", output
    assert found["loaded"] == f"{plans.LINKS_DIR}/libmpi_abi.so.1" and found["ranks"] == "2"


def test_bench_abi_reports_the_matrix_with_the_same_netcdf_data(abi_image, tmp_path):
    """`make local`'s record of this image when there is one (abi.recorded: the files
    compared again), else a run."""
    results = abi.recorded(image.inputs_key(NAME))
    if results is None:
        out = tmp_path / "abi"
        results = abi.compare(abi_image, out, abi.osu_tarball(), ("osu_latency",), repeats=2)
        assert json.loads((out / "abi.json").read_text())["repeats"] == 2
    n = results["repeats"]
    assert set(results["hosts"]) == set(abi_hosts.NAMES)
    assert all(len(results["ratios"][f"{h}/osu_latency"]) == n for h in abi_hosts.NAMES)
    assert all(not v["differences"] and v["variables"] for v in results["netcdf"].values())
    table = abi_report.matrix_table(results)
    assert "| osu_latency |" in table and f"n={n}" in table and "the same data" in table
    rows = abi_report.compatibility({**results, "image": str(abi_image)}, tmp_path, None, ["C"])
    verdicts = {row["host"]: row["verdict"] for row in rows if row["language"] == "C"}
    titles = [h.title for h in map(abi_hosts.host, abi_hosts.NAMES)]
    # the hosts without the ABI (MPICH 3.4.3, 4.1.3, 4.0.2, Open MPI 5) through the wrapper
    assert [verdicts[t] for t in titles] == [abi_report.CONFIRMED] * len(abi_hosts.NAMES)
    routes = {row["host"]: row["route"] for row in rows}
    assert [routes[t] for t in titles] == ["native ABI"] * 3 + ["wrapper"] * 4
