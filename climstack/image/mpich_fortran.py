"""The Fortran bindings of the image's MPICH, PyPI's mpich 3.4.3 wheel (the Cray MPICH 8.1
base, ch4:ofi).

The wheel's MPICH was configured with gfortran, so its libmpi.so.12 carries MPICH's Fortran
support (the Fortran datatypes and their reductions, the attribute and keyval hooks), but
the wheel ships no bindings: no libmpifort, mpif.h or modules. Upstream's tarball cannot be
downloaded here, so the bindings come from the same MPICH series as Debian built it,
bullseye's MPICH 3.4.1 (libmpich12, libmpich-dev, mpich; pinned by sha256, from the pool of the
host's Debian mirror). Into the wheel's prefix go

- lib/libmpifort.so.12: Debian's libmpichfort.so.12 under upstream's name, needing the
  wheel's libmpi.so.12 (upstream's name of Debian's libmpich.so.12), RUNPATH $ORIGIN;
- include/: mpif.h, mpiof.h and the modules (gfortran's module format 15: gfortran 8-14);
- bin/mpifort, mpif90, mpif77: Debian's wrapper, with the wheel's relocatable prefix, its
  RUNPATH, and upstream's library names.

Nothing is installed unless every MPI symbol the bindings import is one the wheel's
libmpi.so.12 exports (`check_symbols`). A recipe's image builds MPICH from source with
+fortran instead; this is the stand-in for the image built on this machine.
"""

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from debian.debfile import DebFile

from climstack import pins
from climstack.bind import elf
from climstack.common import cache, process
from climstack.errors import ClimstackError
from climstack.stack.sources.debian_sources import DebianSources


@dataclass(frozen=True)
class Deb:
    pool_path: str
    sha256: str

    @property
    def name(self) -> str:
        return Path(self.pool_path).name


VERSION = "3.4.1-5~deb11u1"
DEBS = (
    Deb(
        f"pool/main/m/mpich/libmpich12_{VERSION}_amd64.deb",
        "97f0ca38759ba190ddcec2c4ff12f91668bd6fde1cb7d57a6a31e53382320e87",
    ),
    Deb(
        f"pool/main/m/mpich/libmpich-dev_{VERSION}_amd64.deb",
        "f2dc2ab8d0b96762000826070effecb736e25aea099928e06063dcd6f8bc184e",
    ),
    Deb(  # the wrappers
        f"pool/main/m/mpich/mpich_{VERSION}_amd64.deb",
        "f7f2140c1a3d447d798d4841fdba07d2819fad816a85b2088584bac0c60a0b8d",
    ),
)
DEBIAN_LIB = "usr/lib/x86_64-linux-gnu"
DEBIAN_INCLUDE = "usr/include/x86_64-linux-gnu/mpich"
DEBIAN_WRAPPER = "usr/bin/mpifort.mpich"
BINDINGS = "libmpichfort.so.12.1.10"
INCLUDES = ("mpif.h", "mpiof.h")
WRAPPERS = ("mpifort", "mpif90", "mpif77")
#: the symbols a Fortran binding imports from MPICH's C library: the standard's, MPICH's
#: extensions and the internal hooks (MPII_, MPIR_)
FROM_LIBMPI = re.compile(r"^P?MPI[IRX]?_")


def debs() -> Path:
    """The bullseye packages, downloaded once into the user cache (debs/mpich-VERSION/)."""
    key = " ".join(deb.sha256 for deb in DEBS)
    entry = cache.Entry(pins.cache_dir() / "debs" / f"mpich-{VERSION}", key)

    def download(work: Path):
        work.mkdir()
        debian = DebianSources()
        for deb in DEBS:
            debian.download_binary(deb.pool_path, deb.sha256, work)

    return entry.build(download)


def unpack(into: Path) -> Path:
    """The packages' files under `into` (their /usr tree), as dpkg-deb -x would."""
    folder = debs()
    for deb in DEBS:
        DebFile(str(folder / deb.name)).data.tgz().extractall(into, filter="tar")
    return into


def check_symbols(bindings: Path, libmpi: Path) -> None:
    """Refuse bindings that import an MPI symbol `libmpi` does not export."""
    wanted = {s for s in elf.read(bindings).imports if FROM_LIBMPI.match(s)}
    missing = sorted(wanted - elf.read(libmpi).exports)
    if missing:
        raise ClimstackError(
            f"{bindings.name} imports {len(missing)} MPI symbols that {libmpi} does not "
            f"export ({', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''}): they "
            "are not bindings of the same MPICH",
            fix="pin Fortran bindings of the wheel's MPICH series (mpich_fortran.DEBS)",
        )


#: Debian's wrapper -> the wheel's: (pattern, replacement), each to match exactly once
#: (a changed wrapper fails loudly instead of half-adapted)
WRAPPER_EDITS = (
    (r"^prefix=/usr$", 'prefix=$(CDPATH= cd -- "$(dirname -- "${BASH_SOURCE:-$0}")/.." && pwd)'),
    (r"^exec_prefix=/usr$", 'exec_prefix="${prefix}"'),
    (r"^sysconfdir=/etc/mpich$", 'sysconfdir="${prefix}"/etc'),
    (r"^includedir=/usr/include/x86_64-linux-gnu/mpich$", 'includedir="${prefix}"/include'),
    (r"^libdir=/usr/lib/x86_64-linux-gnu$", 'libdir="${prefix}"/lib'),
    (r"^modincdir=/usr/include/x86_64-linux-gnu/mpich$", 'modincdir="${prefix}"/include'),
    # the wheel's mpicc links with RUNPATH (Spack's external says +wrapperrpath)
    (r"^with_wrapper_dl_type=none$", "with_wrapper_dl_type=runpath"),
    # Debian's own build flags out; what gfortran >= 10 needs for mpif.h code stays
    (r"^final_fcflags=.*$", 'final_fcflags=" -fallow-invalid-boz -fallow-argument-mismatch"'),
    (r"^final_ldflags=.*$", 'final_ldflags=""'),
    (
        r"-lmpichfort \$PROFILE_PRELIB \$PROFILE_FOO \$\{wrapper_dl_type_flags\} -lmpich ",
        "-lmpifort $PROFILE_PRELIB $PROFILE_FOO ${wrapper_dl_type_flags} -lmpi ",
    ),
    (
        r"-lmpichfort \$PROFILE_PRELIB \$PROFILE_FOO \$\{wrapper_dl_type_flags\} "
        r"\$libdir/libmpich\.a ",
        "-lmpifort $PROFILE_PRELIB $PROFILE_FOO ${wrapper_dl_type_flags} $libdir/libmpi.a ",
    ),
)


def adapt_wrapper(text: str) -> str:
    for pattern, replacement in WRAPPER_EDITS:
        text, count = re.subn(pattern, lambda _: replacement, text, flags=re.MULTILINE)
        if count != 1:
            raise ClimstackError(
                f"Debian's {DEBIAN_WRAPPER} matches /{pattern}/ {count} times, not once",
                fix="adapt mpich_fortran.WRAPPER_EDITS to the pinned package's wrapper",
            )
    return text


def install(prefix: Path) -> None:
    """Add the Fortran bindings to the wheel's MPICH installed at `prefix`."""
    libmpi = prefix / "lib" / "libmpi.so.12"
    with tempfile.TemporaryDirectory() as tmp:
        tree = unpack(Path(tmp))
        bindings = tree / DEBIAN_LIB / BINDINGS
        check_symbols(bindings, libmpi)
        target = prefix / "lib" / "libmpifort.so.12"
        shutil.copyfile(bindings, target)
        _patchelf("--set-soname", "libmpifort.so.12", target)
        _patchelf("--replace-needed", "libmpich.so.12", "libmpi.so.12", target)
        _patchelf("--set-rpath", "$ORIGIN", target)
        (prefix / "lib" / "libmpifort.so").symlink_to("libmpifort.so.12")
        include = tree / DEBIAN_INCLUDE
        for source in [*(include / name for name in INCLUDES), *include.glob("*.mod")]:
            shutil.copyfile(source, prefix / "include" / source.name)  # follows Debian's links
        wrapper = prefix / "bin" / WRAPPERS[0]
        wrapper.write_text(adapt_wrapper((tree / DEBIAN_WRAPPER).read_text()))
        wrapper.chmod(0o755)
        for alias in WRAPPERS[1:]:
            (prefix / "bin" / alias).symlink_to(WRAPPERS[0])


def _patchelf(*args) -> None:
    process.run(["patchelf", *map(str, args)], f"patchelf {' '.join(map(str, args))}")
