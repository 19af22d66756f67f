"""Bind-model ELF properties of a container's software, checked and (for xpmem) fixed.

Every MPICH-ABI executable must (1) list libxpmem.so.0 in DT_NEEDED, so that Cray MPICH
enables XPMEM single-copy transfers; every MPI executable must (2) find its MPI through
DT_RUNPATH, never DT_RPATH, so that the launcher's LD_LIBRARY_PATH (the bound host MPI)
wins, and (3) load one MPI ABI: the MPICH ABI or the MPI-5 standard ABI, never both; (4)
every Fortran MPI executable of the standard ABI calls MPI through mpif (libmpif.so.1, the
image's own, over libmpi_abi.so.1) and loads no MPI implementation's Fortran library.

It needs only pyelftools besides this package: the image's %post and %test run it as
`python3 -m climstack.image.image_check` with Debian's python3-pyelftools.
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

from climstack.bind import elf
from climstack.common import process

#: SONAMEs of the MPICH ABI (libmpi.so.12 and its Fortran/C++ companions)
MPI_SONAMES = {"libmpi.so.12", "libmpifort.so.12", "libmpicxx.so.12", "libmpich.so.12"}
#: SONAMEs of the MPI-5 standard ABI (C, and Intel's Fortran)
STANDARD_SONAMES = {"libmpi_abi.so.1", "libmpifort_abi.so.1"}
XPMEM_SONAME = "libxpmem.so.0"


def resolve_in(sysroot: Path, path: Path) -> Path:
    """Host path of `path` (absolute, or relative to sysroot) as the image sees it, with
    symlinks followed inside the image directory `sysroot`."""
    current = sysroot
    for part in path.relative_to(path.anchor).parts:
        current = current / part
        for _ in range(40):  # the loader's limit on symlink hops
            if not current.is_symlink():
                break
            target = Path(os.readlink(current))
            current = (
                sysroot / target.relative_to("/")
                if target.is_absolute()
                else current.parent / target
            )
    return current


def scan(root: Path, sysroot: Path | None = None) -> list[elf.Elf]:
    """Every dynamic ELF file under root, each read once. With `sysroot`, root and every
    symlink below it are read as inside that image directory."""

    def resolve(path: Path) -> Path:
        return resolve_in(sysroot, path.relative_to(sysroot)) if sysroot else path.resolve()

    seen, found = set(), []
    pending = [resolve_in(sysroot, root) if sysroot else root.resolve()]
    while pending:
        for entry in sorted(pending.pop().iterdir()):
            real = resolve(entry)
            if real in seen:
                continue
            seen.add(real)
            if real.is_dir():
                pending.append(real)
            elif real.is_file() and elf.is_elf(real) and (info := elf.try_read(real)):
                found.append(info)
    return found


def _loaders_of(sonames: set[str], files: list[elf.Elf]) -> set[str]:
    """`sonames` and the SONAMEs of every library that loads one of them, closed."""
    grown = set(sonames)
    changed = True
    while changed:
        changed = False
        for info in files:
            if info.soname and info.soname not in grown and grown.intersection(info.needed):
                grown.add(info.soname)
                changed = True
    return grown


def mpi_users(files: list[elf.Elf], sonames=MPI_SONAMES | STANDARD_SONAMES) -> list[elf.Elf]:
    """Executables that load MPI (of `sonames`) directly or through a library that does."""
    mpi = _loaders_of(set(sonames), files)
    return [f for f in files if f.interpreter and mpi.intersection(f.needed)]


def needed_closure(info: elf.Elf, files: list[elf.Elf]) -> set[str]:
    """The names `info` loads, directly or through the image's libraries (by SONAME)."""
    by_soname = {f.soname: f for f in files if f.soname}
    seen, pending = set(), list(info.needed)
    while pending:
        if (name := pending.pop()) not in seen:
            seen.add(name)
            pending += by_soname[name].needed if name in by_soname else []
    return seen


def fortran_problems(info: elf.Elf, loads: set[str]) -> list[str]:
    """Property (4), for a standard-ABI executable that loads `loads` (needed_closure)."""
    fortran = any(n.islower() and elf.MPI_SYMBOL.match(n) for n in info.mpi_imports())
    implementation = sorted(loads.intersection(elf.IMPLEMENTATION_FORTRAN))
    if implementation:
        return [f"loads {', '.join(implementation)} (an MPI implementation's own Fortran)"]
    if fortran and elf.MPIF_SONAME not in loads:
        return [f"calls MPI from Fortran without {elf.MPIF_SONAME} (mpif)"]
    if elf.MPIF_SONAME in loads and "libmpifort_abi.so.1" in loads:
        return [f"loads both {elf.MPIF_SONAME} and libmpifort_abi.so.1 (two Fortran layers)"]
    return []


def problems(
    info: elf.Elf, mpich: bool = True, standard: bool = False, loads: set[str] = frozenset()
) -> list[str]:
    """What is wrong with MPI executable `info`, which loads the MPICH ABI (`mpich`) and/or
    the MPI-5 standard ABI (`standard`), and the names in `loads` (needed_closure)."""
    found = []
    if standard and not mpich:
        found += fortran_problems(info, loads)
    if mpich and standard:
        found.append("loads both the MPICH ABI (libmpi.so.12) and the MPI-5 ABI (libmpi_abi.so.1)")
    if mpich and XPMEM_SONAME not in info.needed:
        found.append(f"DT_NEEDED lacks {XPMEM_SONAME}")
    if info.rpath:
        found.append(f"has DT_RPATH {':'.join(info.rpath)} (the host MPI would be ignored)")
    if not info.runpath:
        found.append("has no DT_RUNPATH")
    return found


def link_xpmem(files: list[elf.Elf], stub_libdir: Path, keep: Path | None = None) -> int:
    """Add libxpmem.so.0 to DT_NEEDED (and the stub's dir to RUNPATH) of MPI executables;
    with `keep`, first copy each as built to keep/<its absolute path>."""
    patched = 0
    for info in files:
        if XPMEM_SONAME in info.needed:
            continue
        if keep:
            copy = keep / info.path.relative_to("/")
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(info.path, copy)
        # one change per call: patchelf 0.14 (Debian 12) garbles a combined call
        process.run(["patchelf", "--add-needed", XPMEM_SONAME, info.path], "patchelf --add-needed")
        process.run(["patchelf", "--add-rpath", stub_libdir, info.path], "patchelf --add-rpath")
        patched += 1
    return patched


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="climstack.image.image_check", description=__doc__)
    parser.add_argument("root", type=Path, help="directory to scan, e.g. /opt/views/view")
    parser.add_argument(
        "--link-xpmem",
        type=Path,
        metavar="STUB_LIBDIR",
        help="first add libxpmem.so.0 (from this directory) where missing",
    )
    parser.add_argument(
        "--keep-unlinked",
        type=Path,
        metavar="DIR",
        help="with --link-xpmem: keep each executable as built at DIR/<its path>",
    )
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"image_check: error: {args.root} is not a directory", file=sys.stderr)
        return 2
    files = scan(args.root)
    if args.link_xpmem:
        linked = link_xpmem(mpi_users(files, MPI_SONAMES), args.link_xpmem, args.keep_unlinked)
        print(f"linked {XPMEM_SONAME} into {linked} files")
        files = scan(args.root)
    mpich = {f.path for f in mpi_users(files, MPI_SONAMES)}
    # a Fortran program may ask for libmpif.so.1 alone (libmpi_abi.so.1 comes with it)
    standard = {f.path for f in mpi_users(files, STANDARD_SONAMES | {elf.MPIF_SONAME})}
    executables = mpi_users(files, MPI_SONAMES | STANDARD_SONAMES | {elf.MPIF_SONAME})
    failed = []
    for info in sorted(executables, key=lambda i: str(i.path)):
        loads = needed_closure(info, files)
        bad = problems(info, info.path in mpich, info.path in standard, loads)
        layer = " (Fortran: mpif)" if elf.MPIF_SONAME in loads else ""
        line = (
            f"{'FAIL' if bad else 'ok  '} {info.path}{layer}{': ' + '; '.join(bad) if bad else ''}"
        )
        failed += [line] if bad else []
        print(line)
    print("\n".join(failed))  # again, last: what a build log's tail shows
    print(f"{len(executables)} MPI executables checked, {len(failed)} failed")
    if not executables:
        print(f"image_check: error: no MPI executables under {args.root}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
