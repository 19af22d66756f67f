# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.netcdf_c.package import AutotoolsBuilder as BuiltinAutotools
from spack_repo.builtin.packages.netcdf_c.package import CMakeBuilder  # noqa: F401
from spack_repo.builtin.packages.netcdf_c.package import NetcdfC as BuiltinNetcdfC

from spack.package import *  # noqa: F401 (every recipe's import, as Spack's style has it)


class NetcdfC(BuiltinNetcdfC):
    """NetCDF-C as Spack's builtin recipe builds it, except that a `+shared` build with
    Autotools installs the shared library alone: builtin passes `--enable-static` too, so
    libtool compiles every source twice, and nothing in the stack links the archive."""


class AutotoolsBuilder(BuiltinAutotools):
    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("~shared"):
            return args
        return [a for a in args if a != "--enable-static"] + ["--disable-static"]
