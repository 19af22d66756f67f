# Copyright climstack project developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack.package import *


class XpmemStub(Package):
    """An empty shared library with SONAME libxpmem.so.0, for container images.

    Cray MPICH only uses XPMEM for intra-node single-copy transfers when the application
    itself lists libxpmem.so.0 in its ELF DT_NEEDED (without it, collectives run about 2x
    slower on ARCHER2). Linking container executables against this stub puts the entry in
    DT_NEEDED; at run time the host's real libxpmem, bound into the container, satisfies it.
    It defines no symbols: nothing calls XPMEM directly. Built from nothing downloaded.
    """

    homepage = "https://docs.archer2.ac.uk/user-guide/containers/"
    has_code = False

    maintainers("climstack")

    license("Apache-2.0 OR MIT")

    version("1.0")

    depends_on("c", type="build")

    def install(self, spec, prefix):
        mkdirp(prefix.lib)
        with open("xpmem_stub.c", "w", encoding="utf-8") as source:
            source.write("/* intentionally empty: only the SONAME libxpmem.so.0 matters */\n")
        library = join_path(prefix.lib, "libxpmem.so.0")
        Executable(spack_cc)(
            "-shared", "-fPIC", "-Wl,-soname,libxpmem.so.0", "-o", library, "xpmem_stub.c"
        )
        symlink("libxpmem.so.0", join_path(prefix.lib, "libxpmem.so"))

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_soname(self):
        readelf = which("readelf", required=True)
        dynamic = readelf("-d", join_path(self.prefix.lib, "libxpmem.so.0"), output=str)
        assert "[libxpmem.so.0]" in dynamic, "xpmem-stub lost its SONAME"
