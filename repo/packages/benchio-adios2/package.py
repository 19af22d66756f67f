# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class BenchioAdios2(Package):
    """EPCC's benchio as extended with ADIOS2 by Stephen Farr (EuroCC) and kept by David
    Henty for the ARCHER2 I/O courses and studies: one 3-D array of doubles per rank
    (n1 n2 n3, weak scaling with `local`) written to one shared file through MPI-IO, HDF5,
    NetCDF-4 and ADIOS2, into the directories unstriped/, striped/ and fullstriped/ whose
    Lustre layout the job sets. ADIOS2's engine (BP4, BP5, HDF5, ...) is the one named in
    adios2.xml in the working directory; the build makes the program print it
    (`ADIOS2 engine = BP4`), so each output says what wrote it."""

    homepage = "https://github.com/davidhenty/benchio"
    git = "https://github.com/davidhenty/benchio.git"

    maintainers("climstack")

    license("GPL-3.0-only")

    # "Updated for ARCHER2 course Nov 25", the newest commit
    version("2025-11-25", commit="0c682b6a71bef5a29abb9b8f104604314696d013")

    depends_on("fortran", type="build")
    depends_on("mpi")
    depends_on("hdf5 +mpi +fortran")
    depends_on("netcdf-fortran")
    depends_on("netcdf-c +mpi")
    depends_on("adios2 +mpi +fortran")

    #: the sources in the order their Fortran modules are used (Makefile-archer2's list)
    SOURCES = ("benchutil", "serial", "mpiio", "hdf5", "netcdf", "adios", "benchio")

    def patch(self):
        # the engine adios2.xml chose, printed by rank 0 before it writes
        filter_file(
            r"^(\s*call MPI_Comm_rank\(cartcomm, rank, ierr\))",
            "\\1\n" + '  if (rank == 0) write(*,*) "ADIOS2 engine = ", trim(io%engine_type)',
            "adios.f90",
        )

    def install(self, spec, prefix):
        adios2_config = Executable(spec["adios2"].prefix.bin.join("adios2-config"))
        fflags = ["-O3", *adios2_config("--fortran-flags", output=str).split()]
        fflags += [
            f"-I{spec['hdf5'].prefix.include}",
            f"-I{spec['netcdf-fortran'].prefix.include}",
        ]
        libs = adios2_config("--fortran-libs", output=str).split()
        libs += spec["hdf5:fortran"].libs.ld_flags.split()
        libs += spec["netcdf-fortran"].libs.ld_flags.split()
        fortran = Executable(spec["mpi"].mpifc)
        for source in self.SOURCES:
            fortran(*fflags, "-c", f"{source}.f90")
        fortran(*fflags, "-o", "benchio", *(f"{s}.o" for s in self.SOURCES), *libs)
        mkdirp(prefix.bin)
        install("benchio", prefix.bin)
