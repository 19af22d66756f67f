"""An image nobody designed for climstack, cached in the user cache.

`foreign_image()`: the Debian 12 base image plus Debian's own MPICH 4.0.2 (libmpich-dev,
mpich: .debs unpacked into it, no recipe of ours), and in /opt/foreign/bin two programs
compiled inside the image by Debian's mpicc/mpifort with DT_RPATH (old dtags) at Debian's
MPICH library directory:
- probe-rpath: the project's mpi-probe (repo/packages/mpi-probe/mpi_probe.c);
- fortran-rpath: fixed-form Fortran through mpif.h, whose MPI_IN_PLACE lives in MPICH's
  mpipriv1_ common block (libmpichfort.so.12).
`python -m climstack_dev.foreign_image` builds it (timed) and runs both under the image's mpiexec.
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

from climstack_dev import io_libraries, programs

from climstack import pins
from climstack.common import atomic, process, stamp
from climstack.errors import ToolFailure

#: Debian 12's MPICH and the compilers its wrappers call (gcc, gfortran: the base has them)
PACKAGES = ("libmpich-dev", "mpich", "gfortran", "gcc")
MPI_LIB = "/usr/lib/x86_64-linux-gnu"  # Debian's MPICH library directory
#: what update-alternatives would link (dpkg-deb -x runs no maintainer scripts)
LINKS = {
    "usr/bin/mpicc": "mpicc.mpich",
    "usr/bin/mpifort": "mpifort.mpich",
    "usr/bin/mpiexec": "mpiexec.mpich",
    "usr/bin/mpirun": "mpirun.mpich",
}
FORTRAN_SOURCE = """      program fortranrpath
      include 'mpif.h'
      integer rank, total, ierr
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      total = rank + 1
      call MPI_ALLREDUCE(MPI_IN_PLACE, total, 1, MPI_INTEGER, MPI_SUM,
     &                   MPI_COMM_WORLD, ierr)
      print '(a,i0,a,i0)', 'fortran-rpath: rank ', rank, ' sum ', total
      call MPI_FINALIZE(ierr)
      end
"""
FLAGS = ("-O2", "-Wl,--disable-new-dtags", f"-Wl,-rpath,{MPI_LIB}")
#: program -> (wrapper, source file, extra flags, the MPI libraries it must have NEEDED).
#: Debian 12's gcc links --as-needed: the Fortran program calls only libmpichfort, and
#: would get libmpich.so.12 through libmpichfort's NEEDED alone without --no-as-needed
PROGRAMS = {
    "probe-rpath": ("mpicc", "mpi_probe.c", (), ("libmpich.so.12",)),
    "fortran-rpath": (
        "mpifort",
        "fortran_rpath.f",
        ("-Wl,--no-as-needed",),
        ("libmpich.so.12", "libmpichfort.so.12"),
    ),
}
SOURCES = "/opt/foreign/src"
BIN = "/opt/foreign/bin"


def _ch_run(image: Path, *command: str, write: bool = False) -> str:
    """`command` in `image` (ch-run, the image's own PATH and files), its output."""
    args = ["ch-run", *(["-w"] if write else []), "-c", SOURCES, str(image), "--", *command]
    run = process.run(args, f"`{' '.join(command[:2])}` in {image.name}", timeout=600)
    return run.stdout + run.stderr


def _check(program: Path, needed: tuple[str, ...]):
    """DT_RPATH, not DT_RUNPATH, and the MPI libraries in DT_NEEDED, or a ToolFailure."""
    dynamic = process.run(["readelf", "-d", program], f"readelf -d {program.name}").stdout
    missing = [lib for lib in needed if f"[{lib}]" not in dynamic]
    if "(RPATH)" not in dynamic or "(RUNPATH)" in dynamic or missing:
        raise ToolFailure(f"{program.name}: not RPATH-linked against {needed}:\n{dynamic}")


def _merge_usr(work: Path):
    """dpkg-deb -x (tar) turns the base's merged-/usr links (lib -> usr/lib) into real
    directories when a .deb ships files there (libnl-3-200: /lib/...): move their files
    into usr/ and put the links back, or the image has no /lib64/ld-linux-x86-64.so.2."""
    for name in ("bin", "sbin", "lib", "lib64"):
        top = work / name
        if top.is_dir() and not top.is_symlink() and (work / "usr" / name).is_dir():
            subprocess.run(["cp", "-a", f"{top}/.", str(work / "usr" / name)], check=True)
            shutil.rmtree(top)
            top.symlink_to(f"usr/{name}")


def image_key() -> str:
    """Digest of every input of the foreign image."""
    return stamp.digest(
        programs.PROBE_SOURCE,
        FORTRAN_SOURCE,
        programs.base_image().name,
        *PACKAGES,
        *FLAGS,
        *(str(spec) for spec in PROGRAMS.items()),
        *(f"{link}->{target}" for link, target in LINKS.items()),
        "merged-usr",
        length=10,
    )


def foreign_image() -> Path:
    """The image directory: Debian 12 with Debian's MPICH, and in /opt/foreign/bin
    probe-rpath (C) and fortran-rpath (Fortran), both DT_RPATH at MPI_LIB."""
    final = pins.cache_dir() / "images" / f"bind-foreign-{image_key()}"

    def fill(work: Path):
        subprocess.run(["cp", "-a", f"{programs.base_image()}/.", str(work)], check=True)
        io_libraries.unpack_debs(PACKAGES, work, status=str(work / "var/lib/dpkg/status"))
        _merge_usr(work)
        for link, target in LINKS.items():
            if not (work / link).exists():
                (work / link).unlink(missing_ok=True)  # dangling: into /etc/alternatives
                (work / link).symlink_to(target)
        src, bindir = work / SOURCES.lstrip("/"), work / BIN.lstrip("/")
        src.mkdir(parents=True)
        bindir.mkdir(parents=True)
        (src / "mpi_probe.c").write_bytes(programs.PROBE_SOURCE.read_bytes())
        (src / "fortran_rpath.f").write_text(FORTRAN_SOURCE)
        for name, (wrapper, source, extra, needed) in PROGRAMS.items():
            _ch_run(work, wrapper, *FLAGS, *extra, "-o", f"{BIN}/{name}", source, write=True)
            _check(bindir / name, needed)

    if not final.is_dir():  # inputs changed: the old images are stale
        for stale in final.parent.glob("bind-foreign-*"):
            subprocess.run(["rm", "-rf", str(stale)], check=False)
    return atomic.directory(final, fill)


def run(image: Path, name: str, ranks: int = 2) -> str:
    """`name` from /opt/foreign/bin under the image's own MPICH (Hydra's mpiexec)."""
    return _ch_run(image, "mpiexec.mpich", "-n", str(ranks), f"{BIN}/{name}")


if __name__ == "__main__":
    for attempt in ("first call", "cached call"):
        start = time.monotonic()
        image = foreign_image()
        print(f"foreign_image() {attempt}: {time.monotonic() - start:.1f} s -> {image}")
    for name in PROGRAMS:
        try:
            print(f"$ mpiexec.mpich -n 2 {BIN}/{name}\n{run(image, name)}")
        except ToolFailure as error:
            print(f"{name}: {error}", file=sys.stderr)
