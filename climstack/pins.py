"""Pinned versions of Spack and its builtin package repository, and where they come from.

Every environment, container recipe and test uses these pins. Sources are git URLs;
air-gapped centres override them with environment variables (a local mirror or a path).
"""

import os
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class GitPin:
    name: str  # cache directory name prefix and human name
    url_variable: str  # environment variable that overrides the URL
    default_url: str
    tag: str  # the release, as Spack reports it and the cache and labels name it
    commit: str  # full sha the ref must resolve to
    ref: str = ""  # what git clones (a tag or branch); default: the tag

    @property
    def clone_ref(self) -> str:
        return self.ref or self.tag

    @property
    def url(self) -> str:
        return os.environ.get(self.url_variable) or self.default_url

    @property
    def cache_name(self) -> str:
        return f"{self.name}-{self.tag}"


SPACK = GitPin(
    name="spack",
    url_variable="CLIMSTACK_SPACK_GIT",
    default_url="https://github.com/spack/spack.git",
    # the 1.1.1 bug-fix release: its solver fixes take 20-40% off the container environments'
    # fresh concretization, with the same DAGs (benchmarks/concretize_times.py)
    tag="v1.1.1",
    ref="backports/1.1.1",
    commit="c6a799277cd0be72b3c0eef34c74328532090e23",
)
SPACK_VERSION = "1.1.1"

SPACK_PACKAGES = GitPin(
    name="spack-packages",
    url_variable="CLIMSTACK_SPACK_PACKAGES_GIT",
    default_url="https://github.com/spack/spack-packages.git",
    tag="v2026.06.0",  # package API v2.2, which Spack 1.1.1 reads (docs/sites.md)
    commit="d4f7c711a6a42f1c4d551c8fd10fce9a11340a81",
)


def cache_dir() -> Path:
    """User-level cache holding the clones, shared by every checkout of this project."""
    explicit = os.environ.get("CLIMSTACK_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "climstack"


def spack_root() -> Path:
    return cache_dir() / SPACK.cache_name


def builtin_repo_root() -> Path:
    return cache_dir() / SPACK_PACKAGES.cache_name / "repos" / "spack_repo" / "builtin"


def spack_user_cache() -> Path:
    """Spack's misc cache (the ~100 s repo index) lives here so fresh clones reuse it."""
    return cache_dir() / "spack-user-cache"


def local_externals() -> Path:
    """Scope of the build tools `spack external find` detected on this host (site/local)."""
    return cache_dir() / "local-externals"
