"""A synthetic Cray PE tree: real ELF libraries with Cray's names and links, under a
temporary root, for discovery and bind tests without a Cray."""

import subprocess
import tempfile
from pathlib import Path

CRAY_MPICH = "/opt/cray/pe/mpich/8.1.27/ofi/gnu/9.1"
CRAY_LIB_SOURCE = r"""
__attribute__((used)) static const char strings[][64] = {
    "MPI VERSION    : CRAY MPICH version 8.1.27.4 (ANL base 3.4a2)", "12:0:0", "3.4a2"};
int MPI_Init(int *argc, char ***argv) { return 0; }
int PMPI_Init(int *argc, char ***argv) { return 0; }
int MPI_Finalize(void) { return 0; }
int PMPI_Finalize(void) { return 0; }
"""


#: PrgEnv-cray: the CCE runtime (what `module load PrgEnv-cray` puts on LD_LIBRARY_PATH), the
#: CCE flavour of Cray MPICH, and the flavours of cray-hdf5-parallel/cray-netcdf-hdf5parallel
CCE_RUNTIME = "/opt/cray/pe/cce/16.0.1/cce/x86_64/lib"
CCE_LIBRARIES = ("libmodules.so.1", "libfi.so.1", "libcraymath.so.1", "libf.so.1", "libu.so.1")
CRAY_MPICH_CCE = "/opt/cray/pe/mpich/8.1.27/ofi/cray/10.0"
IO_BUILDS = {"gnu": ("gnu/9.1", "gnu_91"), "cray": ("crayclang/14.0", "cray")}
HDF5 = "/opt/cray/pe/hdf5-parallel/1.12.2.7"
NETCDF = "/opt/cray/pe/netcdf-hdf5parallel/4.9.0.7"
HDF5_SOURCE = r"""
__attribute__((used)) static const char version[] = "HDF5 library version: 1.12.2";
int H5open(void) { return 0; }
int H5Fcreate(void) { return 0; }
"""


def shared_library(
    root: Path,
    path: str,
    soname: str,
    needs: list[str] = (),
    runpath: str = "",
    source: str = "int NAME_marker(void) { return 1; }\n",
) -> Path:
    """Compile a real shared library at root/path with SONAME `soname`, DT_NEEDED on the
    library files `needs` (paths under root) and an optional RUNPATH."""
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "lib.c"
        c_file.write_text(source.replace("NAME", soname.split(".")[0].replace("-", "_")))
        command = [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            str(target),
            str(c_file),
            f"-Wl,-soname,{soname}",
            "-Wl,--no-as-needed",
        ]
        command += [str(root / n.lstrip("/")) for n in needs]
        if runpath:
            command += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
        subprocess.run(command, check=True, capture_output=True, text=True)
    return target


def _link(root: Path, path: str, target: str) -> None:
    link = root / path.lstrip("/")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


#: system libraries ARCHER2's container guide binds from /usr/lib64 -> what each needs here
SYSTEM_LIBRARIES = {
    "libnl-3.so.200": [],
    "libnl-route-3.so.200": ["libnl-3.so.200"],
    "libnl-genl-3.so.200": ["libnl-3.so.200"],
    "libibverbs.so.1": ["libnl-3.so.200", "libnl-route-3.so.200"],
    "librdmacm.so.1": ["libibverbs.so.1", "libnl-3.so.200"],
    "libyaml-0.so.2": [],
    "libkeyutils.so.1": [],
    "liblnetconfig.so.4": ["libyaml-0.so.2", "libnl-genl-3.so.200"],
    "liblustreapi.so": ["liblnetconfig.so.4", "libkeyutils.so.1"],
    "libmunge.so.2": [],
    "libjansson.so.4": [],
    # Slingshot 11 (Gaea, Setonix): the CXI NIC library and what the sites pass in with it
    "libjson-c.so.3": [],
    "libcxi.so.1": ["libjson-c.so.3"],
    "libdrm.so.2": [],
    "libnuma.so.1": [],
}
GCC_LIBS = ("libgfortran.so.5", "libquadmath.so.0", "libgcc_s.so.1", "libatomic.so.1")
XPMEM = {"current": "/opt/xpmem/lib64", "legacy": "/opt/cray/xpmem/default/lib64"}


def _cray_mpich(
    root: Path, prefix: str, file: str, soname: str, fabric: str, source: str = CRAY_LIB_SOURCE
) -> None:
    """Cray MPICH's library in prefix/lib (needing libfabric and PMI) and the ABI link to it,
    lib-abi-mpich/libmpi.so.12, as the cray-mpich-abi module puts it first."""
    needs = [f"{fabric}/libfabric.so.1", "/opt/cray/pe/lib64/libpmi.so.0"]
    shared_library(root, f"{prefix}/lib/{file}", soname, needs, source=source)
    _link(root, f"{prefix}/lib-abi-mpich/libmpi.so.12", f"../lib/{file}")


def cray_tree(root: Path, xpmem: tuple[str, ...] = ("current", "legacy")) -> Path:
    """An ARCHER2-like Cray PE (CPE 23.09, CLE7 naming) under `root`, in the layout the
    ARCHER2 container guide shows: lib-abi-mpich/libmpi.so.12 is a link to a library whose
    SONAME is libmpich_gnu_71.so.3, needing PMI (via /opt/cray/pe/lib64 links and a RUNPATH
    to PALS) and libfabric (needing the verbs stack in /usr/lib64); the GCC runtime in
    /opt/cray/pe/gcc-libs; GPU transport libraries in gtl/lib; the real libxpmem at
    /opt/xpmem/lib64 (today's guide) and/or /opt/cray/xpmem/default/lib64 (older). It also
    holds what Gaea's and Setonix's site.yaml name (libcxi, PALS 1.4, libdrm's data), and
    a cxi provider plugin in libfabric's provider directory, needing libcxi.so.1."""
    for name, needs in SYSTEM_LIBRARIES.items():
        shared_library(root, f"/usr/lib64/{name}", name, [f"/usr/lib64/{n}" for n in needs])
    shared_library(root, "/usr/lib64/libibverbs/libmlx5-rdmav34.so", "libmlx5-rdmav34.so")
    for name in GCC_LIBS:
        shared_library(root, f"/opt/cray/pe/gcc-libs/{name}", name)
    fabric = "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"
    shared_library(
        root,
        f"{fabric}/libfabric.so.1.15",
        "libfabric.so.1",
        ["/usr/lib64/libibverbs.so.1", "/usr/lib64/librdmacm.so.1"],
    )
    _link(root, f"{fabric}/libfabric.so.1", "libfabric.so.1.15")
    # a provider plugin libfabric dlopens from its provider directory (RUNPATH $ORIGIN/..)
    shared_library(
        root, f"{fabric}/libfabric/libcxi-fi.so", "libcxi-fi.so", ["/usr/lib64/libcxi.so.1"]
    )
    shared_library(root, "/opt/cray/pe/pals/1.2.4/lib/libpals.so.0", "libpals.so.0")
    shared_library(root, "/opt/cray/pals/1.4/lib/libpals.so.0", "libpals.so.0")  # Gaea C6
    shared_library(
        root,
        "/opt/cray/pe/pmi/6.1.12/lib/libpmi.so.0",
        "libpmi.so.0",
        ["/opt/cray/pe/pals/1.2.4/lib/libpals.so.0"],
        runpath="/opt/cray/pe/pals/1.2.4/lib",
    )
    _link(root, "/opt/cray/pe/lib64/libpmi.so.0", "../pmi/6.1.12/lib/libpmi.so.0")
    real_xpmem = "/opt/cray/xpmem/2.6.2-2.5_2.22"
    if "legacy" in xpmem:
        shared_library(root, f"{real_xpmem}/lib64/libxpmem.so.0", "libxpmem.so.0")
        _link(root, "/opt/cray/xpmem/default", "2.6.2-2.5_2.22")
    if "current" in xpmem:
        shared_library(root, f"{XPMEM['current']}/libxpmem.so.0", "libxpmem.so.0")
    _cray_mpich(root, CRAY_MPICH, "libmpich_gnu_91.so.12.0.0", "libmpich_gnu_71.so.3", fabric)
    shared_library(
        root, "/opt/cray/pe/mpich/8.1.27/gtl/lib/libmpi_gtl_cuda.so.0", "libmpi_gtl_cuda.so.0"
    )
    io_builds(root, fabric)
    for path in (
        "/etc/host.conf",
        "/etc/resolv.conf",
        "/etc/libnl/classid",
        "/etc/libibverbs.d/mlx5.driver",
        "/run/munge/munge.socket.2",
    ):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
    for path in (
        "/var/spool/slurmd/mpi_cray_shasta",
        "/usr/share/libdrm",
        "/run/cxi",
        "/etc/slurm",
        "/var/opt/cray/pe",
        "/var/run/munge",
    ):
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return root


def io_builds(root: Path, fabric: str) -> None:
    """The CCE runtime, the CCE Cray MPICH, and GNU and CRAY builds of HDF5 and NetCDF
    (Cray's names: libhdf5_parallel_gnu_91.so.200, ...); the CRAY ones and the CCE MPICH
    need the CCE runtime, reachable only through LD_LIBRARY_PATH (no RUNPATH)."""
    cce = [f"{CCE_RUNTIME}/{name}" for name in CCE_LIBRARIES]
    for path, name in zip(cce, CCE_LIBRARIES):
        shared_library(root, path, name)
    shared_library(
        root,
        f"{CRAY_MPICH_CCE}/lib/libmpich_cray_100.so.12.0.0",
        "libmpich_cray_100.so.12",
        [f"{fabric}/libfabric.so.1", "/opt/cray/pe/lib64/libpmi.so.0", *cce],
        source=CRAY_LIB_SOURCE,
    )
    _link(
        root, f"{CRAY_MPICH_CCE}/lib-abi-mpich/libmpi.so.12", "../lib/libmpich_cray_100.so.12.0.0"
    )
    for flavour, (sub, tag) in IO_BUILDS.items():
        runtime = cce if flavour == "cray" else ["/opt/cray/pe/gcc-libs/libgfortran.so.5"]
        lib = f"{HDF5}/{sub}/lib"
        c = f"{lib}/libhdf5_parallel_{tag}.so.200.2.0"
        shared_library(root, c, f"libhdf5_parallel_{tag}.so.200", runtime, source=HDF5_SOURCE)
        _link(root, f"{lib}/libhdf5_parallel_{tag}.so.200", Path(c).name)  # as ldconfig
        _link(root, f"{lib}/libhdf5_parallel.so", Path(c).name)
        # the PE's default versions are linked in /opt/cray/pe/lib64 (ld.so.conf'd there)
        _link(root, f"/opt/cray/pe/lib64/libhdf5_parallel_{tag}.so.200", f"../../../..{c}")
        for part in ("hl", "fortran"):
            shared_library(
                root,
                f"{lib}/libhdf5_{part}_parallel_{tag}.so.200",
                f"libhdf5_{part}_parallel_{tag}.so.200",
                [c, *runtime],
            )
        nc = f"{NETCDF}/{sub}/lib/libnetcdf_parallel_{tag}.so.19"
        shared_library(root, nc, f"libnetcdf_parallel_{tag}.so.19", [c, *runtime])
        shared_library(
            root,
            f"{NETCDF}/{sub}/lib/libnetcdff_parallel_{tag}.so.7",
            f"libnetcdff_parallel_{tag}.so.7",
            [nc, *runtime],
        )


#: Cray MPICH 9 on CPE 26.03, as site/frontier pins it (its gnu/12.3 build directory); the
#: base in its version string is climstack.cray.mpich_base's (no public 9.1.0 string names one)
CRAY_MPICH_9 = "/opt/cray/pe/mpich/9.1.0/ofi/gnu/12.3"
CRAY_9_SOURCE = CRAY_LIB_SOURCE.replace("8.1.27.4 (ANL base 3.4a2)", "9.1.0 (ANL base 4.2.2)")


def cray9_tree(root: Path, xpmem: str = "/opt/cray/xpmem/2.11.3/lib64") -> Path:
    """A Cray PE of CPE 26.03 under `root`, in the layout site/frontier's externals and
    site.yaml name: Cray MPICH 9.1.0 (lib-abi-mpich/libmpi.so.12 a link to the gnu/12.3
    build, "ANL base 4.2.2" in its .rodata) needing cray-pmi 6.1.17 (through
    /opt/cray/pe/lib64, needing PALS) and Slingshot Host Software 14's libfabric 2.3.1,
    whose cxi provider needs libcxi; XPMEM in `xpmem` (/opt/cray/xpmem/default links to it
    there; Perlmutter's is the system's, /usr/lib64); the Slingshot
    libraries in /usr/lib64; Slurm's spool and /run/cxi."""
    for name, needs in SYSTEM_LIBRARIES.items():
        shared_library(root, f"/usr/lib64/{name}", name, [f"/usr/lib64/{n}" for n in needs])
    fabric = "/opt/cray/libfabric/2.3.1/lib64"
    shared_library(root, f"{fabric}/libfabric.so.1.27.0", "libfabric.so.1")
    _link(root, f"{fabric}/libfabric.so.1", "libfabric.so.1.27.0")
    shared_library(
        root, f"{fabric}/libfabric/libcxi-fi.so", "libcxi-fi.so", ["/usr/lib64/libcxi.so.1"]
    )
    pals = "/opt/cray/pals/1.7/lib/libpals.so.0"
    shared_library(root, pals, "libpals.so.0")
    _link(root, "/opt/cray/pals/default", "1.7")
    pmi = "/opt/cray/pe/pmi/6.1.17/lib/libpmi.so.0"
    shared_library(root, pmi, "libpmi.so.0", [pals], runpath="/opt/cray/pals/default/lib")
    _link(root, "/opt/cray/pe/lib64/libpmi.so.0", "../pmi/6.1.17/lib/libpmi.so.0")
    shared_library(root, f"{xpmem}/libxpmem.so.0", "libxpmem.so.0")
    if xpmem.startswith("/opt/cray/xpmem/"):
        _link(root, "/opt/cray/xpmem/default", Path(xpmem).parent.name)
    _cray_mpich(
        root,
        CRAY_MPICH_9,
        "libmpi_gnu_123.so.12.0.0",
        "libmpi_gnu_123.so.12",
        fabric,
        CRAY_9_SOURCE,
    )
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/host.conf").write_text("")
    for path in ("/var/spool/slurmd/mpi_cray_shasta", "/run/cxi"):
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return root
