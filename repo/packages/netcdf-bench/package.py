# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class NetcdfBench(CMakePackage):
    """NetCDF-Bench (benchtool) measures parallel NetCDF-4/HDF5 I/O: independent and
    collective reads and writes of a 4-D variable with configurable chunking, fill and
    process decomposition."""

    homepage = "https://github.com/joobog/netcdf-bench"
    git = "https://github.com/joobog/netcdf-bench.git"

    maintainers("climstack")

    license("LGPL-3.0-only")

    version("master", branch="master")
    # 2021-04-22 "Second part of the patch for --verify -w -r.", the newest commit
    version("2021-04-22", commit="5e2b6d3cc7a7d73bbb2ce2747d9770004a2cde40", preferred=True)

    depends_on("c", type="build")
    depends_on("cmake@3.5:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("mpi")
    depends_on("netcdf-c +mpi")

    def cmake_args(self):
        return [
            self.define("CMAKE_C_COMPILER", self.spec["mpi"].mpicc),
            self.define("NETCDF_INCLUDE_DIR", self.spec["netcdf-c"].prefix.include),
            self.define("NETCDF_LIBRARIES", self.spec["netcdf-c"].libs.joined(";")),
            # upstream asks for CMake 3.0 policies, which CMake >= 4 refuses
            self.define("CMAKE_POLICY_VERSION_MINIMUM", "3.5"),
        ]
