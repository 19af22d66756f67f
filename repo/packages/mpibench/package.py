# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Mpibench(MakefilePackage):
    """mpiBench times MPI collectives (Barrier, Bcast, Alltoall, Allgather, Reduce, ...)
    over a range of message sizes; crunch_mpiBench turns its output into reports."""

    homepage = "https://github.com/LLNL/mpiBench"
    git = "https://github.com/LLNL/mpiBench.git"

    maintainers("climstack")

    license("BSD-3-Clause")  # LLNL BSD notice in mpiBench.c

    version("master", branch="master")
    # 2019-02-01 "replace deprecated MPI functions with new names", the newest commit
    version("2019-02-01", commit="4c855b8d4d192b67dff1fbc37ec4bc82333f3c0b", preferred=True)

    depends_on("c", type="build")
    depends_on("mpi")

    @property
    def build_targets(self):
        return ["mpiBench", f"CC={self.spec['mpi'].mpicc}", "CFLAGS=-O2"]

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install("mpiBench", prefix.bin)
        install("crunch_mpiBench", prefix.bin)
