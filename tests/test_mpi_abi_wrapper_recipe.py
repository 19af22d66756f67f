"""mpi_abi_wrapper, the MPI-5 standard ABI over a host MPI that lacks it (its recipe:
repo/packages/mpi-abi-wrapper): each Cray site's environment builds it against that site's
external cray-mpich (the committed lockfiles, no solve), the workstation and the images do
not; and, real, Spack builds it against each stand-in host MPI of this machine
(climstack.bench.abi.wrapper_builds, once per set of inputs), each libmpiwrapper.so linked
to that MPI's library with a RUNPATH to it, and a program of the standard ABI runs on each
through its own launcher."""

import json
import os
import subprocess

import pytest
from conftest import lock_nodes, roots

from climstack.bench.abi import wrapper_builds
from climstack.bind import elf
from climstack.common import process
from climstack.errors import ClimstackError
from climstack.stack import environments
from climstack.stack.sources import git_sources
from climstack_dev.cpe_tree import cray_sites

PACKAGE = wrapper_builds.PACKAGE
#: every MPI library a libmpiwrapper.so of these hosts may be linked to
MPI_LIBRARIES = {host.library for host in map(wrapper_builds.HOSTS.get, wrapper_builds.WRAPPED)}


def test_the_recipe_pins_the_commit_the_offline_route_assembles():
    """The source comes as the local environment's git versions do (the archive assembled
    into the source mirror: the fetched copy lacks a blob, so a checkout would fail)."""
    commit = git_sources.ASSEMBLED[PACKAGE]
    assert f'commit="{commit}"' in wrapper_builds.RECIPE.read_text()
    (source,) = [s for s in git_sources.GIT_SOURCES if s.package == PACKAGE]
    assert source.upstream == "https://github.com/eschnett/mpi_abi_wrapper.git"


def test_only_the_cray_sites_build_it():
    """stack.yaml's `abi_wrapper` joins the Cray sites' specs, not the workstation's or an
    image's (whose MPI is their own, not a host's)."""
    using = {
        name
        for name, env_dir in environments.find_environments().items()
        if "$abi_wrapper" in (env_dir / "spack.yaml").read_text()
    }
    assert using == set(cray_sites())


@pytest.mark.parametrize("site", sorted(cray_sites()))
def test_each_cray_site_builds_it_against_its_cray_mpich(concretized, site):
    lock = concretized(site)  # the committed lockfile, copied in: no solve
    specs = lock["concrete_specs"]
    (wrapper,) = [node for node in roots(lock) if node["name"] == PACKAGE]
    (mpi,) = [
        specs[dep["hash"]]
        for dep in wrapper["dependencies"]
        if "mpi" in dep["parameters"]["virtuals"]
    ]
    assert mpi["name"] == "cray-mpich" and mpi["external"]["path"].startswith("/opt/cray/pe/")
    # it adds itself alone: the stack's cmake and python serve its build
    names = [node["name"] for node in lock_nodes(lock)]
    assert names.count("cmake") == names.count("python") == names.count(PACKAGE) == 1


@pytest.fixture(scope="module")
def built():
    """Each host's install (made once per set of inputs; `make local`'s bench step pays it)."""
    return wrapper_builds.prefixes()


def test_each_host_mpi_gets_an_install_of_its_own(built):
    assert set(built) == set(wrapper_builds.WRAPPED)
    assert len(set(built.values())) == len(built)
    for name, prefix in built.items():
        for part in ("lib/libmpi_abi.so", "lib/libmpiwrapper.so", "include/mpi.h", "bin/mpicc"):
            assert (prefix / part).is_file(), (name, part)
        assert elf.read(prefix / "lib" / "libmpi_abi.so").soname == "libmpi_abi.so"
        # libmpi_abi finds its libmpiwrapper with no variable set: the path compiled in
        back = str(prefix / "lib" / "libmpiwrapper.so").encode()
        assert back in (prefix / "lib" / "libmpi_abi.so").read_bytes(), name
        # bin/mpicc names the real compiler, not Spack's wrapper of the build
        assert "/spack/env/" not in (prefix / "bin" / "mpicc").read_text(), name


@pytest.mark.parametrize("name", sorted(wrapper_builds.WRAPPED))
def test_libmpiwrapper_needs_its_host_mpi_and_finds_it_by_runpath(built, name):
    host = wrapper_builds.HOSTS[name]
    back = elf.read(built[name] / "lib" / "libmpiwrapper.so")
    assert [lib for lib in back.needed if lib in MPI_LIBRARIES] == [host.library]
    assert back.rpath == []  # RUNPATH: a launcher's LD_LIBRARY_PATH wins over it
    others = {
        str(h.prefix() / "lib")
        for n, h in wrapper_builds.HOSTS.items()
        if n != name and n in wrapper_builds.WRAPPED
    }
    assert not others & set(back.runpath)
    if host.wheel:
        assert str(host.prefix() / "lib") in back.runpath
        assert (host.prefix() / "lib" / host.library).exists()
    else:  # Debian's, in the loader's default directory: no RUNPATH names it
        assert (wrapper_builds.DEBIAN_PREFIX / "lib/x86_64-linux-gnu" / host.library).exists()


def test_a_warm_call_starts_nothing(built, monkeypatch):
    def refuse(command, *args, **kwargs):
        raise AssertionError(f"a warm call started {command}")

    monkeypatch.setattr(process, "_start", refuse)
    assert wrapper_builds.prefixes() == built
    assert wrapper_builds.prefixes(["openmpi-5"]) == {"openmpi-5": built["openmpi-5"]}


def test_an_unknown_host_is_refused_with_the_names():
    with pytest.raises(ClimstackError) as error:
        wrapper_builds.prefixes(["mpich-9"])
    assert "mpich-9" in error.value.message and "debian-mpich" in error.value.fix


PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0, one = 1, length;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Get_library_version(version, &length);
  if (rank == 0) printf("ranks %d sum %d library %.20s\n", size, sum, version);
  MPI_Finalize();
  return sum != size;
}
"""
#: each host's own launcher
LAUNCHERS = {
    "mpich-3.4.3": ["bin/mpiexec.hydra"],
    "mpich-4.1": ["bin/mpiexec.hydra"],
    "debian-mpich": ["bin/mpiexec.mpich"],
    "openmpi-5": ["bin/mpirun", "--oversubscribe"]
    + (["--allow-run-as-root"] if os.geteuid() == 0 else []),
}
BANNERS = {"openmpi-5": "Open MPI v5.0.11"}


@pytest.mark.parametrize("name", sorted(wrapper_builds.WRAPPED))
def test_a_program_of_the_standard_abi_runs_on_each_host(built, name, tmp_path):
    """Compiled once with the install's own mpicc (its mpi.h, libmpi_abi.so alone), run on
    2 ranks by the host's launcher: the wrapper built for that host carries the calls."""
    source = tmp_path / "allreduce.c"
    source.write_text(PROGRAM)
    program = tmp_path / "allreduce"
    mpicc = built[name] / "bin" / "mpicc"
    subprocess.run([mpicc, "-o", program, source], check=True, timeout=120)
    needed = elf.read(program).needed
    assert "libmpi_abi.so" in needed and not MPI_LIBRARIES & set(needed)
    launcher, *options = LAUNCHERS[name]
    argv = [wrapper_builds.HOSTS[name].prefix() / launcher, *options, "-n", "2", program]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPI_ABI_WRAPPER")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    banner = BANNERS.get(name, "MPICH Version")  # the host's own library answers
    assert f"ranks 2 sum 2 library {banner}" in proc.stdout, proc.stdout


def test_the_prefixes_recorded_are_the_installs_spack_made(built):
    """What a warm call returns is what the build recorded beside its stamp."""
    recorded = json.loads((wrapper_builds.directory() / "prefixes.json").read_text())
    assert {name: str(prefix) for name, prefix in built.items()} == recorded
    assert all(str(p).startswith(str(wrapper_builds.directory())) for p in built.values())
