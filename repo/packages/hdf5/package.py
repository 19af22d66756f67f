# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.hdf5.package import Hdf5 as BuiltinHdf5

from spack.package import *


class Hdf5(BuiltinHdf5):
    """HDF5 as Spack's builtin recipe builds it, plus the HDF5 release Debian ships as
    source. Debian's orig tarball is a git export of upstream's release tag (not the
    HDF Group's release tarball, so it has another checksum): it is the one HDF5 source
    this project can reach offline (`climstack source-mirror fill-debian`), and the
    version the container images build. A centre with internet may use any builtin
    version instead."""

    # Debian trixie's hdf5 1.14.5+repack-3: upstream's tag hdf5_1.14.5, repacked
    version(
        "1.14.5.debian",
        sha256="71cdb04c151ef4e8a7f88907adfc4f3b75afd44e96fbd55775e1c9d7c4e7c112",
        url="http://deb.debian.org/debian/pool/main/h/hdf5/hdf5_1.14.5+repack.orig.tar.gz",
    )
