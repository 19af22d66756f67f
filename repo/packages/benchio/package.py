# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Benchio(MakefilePackage):
    """benchio (EPCC) measures the parallel write bandwidth of a 3-D strided array
    (weak scaling) to one shared file through serial (POSIX), MPI-IO, HDF5 and NetCDF-4,
    the I/O layers of climate models: benchio.x, which expects a subdirectory
    benchio_files in its working directory. benchio_fpp.x writes the same data with one
    file per process into the subdirectories unstriped, striped and defstriped."""

    homepage = "https://github.com/EPCCed/benchio"
    git = "https://github.com/EPCCed/benchio.git"

    maintainers("climstack")

    license("GPL-3.0-only")

    version("master", branch="master")
    # 2018-03-30 "Removed extra file", the newest commit
    version("2018-03-30", commit="90023d1121322553ebbdcdbb6e1474f445c026ef", preferred=True)

    variant("hdf5", default=True, description="Benchmark parallel HDF5 (shared file)")
    variant("netcdf", default=True, description="Benchmark parallel NetCDF-4 (shared file)")

    depends_on("fortran", type="build")
    depends_on("mpi")
    depends_on("hdf5 +mpi +fortran", when="+hdf5")
    # netcdf.F90 opens the file with nf90_create(comm=, info=): parallel NetCDF-4
    depends_on("netcdf-fortran", when="+netcdf")
    depends_on("netcdf-c +mpi", when="+netcdf")

    # the makefiles do not declare which objects need which Fortran modules
    parallel = False

    # shared-file/source selects its backends with -DWITH_<LAYER> in FFLAGS (each
    # backend file compiles to a stub without its flag); file-per-process needs MPI only
    build_dirs = ("shared-file/source", "file-per-process/source")

    def make_args(self, shared_file):
        spec = self.spec
        fflags = ["-O2"]
        lflags = []
        if shared_file:
            fflags += ["-DWITH_SERIAL", "-DWITH_MPIIO"]
            if spec.satisfies("+hdf5"):
                fflags += ["-DWITH_HDF5", f"-I{spec['hdf5'].prefix.include}"]
                lflags.append(spec["hdf5:fortran"].libs.ld_flags)
            if spec.satisfies("+netcdf"):
                fflags += ["-DWITH_NETCDF", f"-I{spec['netcdf-fortran'].prefix.include}"]
                lflags.append(spec["netcdf-fortran"].libs.ld_flags)
        return [
            f"FC={spec['mpi'].mpifc}",
            f"CC={spec['mpi'].mpicc}",
            f"FFLAGS={' '.join(fflags)}",
            f"LFLAGS={' '.join(lflags)}",
        ]

    def build(self, spec, prefix):
        for build_dir in self.build_dirs:
            with working_dir(build_dir):
                make(*self.make_args(build_dir.startswith("shared-file")))

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install(join_path("shared-file", "source", "benchio.x"), prefix.bin)
        install(join_path("file-per-process", "source", "benchio_fpp.x"), prefix.bin)
