"""The standard-ABI image on MPIs without the standard ABI, through mpi_abi_wrapper
(climstack.bind.abi_wrapper, climstack.check.wrapper_check): MPICH 3.4.3 (Cray MPICH 8.1's
base), MPICH 4.1.3 (Cray MPICH 9's base 4.1.2), Debian's MPICH 4.0.2 and Open MPI 5.0.11,
each with the wrapper Spack built against it (climstack.bench.abi.wrapper_builds). `bind
--abi standard` binds the wrapper over the host MPI; verify checks libmpiwrapper's link map
(the ABI it is built against, every MPI symbol it imports), confirmed by the image's ld.so;
a negative control for each refusal; `make local`'s `bench abi` record of the runs."""

import dataclasses
import json
import shutil
import subprocess

import pytest

import slurm_cluster
from climstack.bench.abi import abi, abi_hosts, abi_report, wrapper_builds
from climstack.bind import abi_wrapper, loader, stages
from climstack.bind import plan as plans
from climstack.check import verdict, verify, wrapper_check
from climstack.common import wheels
from climstack.errors import ClimstackError
from climstack.image import image
from climstack.inputs import sites

NAME = "container-mpi-abi"
PROBE = f"{abi.VIEW}/bin/mpi-probe"
LIBRARY = {
    "mpich-3.4.3": "MPICH Version: 3.4.3",
    "mpich-4.1": "MPICH Version: 4.1.3",
    "debian-mpich": "MPICH Version: 4.0.2",
    "openmpi-5": "Open MPI v5.0.11",
}


@pytest.fixture(scope="module")
def wrappers():
    return wrapper_builds.prefixes()


@pytest.fixture(scope="module")
def hosts(wrappers):
    return {name: abi_hosts.host(name) for name in abi_hosts.WRAPPED}


def plan_on(host, out, wrapper=None, environ=None) -> plans.Plan:
    """The standard plan on `host` (its own wrapper unless `wrapper` names another)."""
    made = plans.make_plan(
        sites.get("local"),
        "bind",
        loader.View(host.root),
        host.prefix,
        environ={} if environ is None else environ,
        abi="standard",
        wrapper=host.wrapper if wrapper is None else wrapper,
    )
    return plans.write(made, out)


# --- the plan


def test_bind_links_the_wrapper_over_each_host_mpi(hosts, tmp_path):
    for name, host in hosts.items():
        made = plan_on(host, tmp_path / name)
        assert made.wrapped and made.abi == "standard"
        assert made.links["libmpi_abi.so.1"].endswith(f"/lib/{abi_wrapper.FRONT}")
        assert made.links[abi_wrapper.BACK].endswith(f"/lib/{abi_wrapper.BACK}")
        own = made.mpi["wrapper"]["wraps"]
        assert own in made.links and made.mpi["libraries"][own].startswith(host.prefix)
        assert made.env[abi_wrapper.VARIABLE] == f"{plans.LINKS_DIR}/{abi_wrapper.BACK}"
        assert made.mpi["version"] == f"{made.mpi['wrapper']['mpi']} through mpi_abi_wrapper"
    assert (
        hosts["openmpi-5"].wrapper
        and plan_on(hosts["openmpi-5"], tmp_path / "o").mpi["wrapper"]["wraps"] == "libmpi.so.40"
    )


def test_the_module_environment_names_the_wrapper(hosts, tmp_path):
    host = hosts["mpich-3.4.3"]
    back = f"{host.wrapper}/lib/{abi_wrapper.BACK}"
    for environ in ({abi_wrapper.VARIABLE: back}, {abi_wrapper.ROOT_VARIABLE: host.wrapper}):
        made = plan_on(host, tmp_path / "env", wrapper="", environ=environ)
        assert made.wrapped and made.mpi["wrapper"]["source"] == f"${next(iter(environ))}"


def test_a_host_with_its_own_abi_keeps_it_though_a_wrapper_is_loaded(hosts, tmp_path):
    """MPICH 5.0.2 has libmpi_abi.so.1: a wrapper's module in the environment changes
    nothing; only --wrapper asks for it."""
    mpich5 = abi_hosts.host("mpich")
    environ = {abi_wrapper.ROOT_VARIABLE: hosts["mpich-3.4.3"].wrapper}
    made = plan_on(mpich5, tmp_path / "own", wrapper="", environ=environ)
    assert not made.wrapped and made.mpi["version"] == "MPICH 5.0.2"


def test_without_a_wrapper_the_refusal_names_one(hosts):
    host = hosts["mpich-3.4.3"]
    with pytest.raises(ClimstackError) as error:
        plans.make_plan(sites.get("local"), "bind", prefix=host.prefix, abi="standard", environ={})
    assert "no MPI-5 standard ABI library" in error.value.message
    assert "spack install mpi-abi-wrapper" in error.value.fix and "--wrapper" in error.value.fix


def test_mpich_5_0_1s_libmpi_abi_so_0_is_named():
    """MPICH 5.0.0 and 5.0.1 install libmpi_abi.so.0 (a configure bug fixed in 5.0.2)."""
    prefix = str(wheels.installed("mpich", "5.0.1"))
    with pytest.raises(ClimstackError) as error:
        plans.make_plan(sites.get("local"), "bind", prefix=prefix, abi="standard", environ={})
    assert "libmpi_abi.so.0 is MPICH 5.0.0 or 5.0.1's" in error.value.message
    assert "MPICH >= 5.0.2" in error.value.fix


def test_a_wrapper_of_another_mpi_is_refused_by_bind(hosts, tmp_path):
    for host, other in (("mpich-3.4.3", "openmpi-5"), ("openmpi-5", "debian-mpich")):
        with pytest.raises(ClimstackError) as error:
            plan_on(hosts[host], tmp_path / host, wrapper=hosts[other].wrapper)
        wrapped = "Open MPI's ABI (libmpi.so.40)" if other == "openmpi-5" else "the MPICH ABI"
        assert f"is built against {wrapped}" in error.value.message, error.value.message
        assert "spack install mpi-abi-wrapper" in error.value.fix


# --- verify


def test_verify_accepts_the_probe_confirmed_by_the_images_ld_so(abi_image, hosts, tmp_path):
    for name, host in hosts.items():
        made = abi.host_plan(host, tmp_path, abi_image)
        report = verify.check(PROBE, made, abi_image, runtime_image=abi_image)
        assert report.ok, (name, report.problems, report.oracle)
        assert report.picks["libmpi_abi.so.1"]["host"].endswith(f"/{abi_wrapper.FRONT}")
        assert report.wrapper["built_against"] == made.mpi["wrapper"]["wraps"]
        assert report.wrapper["imports"] > 700 and report.wrapper["lacking"] == 0
        assert report.wrapper["oracle"] == "agrees"
        assert "its MPI imports" in verdict.render(report)


def test_a_wrapper_of_another_mpi_in_the_plan_is_refused_by_verify(abi_image, hosts, tmp_path):
    """A plan whose libmpiwrapper link was pointed at Open MPI's wrapper (by hand, or a host
    that changed): refused by name, before anything runs."""
    made = abi.host_plan(hosts["mpich-3.4.3"], tmp_path, abi_image)
    links = {**made.links, abi_wrapper.BACK: f"{hosts['openmpi-5'].wrapper}/lib/libmpiwrapper.so"}
    binds = [*made.binds, [f"{hosts['openmpi-5'].wrapper}/lib"] * 2]
    spoiled = plans.write(
        dataclasses.replace(made, links=links, binds=binds), tmp_path / "spoiled"
    )
    report = verify.check(PROBE, spoiled, abi_image)
    assert any(
        "is built against Open MPI's ABI (libmpi.so.40), but the plan's host MPI" in p
        for p in report.problems
    ), report.problems


def test_a_wrapper_whose_rpath_names_another_mpich_is_refused(abi_image, hosts, tmp_path):
    """The wrapper built against MPICH 4.1 with a DT_RPATH to it (patchelf: what Spack's
    default linking writes) on MPICH 3.4.3, the same ABI: the RPATH would load 4.1's
    libmpi.so.12 ahead of the plan's. Refused by bind, and by verify on a plan pointed at it
    by hand; its own wrapper passes (the control)."""
    older, newer = hosts["mpich-3.4.3"], hosts["mpich-4.1"]
    newer_lib = str(wheels.installed("mpich", "4.1.3") / "lib")
    copy = tmp_path / "rpath"
    shutil.copytree(newer.wrapper, copy, symlinks=True)
    back = copy / "lib" / abi_wrapper.BACK
    subprocess.run(["patchelf", "--force-rpath", "--set-rpath", newer_lib, back], check=True)
    with pytest.raises(ClimstackError) as error:
        plan_on(older, tmp_path / "bind", wrapper=str(copy))
    assert "mpich-4.1.3/lib/libmpi.so.12 (by its RPATH), not the host MPI" in str(error.value)
    made = abi.host_plan(older, tmp_path / "own", abi_image)
    assert verify.check(PROBE, made, abi_image).passed
    links = {**made.links, abi_wrapper.BACK: str(back)}
    more = [[str(copy / "lib")] * 2, [newer_lib] * 2]
    spoiled = plans.write(
        dataclasses.replace(made, links=links, binds=[*made.binds, *more]), tmp_path / "hand"
    )
    abi.runtimes.get(abi.RUNTIME).prepare_image(spoiled, abi_image)
    report = verify.check(PROBE, spoiled, abi_image)
    assert any("loads libmpi.so.12 from" in p and "mpich-4.1.3" in p for p in report.problems)


def test_a_wrapper_lacking_calls_of_the_host_mpi_is_refused(abi_image, hosts, tmp_path):
    """The wrapper Spack built against MPICH 4.1 (RUNPATH: the plan's libmpi.so.12 wins) on
    MPICH 3.4.3: bind accepts it, verify names the calls 3.4.3 lacks that libmpiwrapper
    imports (MPI-4.0's persistent collectives, the large-count `_c` calls)."""
    host = dataclasses.replace(hosts["mpich-3.4.3"], wrapper=hosts["mpich-4.1"].wrapper)
    report = verify.check(PROBE, abi.host_plan(host, tmp_path, abi_image), abi_image)
    lacking = [p for p in report.problems if f"{abi_wrapper.BACK} imports" in p]
    assert lacking and "MPI_Allgather_init" in lacking[0], report.problems
    assert report.wrapper["lacking"] > 100


def test_a_plan_whose_variable_names_another_wrapper_is_refused(abi_image, hosts, tmp_path):
    made = abi.host_plan(hosts["debian-mpich"], tmp_path, abi_image)
    env = {**made.env, abi_wrapper.VARIABLE: "/opt/elsewhere/libmpiwrapper.so"}
    spoiled = plans.write(dataclasses.replace(made, env=env), tmp_path / "spoiled")
    report = verify.check(PROBE, spoiled, abi_image)
    assert any(f"not {wrapper_check.BACK}" in p for p in report.problems), report.problems


# --- the runs


def test_the_image_runs_the_probe_and_osu_on_each_host(abi_image, hosts, tmp_path):
    for name, host in hosts.items():
        made = abi.host_plan(host, tmp_path / name, abi_image)
        found = verify.parse_probe(abi.in_image(made, host, abi_image, [PROBE]))
        assert " ".join(found["library"].split()).startswith(LIBRARY[name]), (name, found)
        assert found["loaded"] == f"{plans.LINKS_DIR}/libmpi_abi.so.1" and found["abi"] == "1.0"
        latency = abi.in_image(
            made, host, abi_image, [abi.image_program("osu_latency"), "-m", "8:8"]
        )
        assert abi._by_size(latency, "osu_latency")[0][8] > 0


def test_open_mpi_prints_its_own_error_messages_in_the_image(abi_image, hosts, tmp_path):
    """Open MPI reads its help texts (and the site's MCA parameter files) under its prefix
    at run time: the plan binds them at their own paths (stages.OPEN_MPI_DATA), so a rank
    that fails in MPI_Init says why. The control: the same plan without those binds prints
    only "Sorry!  You were supposed to get help about ... No such file"."""
    host = hosts["openmpi-5"]
    made = abi.host_plan(host, tmp_path / "plan", abi_image)
    data = {f"{host.prefix}/{d}" for d in stages.OPEN_MPI_DATA}
    assert data <= {target for _, target in made.binds}, made.binds
    without = dataclasses.replace(made, binds=[b for b in made.binds if b[1] not in data])
    environ = {**host.environment, "OMPI_MCA_pml": "no-such-pml"}  # MPI_Init fails

    def failed(plan) -> str:
        run = abi.command(plan, host, abi_image, [PROBE], ranks=1)
        done = subprocess.run(run, env=environ, capture_output=True, text=True, timeout=300)
        assert done.returncode != 0, done.stdout
        return done.stdout + done.stderr

    told = failed(made)
    assert "A requested component was not found" in told and "no-such-pml" in told, told
    assert "You were supposed to get help about" in failed(without)


def test_the_image_runs_as_a_slurm_step_on_mpich_3_4_3(abi_image, hosts, tmp_path):
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian slurm-wlm, munge)")
    made = abi.host_plan(hosts["mpich-3.4.3"], tmp_path / "plan", abi_image)
    code, output = slurm_cluster.run_step(made, abi_image, [PROBE], tmp_path)
    assert code == 0, output
    found = verify.parse_probe(output)
    assert " ".join(found["library"].split()).startswith(LIBRARY["mpich-3.4.3"]), output
    assert found["ranks"] == "2", output
    assert found["loaded"] == f"{plans.LINKS_DIR}/libmpi_abi.so.1"


def test_bench_abi_records_the_wrapped_hosts_and_mom6_bit_for_bit(abi_image):
    """`make local`'s record (abi.recorded: its comparisons made again from the files)."""
    results = abi.recorded(image.inputs_key(NAME))
    if results is None:
        pytest.skip("no `bench abi` record of this image: `make local` writes it")
    for name in abi_hosts.WRAPPED:
        host = results["hosts"][name]
        assert host["route"] == "wrapper"
        assert " ".join(host["library"].split()).startswith(LIBRARY[name])
        assert len(results["sizes"][f"{name}/osu_latency/1"]) == results["repeats"]
        assert results["model"]["hosts"][name]["reason"] == ""
    across = results["model"]["across_hosts"]
    assert all(across[f"mpich vs {name}"]["differences"] == [] for name in abi_hosts.WRAPPED)
    native = results["model"]["native"]
    assert native["host"] == "debian-mpich" and native["differences"] == []
    assert native["compared"] >= 3
    table = abi_report.cost_table(results)
    assert "| Debian's MPICH 4.0.2 | wrapper |" in table
    assert json.dumps(results["model"]["hosts"]["debian-mpich"]["native_main_loop_s"])
