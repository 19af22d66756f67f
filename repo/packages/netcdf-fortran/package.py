# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.netcdf_fortran.package import NetcdfFortran as Builtin

from spack.package import *  # noqa: F401 (every recipe's import, as Spack's style has it)


class NetcdfFortran(Builtin):
    """NetCDF-Fortran as Spack's builtin recipe builds it, except that a `+shared` build
    installs the shared library alone: builtin passes `--enable-static` too, so libtool
    compiles every source twice, and nothing in the stack links the archive."""

    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("~shared"):
            return args
        return [a for a in args if a != "--enable-static"] + ["--disable-static"]
