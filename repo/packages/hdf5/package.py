# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.hdf5.package import Hdf5 as BuiltinHdf5

from spack.package import *


class Hdf5(BuiltinHdf5):
    """HDF5 as Spack's builtin recipe builds it, plus the HDF5 releases Debian ships as
    source. Debian's orig tarballs are repacks of upstream's release (not the HDF Group's
    release tarballs, so they have other checksums): they are the HDF5 sources this
    project can reach offline (`climstack source-mirror fill-debian`). The image built on
    this machine takes the release of the host's HDF5 (Debian 12's 1.10.8), so that its
    HDF5 callers can run on the host's HDF5 bound in; a centre with internet may use any
    builtin version instead. A `+shared` build installs the shared libraries alone: builtin
    also builds the static ones, compiling every source twice, and nothing links them."""

    # Debian trixie's hdf5 1.14.5+repack-3: upstream's tag hdf5_1.14.5, repacked
    version(
        "1.14.5.debian",
        sha256="71cdb04c151ef4e8a7f88907adfc4f3b75afd44e96fbd55775e1c9d7c4e7c112",
        url="http://deb.debian.org/debian/pool/main/h/hdf5/hdf5_1.14.5+repack.orig.tar.gz",
    )
    # Debian bookworm's hdf5 1.10.8+repack1-1: the release of Debian 12's libhdf5-*-dev
    version(
        "1.10.8.debian",
        sha256="7b38e58ff83b13fd8959a90b13bf896bc318ba096c940ab0847abf3ad41a0b31",
        url="http://deb.debian.org/debian/pool/main/h/hdf5/hdf5_1.10.8+repack1.orig.tar.gz",
    )

    def cmake_args(self):
        args = super().cmake_args()
        if self.spec.satisfies("~shared"):
            return args
        shared_only = {"ONLY_SHARED_LIBS": True, "BUILD_STATIC_LIBS": False}
        args = [a for a in args if not a.startswith("-DONLY_SHARED_LIBS")]
        return args + [self.define(name, value) for name, value in shared_only.items()]
