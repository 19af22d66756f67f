"""The git repositories of the offline routes (climstack.stack.sources.bench_sources): each
package's upstream URL and its CLIMSTACK_<NAME>_GIT override, the commits assembled into
archives, the GitHub patches and release tarballs remade from them, and the source mirror
they all go to. Declarations only: climstack.stack.sources.git_archives makes the archives."""

import os
from dataclasses import dataclass
from pathlib import Path

from climstack import pins


@dataclass(frozen=True)
class GitSource:
    package: str
    upstream: str  # the recipe's (or site/offline's package_attributes) git URL

    @property
    def variable(self) -> str:
        return "CLIMSTACK_" + self.package.upper().replace("-", "_") + "_GIT"

    @property
    def url(self) -> str:
        return os.environ.get(self.variable) or self.upstream


GIT_SOURCES = (
    GitSource("mpibench", "https://github.com/LLNL/mpiBench.git"),
    GitSource("netcdf-bench", "https://github.com/joobog/netcdf-bench.git"),
    GitSource("benchio", "https://github.com/EPCCed/benchio.git"),
    GitSource(
        "osu-micro-benchmarks", "https://github.com/sherrywong1220/osu-micro-benchmarks-7.4.git"
    ),
    GitSource("mom6", "https://github.com/NOAA-GFDL/MOM6.git"),
    GitSource("fms", "https://github.com/NOAA-GFDL/FMS.git"),
    GitSource("benchio-adios2", "https://github.com/davidhenty/benchio.git"),
    GitSource("adios2", "https://github.com/ornladios/ADIOS2.git"),
    GitSource("mpif", "https://github.com/eschnett/mpif.git"),
    GitSource("mpi-abi-wrapper", "https://github.com/eschnett/mpi_abi_wrapper.git"),
)
#: repositories of packages that are not git versions, from which only a recipe's archive
#: (GIT_RELEASES) or patches (GIT_PATCHES) are remade
ARCHIVE_SOURCES = (
    GitSource("compiler-wrapper", "https://github.com/spack/compiler-wrapper.git"),
    GitSource("netcdf-c", "https://github.com/Unidata/netcdf-c.git"),
)
#: git versions whose archive is assembled (`git archive`, submodules included) rather
#: than cloned in full by `spack mirror create`: MOM6's recipe pin, the FMS 2023.03
#: commit site/offline requires and mpi_abi_wrapper's recipe pin (the fetched copy lacks
#: one blob, doc/mpi50-report.pdf, which its build never reads: a checkout fails)
ASSEMBLED = {
    "mom6": "df2cd1265006eb2e98cd9471a8f77c6d8a1c1135",
    "fms": "527a42f3ff36d75aac68b65757b35f73a74146bb",
    "mpi-abi-wrapper": "39ee1a3cc33edc82611ec22e2efe17868908fc9a",
}
#: the I/O layers' sources (environments/stack.yaml `io_layers`), which only the Cray
#: sites' environments and the image hold
IO_LAYERS = {"adios2", "benchio-adios2"}
#: repositories cloned as submodules of a git version above (MOM6's pkg/), by their name:
#: not packages, only their URLs are overridden
SUBMODULE_SOURCES = (
    GitSource("cvmix-src", "https://github.com/mom-ocean/CVMix-src.git"),
    GitSource("gsw-fortran", "https://github.com/mom-ocean/GSW-Fortran.git"),
)


@dataclass(frozen=True)
class GitPatch:
    """A recipe's patch downloaded from GitHub's `<commit>.patch?full_index=1`, made from
    the package's git repository instead, and checked against the recipe's sha256."""

    package: str  # whose GitSource has the commit
    commit: str
    sha256: str

    def mirror_path(self, mirror_dir: Path) -> Path:
        """Where Spack looks in a source mirror for a patch of this sha256 (its
        `_source-cache/archive/<2>/<sha256>`; a patch is not expanded, so no extension)."""
        return mirror_dir / "_source-cache" / "archive" / self.sha256[:2] / self.sha256


GIT_PATCHES = (
    # netcdf-c@:4.9: CVE-2025-14933 (netcdf-c PR 3153), since spack-packages 2026
    GitPatch(
        "netcdf-c",
        "0e0cb290673fa5a8056df603a95d6bdc7865e9c4",
        "5adacbeb7021ba59e6cdb23bb0095c720b9da925b276418c66d5eb9c8ddb0d56",
    ),
    # fms@2023.03: "Update CMakeLists.txt - append extra flags for gnu 10+ with mpich"
    GitPatch(
        "fms",
        "c9bba516ba1115d4a7660fba92f9d67cf3fd32ad",
        "07d5b68838bba61ee547bd4cd7c12d81228c91a80a966b8693694fa236d0ac30",
    ),
    # adios2@2.8:2.10: "Fix issue with GCC 7" (ADIOS2 PR 4591)
    GitPatch(
        "adios2",
        "b7a5957a15e5458f6e3650a01a88d73950f6c161",
        "d854008ab27d6ebfa66fffb78126b17713cda3234ed19bf331f85a720e599a32",
    ),
    # adios2@2.8: (ADIOS2 PR 4578)
    GitPatch(
        "adios2",
        "e7e8785f428597c02a010b428d54bf159b051031",
        "5b56f4beb5f0580ee7b8f5240048676827cc9fb9760ea742ab237dc1a0b94f91",
    ),
)


@dataclass(frozen=True)
class GitRelease:
    """A release the recipe downloads as GitHub's archive of its tag (or a release asset
    made the same way), remade from the package's git repository: `git archive` of the tag
    gzipped by `gzip -n` is that archive byte for byte, so the recipe's version and sha256
    serve unchanged."""

    package: str  # whose GitSource has the tag
    version: str
    tag: str
    prefix: str  # the archive's top directory
    url_tail: str = ""  # how the recipe's URL ends, if not as GitHub's archive: /<tag>.tar.gz
    sha256: str = ""  # the recipe's, where it is placed before any environment is solved

    def serves(self, url: str) -> bool:
        return url.endswith(self.url_tail or f"/{self.tag}.tar.gz")


#: the wrapper around the compilers that every Spack build runs: builtin's recipe downloads
#: it as a GitHub release asset since spack-packages 2026 (bin/setup places it)
COMPILER_WRAPPER = GitRelease(
    "compiler-wrapper",
    "1.1.0",
    "v1.1.0",
    "compiler-wrapper-1.1.0/",
    url_tail="/v1.1.0/compiler-wrapper-1.1.0.tar.gz",
    sha256="a07b35081d14b0729090bc1e5790a5dda2d5b997e064c62da39a1224ee249b2a",
)
GIT_RELEASES = (GitRelease("adios2", "2.10.2", "v2.10.2", "ADIOS2-2.10.2/"), COMPILER_WRAPPER)


def source_of(package: str) -> GitSource:
    """The git repository of a package of GIT_SOURCES or ARCHIVE_SOURCES."""
    return next(s for s in (*GIT_SOURCES, *ARCHIVE_SOURCES) if s.package == package)


def _git_url(url: str) -> str:
    """A local clone's path as a file:// URL; anything else as given."""
    return Path(url).resolve().as_uri() if "://" not in url and Path(url).exists() else url


def git_environ() -> dict:
    """git configuration (through the environment) mapping each upstream URL overridden
    by its CLIMSTACK_<NAME>_GIT to the override."""
    sources = (*GIT_SOURCES, *ARCHIVE_SOURCES, *SUBMODULE_SOURCES)
    overrides = [(s.url, s.upstream) for s in sources if s.url != s.upstream]
    env = {"GIT_CONFIG_COUNT": str(len(overrides)), "GIT_TERMINAL_PROMPT": "0"}
    for index, (url, upstream) in enumerate(overrides):
        url = _git_url(url)
        env[f"GIT_CONFIG_KEY_{index}"] = f"url.{url}.insteadOf"
        env[f"GIT_CONFIG_VALUE_{index}"] = upstream
    return env


def local_mirror() -> Path:
    """The source mirror of site/offline (`sources`: $user_cache_path/../source-mirror)."""
    return pins.spack_user_cache().parent / "source-mirror"
