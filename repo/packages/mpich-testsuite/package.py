# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *

#: `tests=smoke`: 33 tests of at most 4 ranks, by directory (point-to-point, collectives,
#: datatypes, communicators, one-sided, attributes), each built and listed alone; MPI 3.1
#: calls only, so that MPICH 3.4.3 (Cray MPICH 8's base) builds every one
SMOKE = {
    "pt2pt": ("sendrecv2", "sendall", "anyall", "bsend1", "icsend", "icprobe",
              "rqstatus", "mprobe", "large_tag"),
    "coll": ("allred2", "bcasttest", "coll4", "gather", "scatterv", "redscat", "nonblocking",
             "iallred", "neighb_alltoallw"),
    "datatype": ("contents", "lbub", "tresized", "sendrecvt2", "subarray", "struct_pack"),
    "comm": ("dup", "cmsplit", "ic1", "comm_idup"),
    "rma": ("winname", "test1", "accfence2", "lockcontention"),
    "attr": ("attrt",),
}  # fmt: skip
#: the Fortran tests' directories a suite built outside MPICH's own tree has
FORTRAN_DIRECTORIES = ("f77", "f90")
#: `+fortran`'s smoke: 10 tests of both Fortran bindings a suite built outside MPICH's own
#: tree has (mpif.h: f77, `use mpi`: f90; its configure builds f08 only inside MPICH's)
FORTRAN_SMOKE = {
    "f77/pt2pt": ("sendf",),
    "f77/coll": ("uallreducef",),
    "f77/datatype": ("typecntsf",),
    "f77/rma": ("winfencef",),
    "f77/attr": ("commattrf",),
    "f90/pt2pt": ("isendf90",),
    "f90/coll": ("nonblockingf90",),
    "f90/datatype": ("typecntsf90",),
    "f90/rma": ("winaccf90",),
    "f90/comm": ("commnamef90",),
}


class MpichTestsuite(AutotoolsPackage):
    """MPICH's conformance suite, `test/mpi` of an MPICH release: programs that use the MPI
    standard alone (configured --enable-strictmpi), MPICH's runner `runtests` and the
    testlists that give each test's rank count, time limit and arguments. Built against
    the `mpi` Spack gives it, by that MPI's own mpicc, so any MPI can be judged by it; the
    built tree is installed to run in place:
    `<prefix>/runtests -srcdir=<prefix> -tests=testlist -mpiexec=...`.

    `+fortran` builds the Fortran tests too (f77 and f90), by the MPI's own mpif77 and
    mpifort: a bind plan swaps the MPI's Fortran library (libmpifort) as well. For the
    standard ABI (`abi=standard +fortran ^mpif`), by mpif's mpifort: libmpif.so.1 over the
    C ABI alone, which the MPI-5 image carries. Left out:
    C++, ROMIO's I/O tests,
    dynamic processes (spawn: no container route starts new ranks), fault tolerance and
    the generated datatype pools (dtpools: thousands of variants of the datatype tests)."""

    homepage = "https://www.mpich.org/"
    url = "http://deb.debian.org/debian/pool/main/m/mpich/mpich_4.0.2.orig.tar.xz"

    maintainers("climstack")

    license("mpich2")

    # Debian bookworm's mpich 4.0.2-3: the orig tarball is upstream's mpich-4.0.2
    # recompressed (other checksum than mpich.org's .tar.gz); the release of the host MPICH
    version(
        "4.0.2.debian",
        sha256="b27039f964afeb6b8a3e009c56b441cbe368c26d6d6476ad3bb7190996875860",
        url=url,
    )

    variant(
        "tests",
        default="all",
        values=("all", "smoke", "fortran"),
        multi=False,
        description="every test, the smoke slice (33 C tests of at most 4 ranks, 10 Fortran "
        "ones with +fortran), or every Fortran test (+fortran)",
    )

    variant(
        "abi",
        default="mpich",
        values=("mpich", "standard"),
        multi=False,
        description="the ABI the tests are compiled for: the MPI's own (mpicc), or the MPI-5 "
        "standard ABI (mpicc_abi, libmpi_abi.so.1), which any MPI of that ABI then runs",
    )

    variant(
        "fortran",
        default=False,
        description="the Fortran tests too (f77, f90), by the MPI's mpif77 and mpifort "
        "(mpif's mpifort for abi=standard)",
    )

    depends_on("c", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("mpi")
    # MPICH 5 is the first MPICH with the standard ABI's mpi.h and mpicc_abi
    conflicts("abi=standard", when="^mpich@:4", msg="the MPI-5 standard ABI needs MPICH 5")
    conflicts("tests=fortran", when="~fortran", msg="the Fortran slice needs +fortran")
    # the standard ABI's Fortran is mpif's (libmpif.so.1 over the C ABI): then `mpi` is mpif,
    # over the MPICH whose mpicc_abi compiles the C tests
    requires("^mpif", when="+fortran abi=standard", msg="the standard ABI's Fortran is mpif's "
             "(site/container-mpi-abi's recipe)")  # fmt: skip
    depends_on("perl", type="run")  # runtests

    configure_directory = "test/mpi"

    def configure_args(self):
        mpi = self.spec["mpi"]
        if self.spec.satisfies("abi=standard"):  # configure takes $MPICC (MPICH's mpicc)
            compiler = [f"MPICC={self._mpicc_abi}", f"CC={self._mpicc_abi}"]
        else:
            compiler = [f"--with-mpi={mpi.prefix}", f"CC={mpi.mpicc}"]
        return [
            *compiler,
            # RUNPATH, as the images link: a bind plan's LD_LIBRARY_PATH must win over it
            "LDFLAGS=-Wl,--enable-new-dtags",
            "--enable-strictmpi",
            *self._fortran(),
            "--disable-cxx",
            "--disable-romio",
            "--disable-spawn",
            "--disable-ft-tests",
            "--disable-dtpools",
        ]

    def _fortran(self):
        if not self.spec.satisfies("+fortran"):
            return ["--enable-fortran=no"]
        mpi = self.spec["mpi"]
        return ["--enable-fortran=f77,f90", f"MPIF77={mpi.mpif77}", f"MPIFC={mpi.mpifc}"]

    @property
    def _mpicc_abi(self):  # MPICH's, also under mpif (which provides `mpi` over it)
        return join_path(self.spec["mpich"].prefix.bin, "mpicc_abi")

    def setup_build_environment(self, env):
        if self.spec.satisfies("abi=standard"):  # over what the MPI's package set
            env.set("MPICC", self._mpicc_abi)

    def build(self, spec, prefix):
        if spec.satisfies("tests=fortran"):  # f77 and f90 alone, under the top testlist
            with working_dir(self.build_directory):
                make("-C", "util")
                for directory in FORTRAN_DIRECTORIES:
                    make("-k", "-C", directory, fail_on_error=False)
                _list_directories({directory: () for directory in FORTRAN_DIRECTORIES})
            return
        if spec.satisfies("tests=all"):  # an MPI older than the suite lacks some calls:
            with working_dir(self.build_directory):  # what it cannot build is left out
                make("-k", *self.build_targets, fail_on_error=False)
            return
        # the standard ABI's C header has no Fortran interop (MPI_Fint, MPI_<handle>_f2c):
        # a test that calls it is not built there, and counted so
        standard = spec.satisfies("abi=standard")
        keep_going = ["-k"] if standard else []
        smoke = {**SMOKE, **(FORTRAN_SMOKE if spec.satisfies("+fortran") else {})}
        with working_dir(self.build_directory):
            make("-C", "util")
            for directory, programs in smoke.items():
                make(*keep_going, "-C", directory, *programs, fail_on_error=not standard)
                with open(join_path(directory, "testlist"), encoding="utf-8") as listed:
                    lines = listed.read().splitlines()
                with open(join_path(directory, "testlist"), "w", encoding="utf-8") as cut:
                    cut.writelines(f"{_first_run(lines, program)}\n" for program in programs)
            _list_directories(smoke)

    def install(self, spec, prefix):
        """The runner, the testlists and the programs, in the build tree's layout."""
        with working_dir(self.build_directory):
            for root, dirs, files in os.walk("."):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in files:
                    path = join_path(root, name)
                    kept = name in ("testlist", "runtests", "checktests")
                    program = os.access(path, os.X_OK) and not name.endswith((".sh", ".la"))
                    if kept or (program and root != "." and _is_elf(path)):
                        mkdirp(join_path(prefix, root))
                        install(path, join_path(prefix, root, name))


def _list_directories(smoke):
    """Each directory's testlist names only the slice's subdirectories (f77 -> pt2pt, coll),
    from the top-level one down (runtests walks them)."""
    children = {}
    for directory in smoke:
        parts = directory.split("/")
        for depth in range(len(parts)):
            parent = "/".join(parts[:depth]) or "."
            children.setdefault(parent, []).append(parts[depth])
    for parent, names in children.items():
        with open(join_path(parent, "testlist"), "w", encoding="utf-8") as listed:
            listed.write("\n".join(dict.fromkeys(names)) + "\n")


def _first_run(lines, program):
    """The testlist's first line for `program` on at most 4 ranks (its plain run: later
    lines add ranks, arguments or MPICH's own variables)."""
    return next(
        line for line in lines if line.split()[:1] == [program] and int(line.split()[1]) <= 4
    )


def _is_elf(path):
    with open(path, "rb") as stream:
        return stream.read(4) == b"\x7fELF"
