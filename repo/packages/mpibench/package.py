# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Mpibench(MakefilePackage):
    """mpiBench (LLNL) times MPI collectives (Barrier, Bcast, Alltoall, Allgather, Reduce,
    ...) over a range of message sizes; the crunch_mpiBench Perl script turns its output
    into reports."""

    homepage = "https://github.com/LLNL/mpiBench"
    git = "https://github.com/LLNL/mpiBench.git"

    maintainers("climstack")

    # mpiBench.c and crunch_mpiBench: BSD 3-clause plus LLNL's "Additional BSD Notice"
    license("BSD-3-Clause")

    # upstream's default branch is "main"; it has no releases or tags
    version("main", branch="main")
    # 2019-02-01 "replace deprecated MPI functions with new names", the newest commit
    version("2019-02-01", commit="4c855b8d4d192b67dff1fbc37ec4bc82333f3c0b", preferred=True)

    depends_on("c", type="build")
    depends_on("mpi")
    depends_on("perl", type="run")  # crunch_mpiBench

    @property
    def build_targets(self):
        # the makefile hard-codes CC=mpicc; its mpiBench target also runs `clean`
        return ["mpiBench", f"CC={self.spec['mpi'].mpicc}", "CFLAGS=-O2"]

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install("mpiBench", prefix.bin)
        install("crunch_mpiBench", prefix.bin)
        set_executable(join_path(prefix.bin, "crunch_mpiBench"))
