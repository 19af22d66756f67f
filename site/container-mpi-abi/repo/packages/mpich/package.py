# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.mpich.package import Mpich as BuiltinMpich

from spack.package import *


class Mpich(BuiltinMpich):
    """MPICH as Spack's builtin recipe builds it, plus the MPI-5 standard ABI: with +abi,
    MPICH also builds `libmpi_abi.so.1` (`--enable-mpi-abi`) and its `mpicc_abi`, and every
    package that builds with this MPI's compiler wrappers compiles against the standard
    ABI's `mpi.h` and links `libmpi_abi.so.1` alone, so that any MPI-5 ABI library (MPICH,
    Intel MPI, Open MPI 6) can replace it at run time (containers/mpi-abi/). Builtin has
    MPICH 5.0.0 and 5.0.1 since spack-packages 2026, but not the variant."""

    variant(
        "abi",
        default=False,
        when="@4.3:",
        description="Build libmpi_abi.so.1 (the MPI-5 standard ABI) and compile dependents "
        "against it (mpicc_abi, mpicxx_abi)",
    )
    conflicts(
        "+abi",
        when="@:4",
        msg="MPICH 4.x implements a draft of the standard ABI, not MPI-5's ABI 1.0",
    )
    conflicts(
        "+abi",
        when="@5.0.0:5.0.1",
        msg="MPICH 5.0.0-5.0.1 put PMPI_* in a separate libpmpi_abi, which no other "
        "implementation ships (fixed in 5.0.2)",
    )

    def configure_args(self):
        return super().configure_args() + (
            ["--enable-mpi-abi"] if self.spec.satisfies("+abi") else []
        )

    def setup_dependent_package(self, module, dependent_spec):
        super().setup_dependent_package(module, dependent_spec)
        if self.spec.satisfies("+abi"):  # the standard ABI has no Fortran side in MPICH
            self.spec.mpicc = join_path(self.prefix.bin, "mpicc_abi")
            self.spec.mpicxx = join_path(self.prefix.bin, "mpicxx_abi")

    def setup_mpi_wrapper_variables(self, env):
        super().setup_mpi_wrapper_variables(env)
        if self.spec.satisfies("+abi"):
            env.set("MPICC", join_path(self.prefix.bin, "mpicc_abi"))
            env.set("MPICXX", join_path(self.prefix.bin, "mpicxx_abi"))

    @property
    def libs(self):
        if self.spec.satisfies("+abi"):
            return find_libraries("libmpi_abi", root=self.prefix, shared=True, recursive=True)
        return super().libs
