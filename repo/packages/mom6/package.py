# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Mom6(AutotoolsPackage):
    """MOM6, the Modular Ocean Model of NOAA-GFDL (the ocean of GFDL's ESM4 and CM4),
    a generalized vertical coordinate ocean model built on the FMS framework. This
    package builds the ocean-only model (the solo driver) with MOM6's own autoconf build
    (ac/) and installs the executable MOM6, which reads input.nml, MOM_input and
    MOM_override from its working directory (e.g. MOM6-examples' ocean_only cases)."""

    homepage = "https://github.com/NOAA-GFDL/MOM6"
    git = "https://github.com/NOAA-GFDL/MOM6.git"

    maintainers("climstack")

    license("LGPL-3.0-only")

    version("main", branch="main", submodules=True)
    # 2024-09-27 "EBT Backscatter (#706)", the MOM6 that MOM6-examples (642364e) pins
    version(
        "2024-09-27",
        commit="df2cd1265006eb2e98cd9471a8f77c6d8a1c1135",
        submodules=True,
        preferred=True,
    )

    variant("openmp", default=False, description="Build with OpenMP threading")
    variant(
        "asymmetric",
        default=False,
        description="Dynamic non-symmetric memory (one less point on the C-grid's "
        "southern and western edges) instead of the default dynamic symmetric layout",
    )
    variant(
        "real8",
        default=True,
        description="Force 8-byte default reals (MOM6's ac/ default; what its tests use)",
    )

    depends_on("c", type="build")
    depends_on("fortran", type="build")
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("m4", type="build")
    # ac/makedep, the Fortran dependency generator, is a Python script
    depends_on("python", type="build")

    depends_on("mpi")
    depends_on("netcdf-fortran")
    depends_on("netcdf-c")
    # MOM6's infra/FMS2 layer (picked when FMS has fms2_io_mod), 64-bit reals;
    # FMS 2023.03 is what MOM6's own ac/deps builds at this commit
    depends_on("fms@2023.03: precision:=64 ~gfs_phys")
    depends_on("fms ~openmp", when="~openmp")
    depends_on("fms +openmp", when="+openmp")

    # ac/configure.ac uses the MOM6 tree above ac/ as its source directory
    configure_directory = "ac"

    @property
    def build_directory(self):
        return join_path(self.stage.source_path, "build")

    def autoreconf(self, spec, prefix):
        # no libtool: configure.ac builds no libraries; its macros live in ac/m4
        with working_dir(self.configure_directory):
            which("autoreconf")("--install", "--force", "--verbose")

    def fms_link_dir(self):
        """ac/configure links -lFMS; FMS's CMake build installs libfms_r8.a."""
        return join_path(self.build_directory, "fms-lib")

    @run_before("configure")
    def link_fms(self):
        fms = self.spec["fms"].prefix
        mkdirp(self.fms_link_dir())
        link = join_path(self.fms_link_dir(), "libFMS.a")
        if not os.path.lexists(link):
            symlink(join_path(fms.lib, "libfms_r8.a"), link)

    def configure_args(self):
        spec = self.spec
        memory = "dynamic_nonsymmetric" if spec.satisfies("+asymmetric") else "dynamic_symmetric"
        source = self.stage.source_path
        # autoconf's default FCFLAGS, plus FMS's 64-bit modules
        fcflags = ["-g", "-O2", f"-I{spec['fms'].prefix.include_r8}"]
        args = [
            f"MPIFC={spec['mpi'].mpifc}",
            f"MPICC={spec['mpi'].mpicc}",
            f"PYTHON={spec['python'].command.path}",
            f"MOM_MEMORY={join_path(source, 'config_src', 'memory', memory, 'MOM_memory.h')}",
            f"FCFLAGS={' '.join(fcflags)}",
            f"LDFLAGS=-L{self.fms_link_dir()} {spec['netcdf-fortran'].libs.ld_flags}",
            "--with-driver=solo_driver",
        ]
        args += self.enable_or_disable("openmp")
        if spec.satisfies("~real8"):
            args.append("--disable-real-8")
        return args

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install(join_path(self.build_directory, "MOM6"), prefix.bin)
