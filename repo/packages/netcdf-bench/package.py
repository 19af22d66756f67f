# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class NetcdfBench(CMakePackage):
    """NetCDF-Bench (benchtool) measures parallel NetCDF-4/HDF5 I/O as climate models do
    it: independent, collective and chunked reads and writes of a 4-D (t:x:y:z) variable
    with configurable block and chunk geometry, fill values and unlimited time dimension,
    and a per-process and aggregated report."""

    homepage = "https://github.com/joobog/netcdf-bench"
    git = "https://github.com/joobog/netcdf-bench.git"

    maintainers("climstack")

    license("LGPL-3.0-only")

    version("master", branch="master")
    # 2021-04-22 "Second part of the patch for --verify -w -r.", the newest commit
    version("2021-04-22", commit="5e2b6d3cc7a7d73bbb2ce2747d9770004a2cde40", preferred=True)

    depends_on("c", type="build")
    depends_on("cxx", type="build")  # project() enables C and CXX, though all sources are C
    depends_on("cmake@3.5:", type="build")
    # CMakeLists.txt calls pkg_search_module() even when it finds no pkg-config
    depends_on("pkgconfig", type="build")
    depends_on("mpi")
    # parallel NetCDF-4 (nc_create_par, nc_var_par_access)
    depends_on("netcdf-c +mpi")

    def cmake_args(self):
        netcdf = self.spec["netcdf-c"]
        return [
            self.define("CMAKE_C_COMPILER", self.spec["mpi"].mpicc),
            # FindMPI interrogates these wrappers, not the first `mpicc` on PATH: with the
            # MPI-5 ABI's mpicc_abi, only libmpi_abi.so.1 is linked
            self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", self.spec["mpi"].mpicxx),
            # the bundled FindNetCDF.cmake reads these cache variables first
            self.define("NETCDF_INCLUDE_DIR", netcdf.headers.directories[0]),
            self.define("NETCDF_LIBRARY", netcdf.libs.libraries[0]),
            # upstream asks for CMake 3.0 policies, which CMake >= 4 refuses
            self.define("CMAKE_POLICY_VERSION_MINIMUM", "3.5"),
        ]
