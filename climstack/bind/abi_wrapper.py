"""The MPI-5 standard ABI over a host MPI that lacks it (Cray MPICH 8 and 9, MPICH < 5, Open
MPI 5): mpi_abi_wrapper's two libraries (repo/packages/mpi-abi-wrapper). Its libmpi_abi.so
is the ABI (SONAME without `.1`: the plan links it at the image's libmpi_abi.so.1, and ld.so
finds a DT_NEEDED by file name); it dlopens libmpiwrapper.so from $MPI_ABI_WRAPPER_LIB,
which is built against one MPI's own mpi.h and linked to that MPI's libmpi (libmpi.so.12,
libmpich.so.12 or Open MPI's libmpi.so.40), and converts every handle.

Where the wrapper comes from: `--wrapper PREFIX`, else the module environment
($MPI_ABI_WRAPPER_LIB naming libmpiwrapper.so, $MPI_ABI_WRAPPER_ROOT), else the site's
Spack install (`spack -e environments/SITE location -i mpi-abi-wrapper`).
"""

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from climstack import pins
from climstack.bind import elf, loader
from climstack.errors import ClimstackError

FRONT = "libmpi_abi.so"  # the ABI, bound at the image's libmpi_abi.so.1
BACK = "libmpiwrapper.so"  # the half built against the host MPI
VARIABLE = "MPI_ABI_WRAPPER_LIB"  # where libmpi_abi dlopens the back from
ROOT_VARIABLE = "MPI_ABI_WRAPPER_ROOT"
PACKAGE = "mpi-abi-wrapper"
#: the MPI libraries a libmpiwrapper can be linked to, and the ABI each is
WRAPPED = {
    "libmpi.so.12": "the MPICH ABI",
    "libmpich.so.12": "the MPICH ABI",
    "libmpi.so.40": "Open MPI's ABI",
}
#: spellings of one ABI's library (Debian's MPICH calls libmpi.so.12 libmpich.so.12)
SAME = {"libmpi.so.12": "libmpi.so.12", "libmpich.so.12": "libmpi.so.12"}
FIX = (
    f"build it against this MPI, as the site environments do (`spack install {PACKAGE}` "
    "with the host MPI as Spack's mpi), then pass --wrapper PREFIX or load its module"
)


@dataclass(frozen=True)
class Wrapper:
    """One mpi_abi_wrapper install: its two libraries (paths in the view), where it was
    found, and the MPI library its libmpiwrapper is linked to."""

    prefix: str
    front: str
    back: str
    source: str
    wraps: str  # DT_NEEDED of libmpiwrapper: libmpi.so.12, libmpich.so.12, libmpi.so.40

    @property
    def abi(self) -> str:
        return WRAPPED[self.wraps]


def read(prefix: str, view: loader.View, source: str) -> Wrapper:
    """The wrapper installed at `prefix` (lib/ or lib64/); refused when a library is missing
    or libmpiwrapper is linked to no MPI library this module knows."""
    tried = []
    for sub in ("lib", "lib64"):
        front, back = (f"{prefix.rstrip('/')}/{sub}/{name}" for name in (FRONT, BACK))
        tried.append(f"{prefix.rstrip('/')}/{sub}")
        if view.resolve(front) and view.resolve(back):
            break
    else:
        raise ClimstackError(
            f"no mpi_abi_wrapper at {prefix} ({source}): {FRONT} and {BACK} not both in "
            + " or ".join(tried),
            fix=f"give the prefix `spack location -i {PACKAGE}` prints (it holds lib/{BACK})",
        )
    info = elf.read(view.resolve(back)[1])
    linked = [name for name in info.needed if name in WRAPPED]
    if len(linked) != 1:
        raise ClimstackError(
            f"{back} ({source}) is linked to {', '.join(linked) or 'no MPI library'} "
            f"({' '.join(info.needed)}): not a libmpiwrapper of one MPI ({', '.join(WRAPPED)})",
            fix=FIX,
        )
    return Wrapper(prefix, front, back, source, linked[0])


def find(view: loader.View, given: str | None, environ, site) -> Wrapper | None:
    """The wrapper `given` (--wrapper), else the module environment's, else the site's
    Spack install; None when there is none."""
    if given:
        return read(given, view, "--wrapper")
    if environ.get(VARIABLE):
        back = PurePosixPath(environ[VARIABLE])
        return read(str(back.parent.parent), view, f"${VARIABLE}")
    if environ.get(ROOT_VARIABLE):
        return read(environ[ROOT_VARIABLE], view, f"${ROOT_VARIABLE}")
    installed = spack_install(site) if site else ""
    return read(installed, view, f"the {site.name} environment's Spack") if installed else None


def spack_install(site) -> str:
    """The prefix of the site environment's installed wrapper ('' when the site has no
    environment here, Spack is not set up, or the wrapper is not installed)."""
    from climstack import spack as gateway  # Spack only on this last route

    env = pins.PROJECT_ROOT / "environments" / site.name
    if not (env / "spack.yaml").is_file() or not gateway.SPACK.exists():
        return ""
    found = gateway.Spack().run("location", "-i", PACKAGE, env=env, check=False, timeout=120)
    prefix = found.stdout.strip()
    return prefix if found.returncode == 0 and Path(prefix).is_dir() else ""


def same_abi(one: str, other: str) -> bool:
    """Are two MPI libraries (`libmpi.so.12`, `libmpich.so.12`, ...) of one ABI?"""
    return SAME.get(one, one) == SAME.get(other, other)


def matches(wrapper: Wrapper, host_library: str) -> bool:
    """Is the wrapper linked to the ABI of the host MPI's library (`libmpi.so.12`, ...)?"""
    return same_abi(wrapper.wraps, host_library)


def mismatch(wrapper: Wrapper, host_library: str, host: str) -> str:
    """Why a wrapper cannot run on a host MPI whose library is `host_library`."""
    return (
        f"{wrapper.back} ({wrapper.source}) is built against {wrapper.abi} ({wrapper.wraps}), "
        f"but the host MPI {host} is {WRAPPED.get(host_library, host_library)} "
        f"({host_library}): its handles and calls are another MPI's"
    )


def own_mpi_elsewhere(wrapper: Wrapper, host_mpi: str, view: loader.View) -> str:
    """Where libmpiwrapper loads its MPI library from when the host MPI's directory leads
    LD_LIBRARY_PATH (as the plan's links directory does in the container), if that is not
    the host MPI's file: a DT_RPATH (Spack's default linking) names the installation it was
    built against ahead of it. '' when it loads the host's."""
    directory = str(PurePosixPath(host_mpi).parent)
    closure = loader.closure(wrapper.back, view, [directory], stop={wrapper.wraps})
    found = closure.get(wrapper.wraps)
    if found is None or found.host.resolve() == view.resolve(host_mpi)[1].resolve():
        return ""
    return f"{found.host} (by its {found.how})"


def imports(info: elf.Elf) -> set[str]:
    """What libmpiwrapper needs from the MPI it is linked to: every import but the weak
    ones and the C library's (versioned GLIBC_*)."""
    return {
        s
        for s in info.imports - info.weak_imports
        if not info.import_versions.get(s, "").startswith("GLIBC_")
    }
