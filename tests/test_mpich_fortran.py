"""The image's MPICH with its Fortran bindings (climstack.image.mpich_fortran): PyPI's mpich
3.4.3 wheel plus Debian bullseye's MPICH 3.4.1 bindings compiles and runs Fortran MPI
programs (mpif.h, `use mpi`, `use mpi_f08`) on 2 ranks, reductions on Fortran types
included; bindings of another MPICH, or a changed wrapper, are refused."""

import shutil
import subprocess
from pathlib import Path

import pytest

from climstack.bind import elf
from climstack.common import wheels
from climstack.errors import ClimstackError
from climstack.image import image, mpich_fortran

PROGRAMS = {
    "f77.f90": """program f77
  implicit none
  include 'mpif.h'
  integer :: rank, ierr, x, s
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = rank + 1
  call MPI_Allreduce(x, s, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  print '(a,i0,a,i0)', 'f77 ', rank, ' sum ', s
  call MPI_Finalize(ierr)
end program
""",
    "f90.f90": """program f90
  use mpi
  implicit none
  integer :: rank, ierr
  double precision :: x, s
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = rank + 0.5d0
  call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  print '(a,i0,a,f4.1)', 'f90 ', rank, ' sum ', s
  call MPI_Finalize(ierr)
end program
""",
    "f08.f90": """program f08
  use mpi_f08
  implicit none
  integer :: rank
  real :: x, s
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  x = rank + 0.25
  call MPI_Allreduce(x, s, 1, MPI_REAL, MPI_MAX, MPI_COMM_WORLD)
  print '(a,i0,a,f5.2)', 'f08 ', rank, ' max ', s
  call MPI_Finalize()
end program
""",
}
EXPECTED = {"f77": ["sum", "3"], "f90": ["sum", "2.0"], "f08": ["max", "1.25"]}

needs_gfortran = pytest.mark.skipif(not shutil.which("gfortran"), reason="needs gfortran")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """The wheel's MPICH copied, then given its Fortran bindings as an image build does."""
    prefix = tmp_path_factory.mktemp("mpich") / f"mpich-{image.WHEEL_MPICH}"
    shutil.copytree(wheels.installed("mpich", image.WHEEL_MPICH), prefix, symlinks=True)
    mpich_fortran.install(prefix)
    return prefix


def test_the_bindings_are_upstreams_library_on_the_wheels_libmpi(prefix):
    bindings = elf.read(prefix / "lib" / "libmpifort.so.12")
    assert bindings.soname == "libmpifort.so.12"
    assert "libmpi.so.12" in bindings.needed and "libmpich.so.12" not in bindings.needed
    assert bindings.runpath == ["$ORIGIN"] and bindings.rpath == []
    assert {"mpi_init_", "mpi_allreduce_"} <= bindings.exports
    for name in ("mpif.h", "mpi.mod", "mpi_f08.mod"):
        assert (prefix / "include" / name).is_file(), name
    assert (prefix / "bin" / "mpif90").resolve() == (prefix / "bin" / "mpifort").resolve()


@needs_gfortran
def test_fortran_programs_build_with_the_wrapper_and_run_on_two_ranks(prefix, tmp_path):
    show = subprocess.run(
        [prefix / "bin" / "mpif90", "-show", "x.f90"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert f"-I{prefix}/include" in show and "-lmpifort" in show and "-lmpi" in show
    assert "-Wl,--enable-new-dtags" in show  # RUNPATH, as the wheel's mpicc
    for name, text in PROGRAMS.items():
        source, program = tmp_path / name, tmp_path / Path(name).stem
        source.write_text(text)
        subprocess.run([prefix / "bin" / "mpifort", source, "-o", program], check=True)
        assert elf.read(program).runpath == [f"{prefix}/lib"]
        proc = subprocess.run(
            [prefix / "bin" / "mpiexec", "-n", "2", program],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = sorted(line.split() for line in proc.stdout.splitlines())
        assert lines == [[program.name, str(r), *EXPECTED[program.name]] for r in (0, 1)], lines


def test_bindings_of_another_mpich_are_refused(prefix):
    """Debian 12's MPICH 4.0.2 bindings call MPI-4 functions the wheel's 3.4.3 lacks."""
    newer = Path("/usr/lib/x86_64-linux-gnu/libmpichfort.so.12")
    if not newer.exists():
        pytest.skip("needs Debian's libmpich-dev (bin/setup installs it)")
    with pytest.raises(ClimstackError, match="does not export") as raised:
        mpich_fortran.check_symbols(newer, prefix / "lib" / "libmpi.so.12")
    assert "MPI_" in raised.value.message and "mpich_fortran.DEBS" in raised.value.fix
    lib = prefix / "lib"
    mpich_fortran.check_symbols(lib / "libmpifort.so.12", lib / "libmpi.so.12")  # its own pass


def test_a_changed_wrapper_is_refused_not_half_adapted():
    text = "#! /bin/bash\nprefix=/usr\nexec_prefix=/usr\n"
    with pytest.raises(ClimstackError, match="matches /.*/ 0 times, not once"):
        mpich_fortran.adapt_wrapper(text)
