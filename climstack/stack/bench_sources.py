"""Offline routes to the sources of the local environment's benchmarks, the Spack-native
ones air-gapped centres use. Nothing fetched is committed to this repository.

- **git versions into the source mirror** (mpibench, netcdf-bench, benchio: our recipes pin
  a commit; osu-micro-benchmarks: site/offline requires a public git copy of the 7.4 release,
  because OSU publishes tarballs only on its own site). `spack mirror create` fills the
  site's source mirror; git's `url.<override>.insteadOf` maps each upstream URL to the one
  in CLIMSTACK_<NAME>_GIT, so the tarballs land where Spack looks for the upstream URL.
- **a develop tree** (netcdf-fortran: no archive with a recipe checksum exists here, Debian
  repacks it): Debian's source tree, unpacked once, declared by a `develop:` scope that
  site/local includes (CLIMSTACK_NETCDF_FORTRAN_TREE points at another tree).
- netcdf-c's archive comes from Debian byte-identical (climstack.stack.source_mirror).
"""

import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from climstack import pins
from climstack.common import atomic, cache, progress, stamp
from climstack.errors import ClimstackError
from climstack.spack import DEFAULT, Spack
from climstack.stack import source_mirror
from climstack.stack.debian_sources import DebianSources


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
)


@dataclass(frozen=True)
class DebianTree:
    """A Debian orig tarball unpacked as a `spack develop` tree."""

    spec: str
    source: str  # Debian source package
    version: str
    filename: str
    sha256: str
    suite: str
    variable: str  # environment variable naming another tree

    @property
    def package(self) -> str:
        return self.spec.split("@")[0]


NETCDF_FORTRAN = DebianTree(
    spec="netcdf-fortran@=4.5.4",
    source="netcdf-fortran",
    version="4.6.0+really4.5.4+ds-3",
    filename="netcdf-fortran_4.6.0+really4.5.4+ds.orig.tar.xz",
    sha256="3f1916a18e5f621327395d614880fe6d41c04fcf142c55ee2fb3c2d3d2240d4a",
    suite="trixie",
    variable="CLIMSTACK_NETCDF_FORTRAN_TREE",
)


def develop_scope() -> Path:
    """The scope site/local includes: `develop:` for the trees below."""
    return pins.cache_dir() / "local-sources"


def _unpacked_tree(tree: DebianTree) -> Path:
    final = pins.cache_dir() / "dev-sources" / f"{tree.package}-{tree.sha256[:12]}"

    def fill(work: Path):
        debian = DebianSources(suites=(tree.suite,))
        debian.update()
        with tempfile.TemporaryDirectory() as tmp:
            tarball = debian.download(
                tree.source, tree.version, tree.filename, tree.sha256, Path(tmp)
            )
            if source_mirror.sha256sum(tarball) != tree.sha256:
                raise ClimstackError(
                    f"Debian's {tree.filename} does not have sha256 {tree.sha256}",
                    fix="rerun bin/setup to download it again",
                )
            with tarfile.open(tarball) as archive:
                archive.extractall(work, filter="data")
        (top,) = [path for path in work.iterdir()]  # one top directory per orig tarball
        for path in top.iterdir():
            path.rename(work / path.name)
        top.rmdir()

    if final.is_dir():
        return final
    with progress.step(f"unpacking Debian's {tree.source} {tree.version} for `spack develop`"):
        return atomic.directory(final, fill)


def ensure_develop_trees() -> Path:
    """Unpack (once) and declare the develop trees; return the scope."""
    tree = NETCDF_FORTRAN
    explicit = os.environ.get(tree.variable)
    path = Path(explicit).resolve() if explicit else _unpacked_tree(tree)
    if not (path / "configure").is_file():
        raise ClimstackError(
            f"{path} (from {tree.variable or 'Debian'}) holds no configure script of "
            f"{tree.package}",
            fix=f"point {tree.variable} at an unpacked {tree.package} release tree",
        )
    develop = {"develop": {tree.package: {"spec": tree.spec, "path": str(path)}}}
    text = "# Written by climstack bin/setup; rerun it rather than editing.\n"
    atomic.write_text(develop_scope() / "develop.yaml", text + yaml.safe_dump(develop))
    return develop_scope()


def git_environ() -> dict:
    """git configuration (through the environment) mapping each upstream URL overridden
    by its CLIMSTACK_<NAME>_GIT to the override."""
    overrides = [(s.url, s.upstream) for s in GIT_SOURCES if s.url != s.upstream]
    env = {"GIT_CONFIG_COUNT": str(len(overrides)), "GIT_TERMINAL_PROMPT": "0"}
    for index, (url, upstream) in enumerate(overrides):
        if "://" not in url and Path(url).exists():
            url = Path(url).resolve().as_uri()
        env[f"GIT_CONFIG_KEY_{index}"] = f"url.{url}.insteadOf"
        env[f"GIT_CONFIG_VALUE_{index}"] = upstream
    return env


def fill_git(env_dir: Path, mirror_dir: Path, names=None, spack: Spack = DEFAULT) -> str:
    """`spack mirror create` of the git-versioned benchmarks (or those `names`) of env_dir
    into mirror_dir."""
    names = names or [source.package for source in GIT_SOURCES]
    env = {**os.environ, **git_environ()}
    try:
        result = spack.run(
            "mirror",
            "create",
            "-d",
            str(mirror_dir),
            *names,
            env=env_dir,
            environ=env,
        )
    except ClimstackError as err:
        variables = ", ".join(source.variable for source in GIT_SOURCES)
        raise ClimstackError(
            f"cannot fill {mirror_dir} from the benchmarks' git repositories: "
            f"{err.message.strip().splitlines()[-1]}",
            fix=f"set {variables} to reachable git mirrors or local clones",
        ) from err
    return result.stdout


def fill(env_dir: Path, mirror_dir: Path) -> None:
    """Every source of the environment Spack cannot download here, once per input."""
    inputs = stamp.digest(
        (env_dir / "spack.lock").read_text(), *(source.url for source in GIT_SOURCES)
    )

    def fill_mirror():
        with progress.step(f"filling the source mirror {mirror_dir}"):
            report = source_mirror.fill_from_debian(
                env_dir, mirror_dir, DebianSources(suites=("trixie",))
            )
            fill_git(env_dir, mirror_dir)
        elsewhere = (*(s.package for s in GIT_SOURCES), NETCDF_FORTRAN.package)
        for spec, outcome in sorted(report.items()):
            if "no Debian source" in outcome and not spec.startswith(elsewhere):
                print(f"source mirror: {spec}: {outcome}")

    cache.once(mirror_dir / f".filled-{env_dir.name}", inputs, fill_mirror)


def local_mirror() -> Path:
    """The source mirror of site/offline (`sources`: $user_cache_path/../source-mirror)."""
    return pins.spack_user_cache().parent / "source-mirror"
