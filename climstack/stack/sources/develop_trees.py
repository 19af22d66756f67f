"""A source Spack cannot fetch here as an archive with its recipe's checksum, as a `spack
develop` tree: netcdf-fortran (Debian repacks it, `+ds`), Debian's orig tarball unpacked
once and declared by a `develop:` scope that site/local includes
(CLIMSTACK_NETCDF_FORTRAN_TREE points at another tree). `bin/setup` makes it.

Spack builds a develop tree in place (configure, objects, libraries), so the unpacked
orig tarball stays pristine and is only copied: the local environment builds in a copy
of its own (`local_tree`), and each image gets a copy of the pristine tree. (An image once
copied the local environment's built-in tree and linked its stale objects, whose RPATH
named this host's paths.)"""

import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from climstack import pins
from climstack.common import atomic, progress
from climstack.errors import ClimstackError
from climstack.stack.sources import source_mirror
from climstack.stack.sources.debian_sources import DebianSources


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
    final = pins.cache_dir() / "dev-sources" / "orig" / f"{tree.package}-{tree.sha256[:12]}"

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


def source_tree(tree: DebianTree = NETCDF_FORTRAN) -> Path:
    """The tree: the one its variable names, else Debian's orig tarball unpacked once."""
    explicit = os.environ.get(tree.variable)
    path = Path(explicit).resolve() if explicit else _unpacked_tree(tree)
    if not (path / "configure").is_file():
        raise ClimstackError(
            f"{path} (from {tree.variable if explicit else 'Debian'}) holds no configure "
            f"script of {tree.package}",
            fix=f"point {tree.variable} at an unpacked {tree.package} release tree",
        )
    return path


def local_tree(tree: DebianTree = NETCDF_FORTRAN) -> Path:
    """The local environment's tree, where Spack builds: a copy of source_tree(), made
    once (a tree named by the variable is used as it is: the user's to keep)."""
    if os.environ.get(tree.variable):
        return source_tree(tree)
    pristine = source_tree(tree)
    final = pins.cache_dir() / "dev-sources" / "local" / pristine.name

    def fill(work: Path):
        shutil.copytree(pristine, work, symlinks=True, dirs_exist_ok=True)

    return atomic.directory(final, fill)


def refresh_for(env_dir: Path, tree: DebianTree = NETCDF_FORTRAN) -> None:
    """Make the local tree afresh from the pristine one when env_dir's lock builds another
    spec in it (a dependency changed): Spack builds a develop tree incrementally, so the
    objects and libraries of the last build, linked against the old dependencies (their
    RPATH naming the old prefixes), would be installed again."""
    lock = env_dir / "spack.lock"
    if os.environ.get(tree.variable) or not lock.is_file():
        return
    nodes = json.loads(lock.read_text())["concrete_specs"]
    wanted = " ".join(sorted(h for h, node in nodes.items() if node["name"] == tree.package))
    local = local_tree(tree)
    built_for = local.with_name(f".{local.name}.spec")
    if not wanted or (built_for.is_file() and built_for.read_text() == wanted):
        return
    with progress.step(f"copying {local} afresh for {tree.package}/{wanted[:7]}"):
        shutil.rmtree(local)
        local_tree(tree)
    atomic.write_text(built_for, wanted)


def develop_section(path: Path, tree: DebianTree = NETCDF_FORTRAN) -> dict:
    """An environment's `develop:` entry building `tree` from `path`."""
    return {tree.package: {"spec": tree.spec, "path": str(path)}}


def ensure_develop_trees() -> Path:
    """Unpack (once) and declare the develop trees; return the scope."""
    develop = {"develop": develop_section(local_tree())}
    text = "# Written by climstack bin/setup; rerun it rather than editing.\n"
    atomic.write_text(develop_scope() / "develop.yaml", text + yaml.safe_dump(develop))
    return develop_scope()
