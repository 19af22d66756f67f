# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class MpiAbiWrapper(CMakePackage):
    """mpi_abi_wrapper: the MPI-5 standard C ABI over any MPI >= 3.0, for hosts whose MPI
    ships no libmpi_abi (Cray MPICH 8 and 9, MPICH < 5, Open MPI 5). It installs
    lib/libmpi_abi.so (the ABI's 688 entry points as MPI_* and PMPI_*; SONAME libmpi_abi.so,
    no `.1`), the ABI's include/mpi.h, bin/mpicc and lib/libmpiwrapper.so, which is built
    against this MPI's own mpi.h and linked to its libmpi (RUNPATH to its lib directory).
    libmpi_abi dlopens libmpiwrapper from $MPI_ABI_WRAPPER_LIB, else from the path this
    install compiled in, and converts every handle, constant and status between the two.

    Built once per MPI installation, against the `mpi` Spack gives it: at a centre the
    external Cray MPICH (environments/stack.yaml `abi_wrapper`). By the author of mpif."""

    homepage = "https://github.com/eschnett/mpi_abi_wrapper"
    git = "https://github.com/eschnett/mpi_abi_wrapper.git"

    maintainers("climstack")

    # No licence file yet: upstream's TODO.md says "add a licence (same as mpif)", and mpif
    # is MIT; to be checked when one is committed
    license("MIT")

    # upstream has no tags; 2026-08-22 "Retire the probes with their answers, and list
    # mpit_vars as the flap it is", the newest commit (CMake's project VERSION 0.1.0)
    version("2026-08-22", commit="39ee1a3cc33edc82611ec22e2efe17868908fc9a")

    depends_on("c", type="build")
    # bin/mpicxx: CMake enables C++ whenever it finds a compiler (OPTIONAL does not make
    # it optional), so give it Spack's rather than whatever c++ is on the PATH
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")
    # dev/probe_impl.py asks the MPI's own mpi.h which entry points it declares
    depends_on("python@3:", type="build")
    depends_on("mpi")

    # bin/mpicc (and mpicxx) name the compiler they were built with: the real one
    filter_compiler_wrappers("mpicc", "mpicxx", relative_root="bin")

    # the two libraries, not upstream's test programs, which `all` also builds (its
    # CMakeLists.txt reads no BUILD_TESTING); `install` then builds nothing more
    # (CMAKE_SKIP_INSTALL_ALL_DEPENDENCY)
    build_targets = ["mpi_abi", "mpiwrapper"]

    sanity_check_is_file = [
        join_path("lib", "libmpi_abi.so"),
        join_path("lib", "libmpiwrapper.so"),
        join_path("include", "mpi.h"),
        join_path("bin", "mpicc"),
    ]

    def flag_handler(self, name, flags):
        # its CMakeLists.txt compiles with -Werror, and GCC (12 measured) warns
        # -Wstringop-overflow in the generated wrappers; through Spack's compiler wrapper,
        # not CMAKE_C_FLAGS, which the installed bin/mpicc would hand on to every program
        if name == "cflags" and self.spec.satisfies("%c=gcc"):
            flags.append("-Wno-stringop-overflow")
        return (flags, None, None)

    def mpicc_is_a_wrapper(self) -> bool:
        """Does the MPI's mpicc name its own headers and libraries? Cray MPICH without its
        wrappers (`~wrappers`, as the Cray sites declare it) gives the plain compiler."""
        return self.spec["mpi"].mpicc not in (spack_cc, self.spec["c"].package.cc)

    def cmake_args(self):
        mpi = self.spec["mpi"]
        args = [
            self.define("MPI_C_COMPILER", mpi.mpicc),
            self.define("CMAKE_SKIP_INSTALL_ALL_DEPENDENCY", True),
            # lib/ everywhere (GNUInstallDirs picks lib64 on SLES): libmpi_abi compiles in
            # the path of libmpiwrapper, and a bind plan names both
            self.define("CMAKE_INSTALL_LIBDIR", "lib"),
        ]
        if not self.mpicc_is_a_wrapper():
            # FindMPI takes what it is given and interrogates no compiler
            libs = mpi.libs
            args += [
                self.define("MPI_C_INCLUDE_PATH", mpi.headers.directories),
                self.define("MPI_C_LIB_NAMES", libs.names),
            ]
            args += [
                self.define(f"MPI_{name}_LIBRARY", path)
                for name, path in zip(libs.names, libs.libraries)
            ]
        return args

    def setup_run_environment(self, env):
        # what a bind plan reads from a loaded module (climstack.bind.abi_wrapper)
        env.set("MPI_ABI_WRAPPER_ROOT", self.prefix)
        env.set("MPI_ABI_WRAPPER_LIB", join_path(self.prefix.lib, "libmpiwrapper.so"))

    @property
    def libs(self):
        """libmpi_abi.so, what a program of the standard ABI links (libmpiwrapper is only
        ever dlopened)."""
        return find_libraries("libmpi_abi", root=self.prefix.lib, shared=True)
