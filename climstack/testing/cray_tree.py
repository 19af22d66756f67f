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


def cray_tree(root: Path) -> Path:
    """An ARCHER2-like (CLE7 naming) Cray PE under `root`: lib-abi-mpich/libmpi.so.12 is a
    link to a library whose SONAME is libmpich_gnu_71.so.3, needing PMI (via
    /opt/cray/pe/lib64 links and a RUNPATH to PALS), libfabric (needing libibverbs in
    /usr/lib64) and, through the site's library_path, the real libxpmem."""
    shared_library(root, "/usr/lib64/libibverbs.so.1.14", "libibverbs.so.1")
    _link(root, "/usr/lib64/libibverbs.so.1", "libibverbs.so.1.14")
    fabric = "/opt/cray/libfabric/1.12.1.2.2.0.0/lib64"
    shared_library(
        root, f"{fabric}/libfabric.so.1.15", "libfabric.so.1", ["/usr/lib64/libibverbs.so.1"]
    )
    _link(root, f"{fabric}/libfabric.so.1", "libfabric.so.1.15")
    shared_library(root, "/opt/cray/pe/pals/1.2.4/lib/libpals.so.0", "libpals.so.0")
    shared_library(
        root,
        "/opt/cray/pe/pmi/6.1.12/lib/libpmi.so.0",
        "libpmi.so.0",
        ["/opt/cray/pe/pals/1.2.4/lib/libpals.so.0"],
        runpath="/opt/cray/pe/pals/1.2.4/lib",
    )
    _link(root, "/opt/cray/pe/lib64/libpmi.so.0", "../pmi/6.1.12/lib/libpmi.so.0")
    shared_library(root, "/opt/cray/xpmem/2.6.2-2.5_2.22/lib64/libxpmem.so.0", "libxpmem.so.0")
    _link(root, "/etc/alternatives/cray-xpmem", "/opt/cray/xpmem/2.6.2-2.5_2.22")
    shared_library(
        root,
        f"{CRAY_MPICH}/lib/libmpich_gnu_91.so.12.0.0",
        "libmpich_gnu_71.so.3",
        [f"{fabric}/libfabric.so.1", "/opt/cray/pe/lib64/libpmi.so.0"],
        source=CRAY_LIB_SOURCE,
    )
    _link(root, f"{CRAY_MPICH}/lib-abi-mpich/libmpi.so.12", "../lib/libmpich_gnu_91.so.12.0.0")
    # the image side: an executable built against MPICH, needing libmpi.so.12
    return root
