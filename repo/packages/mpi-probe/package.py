# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack.package import *


class MpiProbe(Package):
    """Tiny MPI program that proves which MPI library is really loaded at run time.

    Rank 0 prints MPI_Get_library_version(), the file MPI_Init was loaded from, the
    number of ranks and an 8-byte ping-pong time between ranks 0 and 1. Its source,
    mpi_probe.c, lives beside this file in the climstack project: nothing is downloaded.
    """

    homepage = "https://docs.archer2.ac.uk/user-guide/containers/"
    has_code = False

    maintainers("climstack")

    license("Apache-2.0 OR MIT")

    version("1.0")

    depends_on("c", type="build")
    depends_on("mpi")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        source = join_path(self.package_dir, "mpi_probe.c")
        mpicc = Executable(spec["mpi"].mpicc)
        mpicc("-O2", "-o", join_path(prefix.bin, "mpi-probe"), source, "-ldl")

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_runs(self):
        output = Executable(self.prefix.bin.join("mpi-probe"))(output=str)
        assert "ranks: 1" in output, output
