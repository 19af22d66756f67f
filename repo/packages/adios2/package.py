# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.adios2.package import Adios2 as BuiltinAdios2

from spack.package import *  # noqa: F401 (every recipe's import, as Spack's style has it)


class Adios2(BuiltinAdios2):
    """ADIOS2 as Spack's builtin recipe builds it, with the features that recipe leaves to
    CMake's AUTO detection turned off: builtin names no variant for them, so whether a
    build has them would depend on what the build machine happens to have installed. The
    climate stack's ADIOS2 is the one of the I/O comparison (environments/stack.yaml,
    `io_layers`): MPI, the BP4 and BP5 engines (always built), the HDF5 engine, the C, C++
    and Fortran bindings and adios2_iotest (built with MPI). Upstream's 2.10.2 tarball is
    reproduced byte for byte from a git copy of the tag (climstack.stack.bench_sources)."""

    #: AUTO-detected features builtin has no variant for: MHS (multi-host storage), the
    #: ZeroMQ and UCX transports, Sodium's encryption and DAOS (DDN IME: builtin's off)
    UNDECLARED_FEATURES = ("MHS", "ZeroMQ", "UCX", "Sodium", "DAOS")

    def cmake_args(self):
        args = super().cmake_args()
        return args + [self.define(f"ADIOS2_USE_{f}", False) for f in self.UNDECLARED_FEATURES]


def _lower_hdf5_floor(package, floor: str) -> None:
    """Builtin (spack-packages PR 3626, 2026) asks HDF5 1.12 or newer of ADIOS2 2.9 and later,
    giving no reason. ADIOS2 2.10.2's HDF5 engine builds and runs on HDF5 1.10: the image's
    HDF5 is 1.10.8, the host's release (the bind-host-netcdf mode needs it), and benchio
    writes through that engine there (docs/benchmarks.md). No directive removes an
    inherited dependency, so the floor is lowered in place."""
    for when, by_name in package.dependencies.items():
        dependency = by_name.get("hdf5")
        if when.satisfies("@2.9:") and dependency and dependency.spec.satisfies("hdf5@1.12:"):
            dependency.spec = Spec(f"hdf5@{floor}:")


_lower_hdf5_floor(Adios2, "1.10")
