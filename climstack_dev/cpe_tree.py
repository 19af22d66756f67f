"""Synthetic Cray PE trees of whole CPE releases, in the layout HPE ships: each component
version installed under /opt/cray/pe/<component>/<version>/ with a real ELF library, a Tcl
modulefile per version with `.version` naming the default, and /opt/cray/pe/cpe/<YY.MM>/
with the modulerc.lua that makes that release's versions the defaults."""

from pathlib import Path

from climstack_dev.cray_tree import shared_library

from climstack.cray.cray_pe import COMPONENTS, release_table
from climstack.cray.drift import pinned_modules
from climstack.inputs import sites

#: what a release ships besides its CPE components (libfabric comes with the Slingshot
#: host software, GCC is the PrgEnv-gnu default): as site/archer2, Pawsey's Setonix and
#: OLCF's Frontier pin (25.09: Slingshot Host Software 14's libfabric 2.3.1, site/frontier)
NON_CPE = {
    "23.09": {"libfabric": "1.12.1.2.2.0.0", "gcc": "11.2.0"},
    "25.03": {"libfabric": "1.22.0", "gcc": "14.2.0"},
    "25.09": {"libfabric": "2.3.1", "gcc": "14.2.0"},
    "26.03": {"libfabric": "2.3.1", "gcc": "14.2.0"},
}


def release(name: str) -> dict[str, str]:
    """module -> version of a CPE release (site/cray-ex/cpe-releases.yaml) plus NON_CPE."""
    return {**release_table()[name], **NON_CPE[name]}


#: module -> (path below <install>/<version>, library): the GCC 9.1 builds site/archer2's
#: prefixes name, for the releases its tests play (to 25.03), and from CPE 25.09 on the GCC
#: 12.3 builds (Cray MPICH 9.0.1 on LUMI: Lumi-supercomputer/LUMI-training-materials@d64bc58c
#: docs/2day-20260422/102-CPE.md l.1038; 9.1.0 on Setonix: PawseySC/pawsey-containers pull
#: request 92; HDF5 and NetCDF on Perlmutter: E3SM-Project/mache@98f996ac
#: mache/spack/templates/pm-cpu_gnu_mpich.yaml)
LAYOUTS = {
    "23.09": {
        "cray-mpich": ("ofi/gnu/9.1", "lib/libmpi_gnu_91.so.12"),
        "cray-pmi": ("", "lib/libpmi.so.0"),
        "libfabric": ("", "lib64/libfabric.so.1"),
        "cray-libsci": ("GNU/10.3/x86_64", "lib/libsci_gnu_82.so.5"),
        "cray-hdf5-parallel": ("gnu/9.1", "lib/libhdf5_parallel.so.200"),
        "cray-netcdf-hdf5parallel": ("gnu/9.1", "lib/libnetcdf_parallel.so.19"),
        "cce": ("", "cce/x86_64/lib/libcraymath.so.1"),
        "gcc": ("snos", "lib64/libgfortran.so.5"),
    },
}
LAYOUTS["25.09"] = {
    **LAYOUTS["23.09"],
    "cray-mpich": ("ofi/gnu/12.3", "lib/libmpi_gnu_123.so.12"),
    "cray-libsci": ("GNU/12.3/x86_64", "lib/libsci_gnu_123.so.6"),
    "cray-hdf5-parallel": ("gnu/12.3", "lib/libhdf5_parallel.so.310"),
    "cray-netcdf-hdf5parallel": ("gnu/12.3", "lib/libnetcdf_parallel.so.19"),
}


def layout(release_name: str) -> dict[str, tuple[str, str]]:
    """The build directories of a release: those of the newest layout not after it."""
    return LAYOUTS[max(k for k in LAYOUTS if k <= release_name)]


MODULES = "/opt/cray/pe/modulefiles"
PLAIN_MODULES = ("PrgEnv-gnu/8.4.0", "PrgEnv-cray/8.4.0", "craype-network-ofi/1.0")


def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def install(root: Path, module: str, version: str, release_name: str = "23.09") -> str:
    """One component version, in the layout of `release_name`: its library, and its
    modulefile; returns the prefix."""
    component = next(c for c in COMPONENTS.values() if c.module == module)
    below, library = layout(release_name)[module]
    prefix = "/".join(filter(None, (component.install, version, below)))
    shared_library(root, f"{prefix}/{library}", Path(library).name)
    _write(
        root,
        f"{MODULES}/{module}/{version}",
        (
            f"#%Module1.0\n## {module} {version}\n"
            f"set VERSION {version}\n"
            f"set BASE {component.install}/$VERSION\n"
            f"setenv {component.prefix_variable} $BASE{'/' + below if below else ''}\n"
            f"prepend-path LD_LIBRARY_PATH {prefix}/{Path(library).parent}\n"
        ),
    )
    return prefix


def cpe_tree(root: Path, releases=("23.09",), default="23.09", also=(), defaults=None) -> Path:
    """The Cray PE of `releases` (and `also`: (module, version) pairs outside any release)
    under root; `default` is the system's CPE, `defaults` overrides module defaults."""
    for name in releases:
        for module, version in release(name).items():
            install(root, module, version, name)
        _write(
            root,
            f"/opt/cray/pe/cpe/{name}/modulerc.lua",
            "".join(f'module_version("{m}/{v}","default")\n' for m, v in release(name).items()),
        )
        _write(root, f"{MODULES}/cpe/{name}", f"#%Module1.0\n## CPE {name}\n")
    for module, version in also:
        install(root, module, version, default)
    chosen = {**release(default), **(defaults or {}), "cpe": default}
    for module, version in chosen.items():
        _write(
            root, f"{MODULES}/{module}/.version", f'#%Module1.0\nset ModulesVersion "{version}"\n'
        )
    for module in PLAIN_MODULES:
        _write(root, f"{MODULES}/{module}", "#%Module1.0\n")
    shared_library(root, "/opt/cray/xpmem/2.6.2-2.5_2.22/lib64/libxpmem.so.0", "libxpmem.so.0")
    (root / "opt/cray/xpmem/default").symlink_to("2.6.2-2.5_2.22")
    return root


def cray_sites() -> list[str]:
    """The sites whose scope has Cray PE externals (archer2, gaea-c6, ...)."""
    return [name for name in sites.known_sites() if pinned_modules(sites.get(name))]


def main(argv=None) -> None:
    """Write a stand-in Cray PE tree, e.g. to try `climstack drift SITE --root DIR` on the
    next CPE release: python -m climstack_dev.cpe_tree DIR --releases 25.09 26.03"""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m climstack_dev.cpe_tree", description=main.__doc__
    )
    parser.add_argument("root", type=Path, help="an empty or missing directory")
    parser.add_argument(
        "--releases", nargs="+", default=["23.09"], choices=sorted(NON_CPE), help="installed"
    )
    parser.add_argument("--default", help="the system's CPE (default: the newest installed)")
    args = parser.parse_args(argv)
    if args.root.exists() and any(args.root.iterdir()):
        parser.error(f"{args.root} is not empty: give a new directory")
    default = args.default or max(args.releases)
    if default not in args.releases:
        parser.error(f"--default {default} is not one of --releases {' '.join(args.releases)}")
    cpe_tree(args.root, tuple(args.releases), default)
    print(f"Cray PE of CPE {', '.join(args.releases)} (default {default}) under {args.root}")


if __name__ == "__main__":
    main()
