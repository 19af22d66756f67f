# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Benchio(MakefilePackage):
    """benchio (EPCC) measures parallel write bandwidth of a 3-D array to one shared file
    through MPI-IO, HDF5 and NetCDF, the I/O layers of climate models, and serial I/O."""

    homepage = "https://github.com/EPCCed/benchio"
    git = "https://github.com/EPCCed/benchio.git"

    maintainers("climstack")

    license("GPL-3.0-only")

    version("master", branch="master")
    # 2018-03-30 "Removed extra file", the newest commit
    version("2018-03-30", commit="90023d1121322553ebbdcdbb6e1474f445c026ef", preferred=True)

    variant("hdf5", default=True, description="Benchmark parallel HDF5")
    variant("netcdf", default=True, description="Benchmark parallel NetCDF-4")

    depends_on("fortran", type="build")
    depends_on("mpi")
    depends_on("hdf5 +mpi +fortran", when="+hdf5")
    depends_on("netcdf-fortran", when="+netcdf")
    depends_on("netcdf-c +mpi", when="+netcdf")

    build_directory = "shared-file/source"

    @property
    def build_targets(self):
        spec = self.spec
        flags = ["-O2", "-DWITH_SERIAL", "-DWITH_MPIIO"]
        libs = []
        if spec.satisfies("+hdf5"):
            flags += ["-DWITH_HDF5", f"-I{spec['hdf5'].prefix.include}"]
            libs += [spec["hdf5"].libs.ld_flags, "-lhdf5_fortran"]
        if spec.satisfies("+netcdf"):
            flags += ["-DWITH_NETCDF", f"-I{spec['netcdf-fortran'].prefix.include}"]
            libs += [spec["netcdf-fortran"].libs.ld_flags]
        return [f"FC={spec['mpi'].mpifc}", f"FFLAGS={' '.join(flags)}", f"LFLAGS={' '.join(libs)}"]

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install(join_path(self.build_directory, "benchio.x"), prefix.bin)
