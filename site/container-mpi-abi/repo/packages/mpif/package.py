# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class Mpif(CMakePackage):
    """mpif: mpif.h, `use mpi` and `use mpi_f08` over the MPI-5 standard C ABI alone. It
    installs libmpif.so.1, whose MPI calls resolve to libmpi_abi.so.1, the wrapper mpifort
    and mpif_info, so that one Fortran build runs on any MPI-5 ABI library (MPICH 5,
    Intel MPI, Open MPI 6) bound at run time (containers/mpi-abi).

    It provides `mpi`: C dependents get the ABI MPI's own mpicc_abi/mpicxx_abi, Fortran
    dependents mpif's mpifort. It lives beside the overlay MPICH whose `abi` variant it
    needs (our pinned builtin MPICH has none). Upstream's recipe is proposed
    (spack-packages PR 6366), not merged."""

    homepage = "https://github.com/eschnett/mpif"
    git = "https://github.com/eschnett/mpif.git"

    maintainers("climstack")

    license("MIT")

    version("1.0.0", tag="v1.0.0", commit="9caecc3ce4f4eabad27dad4e1dae05ff7df21b32")

    provides("mpi@:5")

    depends_on("c", type="build")
    depends_on("fortran", type="build")
    depends_on("cmake@3.13:", type="build")
    # the C ABI it calls: an MPI built with the standard ABI (mpicc_abi, libmpi_abi.so.1)
    depends_on("mpich@5.0.2: +abi")

    # the installed wrappers name the compiler they were built with: the real one, not Spack's
    filter_compiler_wrappers("mpifort", "mpifc", relative_root="bin")

    def fortran_declarations(self) -> str:
        """The C-side Fortran declarations (MPI_Fint, the status sentinels, the c2f/f2c
        prototypes) that mpif's fortran/mpi.h.patch adds to the official ABI header: an
        ABI mpi.h from an implementation lacks them (MPICH 5.0.2's mpi_abi.h does)."""
        path = join_path(self.stage.source_path, "fortran", "mpi.h.patch")
        with open(path) as patch:
            text = patch.read()
        marker = "/* Fortran declarations */"
        if marker not in text:
            raise InstallError(f"mpif {self.version}: {path} has no {marker!r} section")
        added = [line[1:] for line in text.split(marker, 1)[1].splitlines() if line[:1] == "+"]
        return "\n".join(added) + "\n"

    def abi_compiler(self) -> str:
        """A C compiler wrapper like mpicc_abi whose mpi.h is the ABI header plus the
        Fortran declarations: FindMPI reads its -show; mpif's C sources compile with it."""
        mpich = self.spec["mpich"]
        shim = join_path(self.stage.path, "mpi-abi-fortran")
        mkdirp(join_path(shim, "include"))
        header = join_path(mpich.prefix.include, "mpi_abi.h")
        with open(join_path(shim, "include", "mpi.h"), "w") as out:
            out.write(f'#include "{header}"\n#ifdef __cplusplus\nextern "C" {{\n#endif\n')
            out.write(self.fortran_declarations())
            out.write("#ifdef __cplusplus\n}\n#endif\n")
        # mpi_abi.h is included by its path: MPICH's own mpi.h must not be on the path
        compile_ = f"{spack_cc} -DMPI_ABI -I{join_path(shim, 'include')}"
        lib = mpich.prefix.lib
        link = f"-L{lib} -Wl,--enable-new-dtags -Wl,-rpath,{lib} -lmpi_abi"
        wrapper = join_path(shim, "mpicc_abi")
        with open(wrapper, "w") as out:
            out.write("#!/bin/sh\n")
            show = f'[ "$a" = -show ] && {{ echo "{compile_} {link}"; exit 0; }}'
            out.write(f'for a in "$@"; do {show}; done\n')
            out.write(f'exec {compile_} "$@" {link}\n')
        os.chmod(wrapper, 0o755)
        return wrapper

    def cmake_args(self):
        return [
            self.define("BUILD_SHARED_LIBS", True),
            self.define("MPI_C_COMPILER", self.abi_compiler()),
        ]

    def setup_dependent_package(self, module, dependent_spec):
        mpich = self.spec["mpich"]
        self.spec.mpicc = join_path(mpich.prefix.bin, "mpicc_abi")
        self.spec.mpicxx = join_path(mpich.prefix.bin, "mpicxx_abi")
        self.spec.mpifc = join_path(self.prefix.bin, "mpifort")
        self.spec.mpif77 = join_path(self.prefix.bin, "mpifort")

    def setup_dependent_build_environment(self, env, dependent_spec):
        # mpifort runs MPIF_FC: Spack's wrapper, with the spec's flags, target and RUNPATHs
        module = dependent_spec.package.module
        if hasattr(module, "spack_fc"):
            env.set("MPIF_FC", module.spack_fc)
        mpich = self.spec["mpich"]
        env.set("MPICC", join_path(mpich.prefix.bin, "mpicc_abi"))
        env.set("MPICXX", join_path(mpich.prefix.bin, "mpicxx_abi"))
        env.set("MPIFC", join_path(self.prefix.bin, "mpifort"))
        env.set("MPIF77", join_path(self.prefix.bin, "mpifort"))
        env.set("MPIF90", join_path(self.prefix.bin, "mpifort"))

    @property
    def libs(self):
        """libmpi_abi; with libmpif first for `spec["mpi:fortran"].libs`."""
        abi = self.spec["mpich"].libs
        if "fortran" not in self.spec.last_query.extra_parameters:
            return abi
        return find_libraries("libmpif", root=self.prefix, shared=True, recursive=True) + abi
