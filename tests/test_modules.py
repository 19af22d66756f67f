"""The native stack as Lmod modules (`climstack modules`, Spack's `spack module lmod
refresh` with site/local/modules): a user with Debian's Lmod and no Spack loads the MPI and
netcdf-fortran, builds a NetCDF-Fortran MPI program with what the modules set, runs it on 2
ranks and reads its file; the program links the stack's NetCDF, not the system's. Bad
input is named: a site without module configuration, a root that cannot be written."""

import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from climstack import pins, spack
from climstack.bind import plan as planner
from climstack.bench.run.local import IMAGE
from climstack.check import verify
from climstack.image import sif
from climstack.inputs import sites
from climstack.launch import runtimes
from climstack.stack import environments, install, modules

LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")
CLIMSTACK = pins.PROJECT_ROOT / "bin" / "climstack"
PROGRAM = """\
program prog
  use mpi
  use netcdf
  implicit none
  integer :: ierr, rank, ncid, varid, dimid
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  if (rank == 0) then
    call check(nf90_create("out.nc", NF90_CLOBBER, ncid))
    call check(nf90_def_dim(ncid, "x", 4, dimid))
    call check(nf90_def_var(ncid, "v", NF90_INT, [dimid], varid))
    call check(nf90_enddef(ncid))
    call check(nf90_put_var(ncid, varid, [1, 2, 3, 4]))
    call check(nf90_close(ncid))
  end if
  print '(a,i0,a,a)', "rank ", rank, " netcdf ", trim(nf90_inq_libvers())
  call MPI_Finalize(ierr)
contains
  subroutine check(status)
    integer, intent(in) :: status
    if (status /= NF90_NOERR) then
      print *, trim(nf90_strerror(status)); stop 1
    end if
  end subroutine
end program
"""
#: what a user types: no Spack, only the modules (Debian's mpif90 adds -L/usr/lib, so
#: NetCDF-C's own -L goes on the line too, as nc-config gives it)
SESSION = """\
set -e
. {init}
module use {core}
command -v spack && exit 9
module -t avail 2>&1 | sed 's/^/avail: /'
module load mpich netcdf-fortran
module -t list 2>&1 | sed 's/^/loaded: /'
mpif90 -o prog prog.f90 $(nf-config --fflags) $(nf-config --flibs) $(nc-config --libs)
mpiexec -n 2 ./prog
ncdump -h out.nc | sed 's/^/header: /'
ldd prog | sed -n 's/^\\t*\\(libnetcdf[^ ]*\\) => \\([^ ]*\\).*/linked: \\1 \\2/p'
"""


def climstack(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLIMSTACK, *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def prefixes():
    found = install.installed(environments.resolve("local"))
    if "netcdf-fortran" not in found:
        pytest.fail("the local environment is not installed: run `make local` first")
    return found


def test_a_user_builds_and_runs_a_netcdf_fortran_mpi_program_with_the_modules(prefixes, tmp_path):
    if not LMOD_INIT.is_file():
        pytest.skip("needs Debian's lmod (bin/setup installs it)")
    made = climstack("modules", "local", "--root", str(tmp_path / "tree"))
    assert made.returncode == 0, made.stderr
    core = made.stdout.split("module use ")[1].split()[0]
    work = tmp_path / "work"
    work.mkdir()
    (work / "prog.f90").write_text(PROGRAM)
    script = SESSION.format(init=LMOD_INIT, core=core)
    user = ["env", "-i", f"HOME={tmp_path}", "PATH=/usr/bin:/bin", "bash", "-c", script]
    proc = subprocess.run(user, capture_output=True, text=True, cwd=work, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    avail = {line.split()[1].split("/")[0] for line in lines if line.startswith("avail: ")}
    assert {"mpich", "hdf5"} <= avail and "glibc" not in avail  # an implicit one: hidden
    assert "netcdf-fortran" not in avail  # in the MPI's tree: it opens when the MPI loads
    loaded = [line.split()[1] for line in lines if line.startswith("loaded: ")]
    assert "mpich/4.0.2" in loaded and "netcdf-fortran/4.5.4" in loaded, loaded
    ranks = sorted(line.split(" of ")[0] for line in lines if line.startswith("rank "))
    assert ranks == ["rank 0 netcdf 4.9.3", "rank 1 netcdf 4.9.3"], lines  # the stack's
    assert "header: \tx = 4 ;" in lines
    linked = dict(line.split()[1:3] for line in lines if line.startswith("linked: "))
    assert set(linked) == {"libnetcdff.so.7", "libnetcdf.so.22"}, linked  # not Debian's .so.19
    assert linked["libnetcdf.so.22"].startswith(str(prefixes["netcdf-c"]))
    assert linked["libnetcdff.so.7"].startswith(str(prefixes["netcdf-fortran"]))


def test_a_site_without_module_configuration_is_named():
    proc = climstack("modules", "local-cce")
    assert proc.returncode == 2
    assert "site local-cce has no module configuration" in proc.stderr
    assert "site/local-cce/modules/modules.yaml is missing" in proc.stderr


# --- a Cray site's modules, rendered from its lock (nothing installed here)

RENDER = Path(__file__).parent / "data" / "render_modules.py"


@pytest.mark.parametrize("site", ["archer2", "gaea-c6"])  # Cray MPICH 8.1.27 and 8.1.32
def test_a_cray_sites_modules_name_the_pe_modules_as_prerequisites(site):
    """What `climstack modules SITE` writes after `spack install` at the centre, rendered
    by Spack from the site's lock: no module of ours for a package of the Cray PE (each
    external with Cray modules is excluded, and only they), nothing of theirs rewritten
    (no /opt/cray path),
    and each module Spack built names the PE's own modules it needs as prerequisites; a
    flat tree of names and versions."""
    gateway = spack.DEFAULT.scoped(modules.scope_of(site))
    found = gateway.python(RENDER, env=environments.resolve(site))
    pe = {n for n, m in found.items() if m["external"] and m["external_modules"]}
    assert pe == {n for n, m in found.items() if m["text"] is None}, "the PE's, excluded"
    assert not any("/opt/cray" in m["text"] for m in found.values() if m["text"])
    mom6 = found["mom6"]
    assert mom6["file"].endswith(f"modules/{site}/linux-sles15-x86_64/Core/mom6/2024-09-27.lua")
    prereqs = [line for line in mom6["text"].splitlines() if line.startswith("prereq(")]
    for name in ("cray-mpich", "netcdf-fortran", "gcc"):
        for module in found[name]["external_modules"]:
            assert f'prereq("{module}")' in prereqs, (name, prereqs)
    assert 'depends_on("fms/' in mom6["text"] and 'depends_on("cray-' not in mom6["text"]


def test_a_refresh_that_fails_leaves_the_published_tree_as_it_was(tmp_path):
    """A refresh over a tree users load from: archer2's environment is not installed here,
    so Spack writes no module; the tree published before stays, whole, at its path."""
    root = tmp_path / "tree"
    (root / "site" / "Core" / "app").mkdir(parents=True)
    (root / "site" / "Core" / "app" / "1.0.lua").write_text('whatis("published before")\n')
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    proc = climstack("modules", "archer2", "--root", str(root))
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "fix:" in proc.stderr
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
    assert (
        root / "site" / "Core" / "app" / "1.0.lua"
    ).read_text() == 'whatis("published before")\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]  # nothing aside left


def test_a_root_that_cannot_be_written_is_named_and_nothing_is_written(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = climstack("modules", "local", "--root", str(blocker / "tree"))
    assert proc.returncode == 2
    assert f"module root {blocker / 'tree'}: {blocker} is not a directory" in proc.stderr
    assert sorted(tmp_path.iterdir()) == [blocker]


# --- the image as a module


@pytest.fixture(scope="module")
def image_and_plan(archer2_image, tmp_path_factory):
    """The ARCHER2 image `make local` built and the local bind plan under Charliecloud,
    the plan's mount points in the image (as `bench local` makes them)."""
    image_dir = archer2_image
    made = planner.make_plan(sites.get("local"), environ={})
    plan = planner.write(made, tmp_path_factory.mktemp("plan"))
    runtimes.get("charliecloud").prepare_image(plan, image_dir)
    return image_dir, plan


@pytest.mark.parametrize("form", ["directory", "sif"])
def test_the_image_as_a_module_runs_its_programs_on_the_host_mpi_in_the_working_directory(
    form, image_and_plan, tmp_path
):
    """`module load` the image's module (the image directory under Charliecloud, its SIF
    under Apptainer): `mpiexec -n 2 mpi-probe` loads the host MPI in the container (the
    plan's link), `ncgen` writes a file into the user's directory and `ncdump -h` reads it
    back; the file is on the host."""
    if not LMOD_INIT.is_file():
        pytest.skip("needs Debian's lmod (bin/setup installs it)")
    image_dir, plan = image_and_plan
    if form == "sif":
        image_dir = sif.default_destination(IMAGE)
        if not image_dir.is_file():
            pytest.fail(f"no SIF {image_dir}: run `make local` first")
        made = planner.make_plan(sites.get("local"), environ={}, runtime="apptainer")
        plan = planner.write(made, tmp_path / "plan")
    root = tmp_path / "containers"
    made = climstack("modules", "local", "--image", str(image_dir), "--plan", plan.directory,
                     "--root", str(root), "--name", "archer2-image")  # fmt: skip
    assert made.returncode == 0, made.stderr
    verified = re.search(r"(\d+) MPI programs verified under the plan, (\d+) serial", made.stdout)
    assert verified and int(verified.group(1)) >= 3, made.stdout  # mpi-probe, OSU, MOM6 ...
    assert "--model-only" not in made.stderr  # each confirmed by the image's own ld.so
    if form == "sif":  # the ranks of a program that starts MPI share one container
        shared = {p.name for p in (root / "archer2-image" / "latest" / "bin").iterdir()
                  if " exec --sharens " in p.read_text()}  # fmt: skip
        assert {"mpi-probe", "MOM6", "benchio"} <= shared, shared
        assert not {"ncdump", "ncgen", "bpls"} & shared, shared  # MPI loaded, never started
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.cdl").write_text("netcdf data {\ndimensions:\n  x = 3 ;\nvariables:\n"
                                   "  int v(x) ;\ndata:\n  v = 1, 2, 3 ;\n}\n")  # fmt: skip
    script = (
        f". {LMOD_INIT}; module use {root}; module load archer2-image/latest; "
        "command -v mpi-probe; mpiexec -n 2 mpi-probe; ncgen -o data.nc data.cdl; "
        "ncdump -h data.nc"
    )
    # a user of their own home: the project's Apptainer is found in the publisher's cache
    user = ["env", "-i", f"HOME={tmp_path}", "USER=root", "PATH=/usr/bin:/bin", "bash", "-c",
            script]  # fmt: skip
    proc = subprocess.run(user, capture_output=True, text=True, cwd=work, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{root}/archer2-image/latest/bin/mpi-probe" in proc.stdout
    probe = verify.parse_probe(proc.stdout)
    assert probe["ranks"] == "2" and probe["loaded"] == f"{planner.LINKS_DIR}/libmpi.so.12"
    assert probe["library"] == "MPICH Version:\t4.0.2"  # the host's, not the image's 3.4
    assert "\tx = 3 ;" in proc.stdout and (work / "data.nc").stat().st_size > 0


@pytest.mark.parametrize(
    "case", ["no image", "no plan", "another site", "podman", "sif", "refused plan"]
)
def test_an_image_module_refuses_bad_input_by_name(case, image_and_plan, tmp_path):
    image_dir, plan = image_and_plan
    args = ["--image", str(image_dir), "--plan", plan.directory, "--root", str(tmp_path / "m")]
    expected = {
        "no image": f"image {tmp_path / 'absent'} does not exist",
        "no plan": f"{tmp_path / 'absent'}",
        "another site": "is of site archer2, the module of local (site local)",
        "podman": "publish the plan as a podman-hpc module",
        "sif": "is a file, and the plan's runtime charliecloud runs image directories",
        # the gate: a plan under which the image keeps its own MPI publishes nothing, even
        # --model-only
        "refused plan": "is not proven to run on the host MPI",
    }[case]
    if case == "no image":
        args[1] = str(tmp_path / "absent")
    if case == "no plan":
        args[3] = str(tmp_path / "absent")
    if case == "sif":
        args[1] = str(tmp_path / "x.sif")
        Path(args[1]).write_bytes(b"")
    if case in ("another site", "podman", "refused plan"):
        other = {
            "another site": replace(plan, site="archer2"),
            "podman": replace(plan, runtime="podman"),
            "refused plan": replace(plan, library_path=[]),  # the image's MPI by RUNPATH
        }[case]
        args[3] = planner.write(other, tmp_path / "other").directory
    if case == "refused plan":
        args.append("--model-only")
    proc = climstack("modules", "local", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr and "fix:" in proc.stderr
    assert not (tmp_path / "m" / image_dir.name).exists()  # nothing half-written
