"""Real NetCDF/HDF5 builds for the host-family tests, cached in the user cache.

- `netcdf_image()`: the probe image plus Debian 12's NetCDF 4.9.0 / HDF5 1.10.8 as the
  image's own (the .debs the image lacks, unpacked into it) and nc-writer, an MPI program
  writing a NetCDF-4 file per rank through them.
- "Other hosts": Debian 11's NetCDF 4.7.4 (libnetcdf.so.18) / HDF5 1.10.6 unpacked into a
  tree, and the HDF5 1.14.4 that h5py's PyPI wheel carries (an upstream build, whose
  version check is upstream's). This machine's own Debian 12 builds are the third host.
"""

import os
import subprocess
import tempfile
from pathlib import Path

from climstack_dev import programs

from climstack import pins
from climstack.common import atomic, process, stamp
from climstack.stack.sources import debian_sources

#: an MPI program writing one NetCDF-4 file per rank with a 4.9 call (nc_def_var_quantize),
#: printing which NetCDF and HDF5 libraries the process really loaded
NC_WRITER_SOURCE = r"""
#define _GNU_SOURCE
#include <limits.h>
#include <link.h>
#include <mpi.h>
#include <netcdf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int show(struct dl_phdr_info *info, size_t size, void *data) {
    char real[PATH_MAX];
    if ((strstr(info->dlpi_name, "libnetcdf") || strstr(info->dlpi_name, "libhdf5"))
        && realpath(info->dlpi_name, real))
        printf("io-library: %s\n", real);
    return 0;
}

int main(int argc, char **argv) {
    int rank, size, nc, dim, var, status;
    float data[1024];
    char path[PATH_MAX];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 1024; i++) data[i] = rank + i / 3.0f;
    snprintf(path, sizeof path, "%s/nc-writer-%d-%d.nc",
             getenv("NC_WRITER_DIR") ? getenv("NC_WRITER_DIR") : "/tmp", (int)getppid(), rank);
    if ((status = nc_create(path, NC_NETCDF4 | NC_CLOBBER, &nc))
        || (status = nc_def_dim(nc, "x", 1024, &dim))
        || (status = nc_def_var(nc, "v", NC_FLOAT, 1, &dim, &var))
        || (status = nc_def_var_quantize(nc, var, NC_QUANTIZE_BITGROOM, 3))
        || (status = nc_put_var_float(nc, var, data)) || (status = nc_close(nc))) {
        fprintf(stderr, "nc-writer: %s: %s\n", path, nc_strerror(status));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    remove(path);
    if (rank == 0) {
        printf("netcdf: %s\nranks: %d\n", nc_inq_libvers(), size);
        dl_iterate_phdr(show, NULL);
    }
    MPI_Finalize();
    return 0;
}
"""
#: a serial HDF5 program: H5F_ACC_TRUNC expands to a H5check_version(1, 10, 8) call
H5_WRITER_SOURCE = r"""
#include <hdf5.h>
#include <stdio.h>
int main(void) {
    unsigned major, minor, release;
    hid_t file = H5Fcreate("/dev/null.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5get_libversion(&major, &minor, &release);
    printf("hdf5: %u.%u.%u\n", major, minor, release);
    return file < 0 ? 0 : H5Fclose(file);
}
"""
IMAGE_PACKAGES = ("libnetcdf19",)  # pulls HDF5 1.10.8 (serial) and the rest of its closure
BULLSEYE_PACKAGES = ("libnetcdf18", "libhdf5-103-1", "libhdf5-hl-100")
H5PY = "h5py==3.12.1"  # its wheel's h5py.libs: HDF5 1.14.4


def _apt_options(state: Path, status: str, suite: str | None) -> list[str]:
    """apt reading the host's lists (or, for another `suite`, its own), resolving against
    the dpkg `status` file (an image's, or none), downloading into state/archives."""
    options = {
        "Dir::State::status": status,
        "Dir::Cache::archives": str(state / "archives"),
        "Debug::NoLocking": "1",
    }
    if suite:
        (state / "parts").mkdir(parents=True, exist_ok=True)
        entries = [
            f"Types: deb\nURIs: {uris}\nSuites: {suite}\nComponents: {components}\n"
            + (f"Signed-By: {signed}\n" if signed else "")
            for uris, suites, components, signed, _ in debian_sources.host_deb_entries()
            if any("-" not in s for s in suites.split())
        ][:1]
        (state / "parts" / "suite.sources").write_text("\n".join(entries))
        options |= {
            "Dir::Etc::SourceList": "/dev/null",
            "Dir::Etc::SourceParts": str(state / "parts"),
            "Dir::State::Lists": str(state / "lists"),
        }
        (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        options["APT::Sandbox::User"] = "root"
    (state / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    return [arg for key, value in options.items() for arg in ("-o", f"{key}={value}")]


def unpack_debs(packages, into: Path, status: str = "/dev/null", suite: str | None = None):
    """Download `packages` and what they need beyond `status`'s packages, and unpack them
    into `into` (dpkg-deb -x: files only, as a container image needs them)."""
    with tempfile.TemporaryDirectory() as tmp:
        options = _apt_options(Path(tmp), status, suite)
        if suite:
            process.run(["apt-get", *options, "update"], f"apt-get update ({suite})")
        process.run(
            ["apt-get", *options, "install", "--download-only", "--yes", *packages],
            f"downloading {' '.join(packages)}",
            env=process.environ(DEBIAN_FRONTEND="noninteractive"),
            timeout=900,
        )
        for deb in sorted((Path(tmp) / "archives").glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)


def netcdf_image() -> Path:
    """The probe image with Debian 12's NetCDF/HDF5 as its own, and in /opt/probe/bin
    nc-writer (MPI, NetCDF) and h5-writer (serial HDF5, Debian 12's headers)."""
    key = stamp.digest(
        programs.probe_image_key(), NC_WRITER_SOURCE, H5_WRITER_SOURCE, *IMAGE_PACKAGES, length=10
    )
    final = pins.cache_dir() / "images" / f"bind-netcdf-{key}"

    def fill(work: Path):
        subprocess.run(["cp", "-a", f"{programs.probe_image()}/.", str(work)], check=True)
        unpack_debs(IMAGE_PACKAGES, work, status=str(work / "var/lib/dpkg/status"))
        bindir = work / "opt/probe/bin"
        with tempfile.TemporaryDirectory() as tmp:
            nc_writer, h5_writer = Path(tmp) / "nc_writer.c", Path(tmp) / "h5_writer.c"
            nc_writer.write_text(NC_WRITER_SOURCE)
            h5_writer.write_text(H5_WRITER_SOURCE)
            own = programs.mpich(programs.BASE_MPI)  # no newer than any host MPI here
            lib = f"{programs.BASE_PREFIX}/lib"
            programs.build_program(
                own, nc_writer, bindir / "nc-writer", lib, libraries=("-lnetcdf",)
            )
            serial = "/usr/lib/x86_64-linux-gnu/hdf5/serial"
            process.run(
                ["gcc", "-O2", "-I/usr/include/hdf5/serial", "-o", bindir / "h5-writer"]
                + [h5_writer, f"-L{serial}", "-lhdf5"],
                "compiling h5-writer",
            )

    if not final.is_dir():
        for stale in final.parent.glob("bind-netcdf-*"):
            subprocess.run(["rm", "-rf", str(stale)], check=False)
    return atomic.directory(final, fill)


def bullseye_host() -> Path:
    """A tree holding Debian 11's NetCDF 4.7.4 and HDF5 1.10.6 (prefix: <tree>/usr)."""
    key = stamp.digest(*BULLSEYE_PACKAGES, length=10)

    def fill(work: Path):
        unpack_debs(BULLSEYE_PACKAGES, work, suite="bullseye")

    return atomic.directory(pins.cache_dir() / "bind-tests" / f"bullseye-netcdf-{key}", fill)


def wheel_hdf5() -> Path:
    """The directory of HDF5 1.14.4 libraries in h5py's manylinux wheel."""

    def fill(work: Path):
        process.run(
            [
                str(pins.PROJECT_ROOT / ".venv/bin/pip"),
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux2014_x86_64",
                "--python-version",
                "3.11",
                "-d",
                str(work),
                H5PY,
            ],
            f"pip download {H5PY}",
            timeout=600,
        )
        wheel = next(work.glob("h5py-*.whl"))
        subprocess.run(["unzip", "-q", str(wheel), "h5py.libs/*", "-d", str(work)], check=True)
        wheel.unlink()

    return atomic.directory(pins.cache_dir() / "bind-tests" / "h5py-3.12.1", fill) / "h5py.libs"
