"""verify's Fortran checks, on Fortran MPI programs built by Debian's own mpifort.

Each class of what such a program takes from the MPI's Fortran library (the bindings,
gfortran's module procedures of mpi_f08, MPICH's link constants, the common blocks that
hold MPI_IN_PLACE and friends) is refused by name when the host's library lacks it. The
host lacking it is a copy of Debian's libmpichfort.so.12 with that one name spoiled in its
.dynstr: real ELF, in which ld.so would not find the symbol either.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from climstack.bind import elf
from climstack.bind import plan as planner
from climstack.check import verdict, verify
from climstack.inputs import sites
from climstack_dev.programs import spoil

MPIFORT = shutil.which("mpifort.mpich")
pytestmark = pytest.mark.skipif(not MPIFORT, reason="needs Debian's mpifort (bin/setup)")
DEBIAN = Path("/usr/lib/x86_64-linux-gnu")

F77 = """      program f77
      include 'mpif.h'
      integer rank, total, ierr
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      total = rank
      call MPI_ALLREDUCE(MPI_IN_PLACE, total, 1, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, ierr)
      print '(a,i0)', 'f77: ', total
      call MPI_FINALIZE(ierr)
      end
"""
F08 = """program f08
  use mpi_f08
  integer :: rank, total
  type(MPI_Comm) :: comm
  call MPI_Init()
  comm = MPI_COMM_WORLD
  call MPI_Comm_rank(comm, rank)
  total = rank
  call MPI_Allreduce(MPI_IN_PLACE, total, 1, MPI_INTEGER, MPI_SUM, comm)
  if (comm == MPI_COMM_WORLD) print '(a,i0)', 'f08: ', total
  call MPI_Finalize()
end program
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("fortran")
    built = {}
    for name, text, suffix in (("f77", F77, ".f"), ("f08", F08, ".f90")):
        source = work / f"{name}{suffix}"
        source.write_text(text)
        built[name] = work / name
        subprocess.run(
            [MPIFORT, "-O2", "-o", built[name], source], cwd=work, check=True, capture_output=True
        )
    return built


def host(tmp_path: Path, spoiled: str = "", gfortran: str = "") -> Path:
    """A host MPI prefix: Debian's MPICH, its libraries lacking `spoiled`; with
    `gfortran` (a SONAME) its Fortran library needs that libgfortran, which lies beside."""
    lib = tmp_path / "mpi" / "lib"
    lib.mkdir(parents=True)
    for name in ("libmpich.so.12", "libmpichfort.so.12"):
        shutil.copy2((DEBIAN / name).resolve(), lib / name)
    for library in lib.iterdir() if spoiled else ():  # MPICH keeps MPIR_F08_* in both
        if spoiled in elf.read(library).exports:
            spoil(library, spoiled, spoiled[:-1] + "X")
    if gfortran:
        shutil.copy2((DEBIAN / "libgfortran.so.5").resolve(), lib / gfortran)
        spoil(lib / gfortran, "libgfortran.so.5", gfortran)
        spoil(lib / "libmpichfort.so.12", "libgfortran.so.5", gfortran)
    return tmp_path / "mpi"


def check(program: Path, prefix: Path, tmp_path: Path) -> verify.Report:
    plan = planner.make_plan(sites.get("local"), prefix=str(prefix), environ={})
    return verify.check(str(program), planner.write(plan, tmp_path / "plan"))


def test_debian_fortran_programs_import_every_class(programs):
    assert {
        "mpi_allreduce_",
        "mpipriv1_",
        "mpipriv2_",
        "mpiprivc_",
        "mpifcmb5_",
    } <= elf.read(programs["f77"]).mpi_imports()
    assert {
        "mpi_allreduce_f08ts_",
        "__mpi_f08_types_MOD_mpi_comm_eq",
        "MPIR_F08_MPI_IN_PLACE",
    } <= elf.read(programs["f08"]).mpi_imports()


@pytest.mark.parametrize("program", ["f77", "f08"])
def test_fortran_program_accepted_on_a_host_with_all_of_it(program, programs, tmp_path):
    report = check(programs[program], host(tmp_path), tmp_path)
    assert report.passed, report.problems
    proc = subprocess.run(
        ["mpiexec.mpich", "-n", "2", programs[program]], capture_output=True, text=True
    )
    assert f"{program}: 1" in proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "program, symbol",
    [
        ("f77", "mpi_allreduce_"),  # a binding
        ("f77", "mpipriv1_"),  # the common block of MPI_BOTTOM, MPI_IN_PLACE, ...
        ("f77", "mpifcmb5_"),  # MPI_UNWEIGHTED's
        ("f08", "__mpi_f08_types_MOD_mpi_comm_eq"),  # a module procedure of mpi_f08
        ("f08", "MPIR_F08_MPI_IN_PLACE"),  # a link constant of mpi_f08
        ("f08", "mpi_allreduce_f08ts_"),  # an mpi_f08 binding
    ],
)
def test_each_fortran_class_refused_by_name_when_the_host_lacks_it(
    program, symbol, programs, tmp_path
):
    report = check(programs[program], host(tmp_path, spoiled=symbol), tmp_path)
    assert report.missing == [symbol], report.problems
    assert f"lacks 1 MPI symbols the application imports: {symbol}" in verdict.render(report)


def test_two_fortran_runtimes_are_refused(programs, tmp_path):
    """The host's Fortran library from another gfortran release (libgfortran.so.4) beside
    the program's libgfortran.so.5."""
    report = check(programs["f77"], host(tmp_path, gfortran="libgfortran.so.4"), tmp_path)
    assert any(
        "two Fortran runtimes" in p and "libgfortran.so.4, libgfortran.so.5" in p
        for p in report.problems
    ), report.problems


def test_a_host_without_a_fortran_library_is_refused_by_name(programs, tmp_path):
    prefix = host(tmp_path)
    (prefix / "lib" / "libmpichfort.so.12").unlink()
    report = check(programs["f77"], prefix, tmp_path)
    assert any("has no Fortran library" in p for p in report.problems), report.problems
