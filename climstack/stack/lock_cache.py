"""Reuse a concretization while everything it was made from is unchanged.

The key digests what `spack concretize --fresh` depends on: the merged solver configuration
and the user specs Spack reports for the environment (climstack.spack.scripts.concretize_inputs),
the content of every package repository in use (the builtin one by its pinned commit),
the pinned Spack, and the host's platform, OS and target. A lockfile concretized from the
same key is copied in instead of solving again; any change to a recipe, a scope or a spec
solves afresh. Entries live in the user cache (locks/<key>.lock), shared by every checkout
and by copies of an environment elsewhere (the tests' temporary environments).

Spack's own concretization cache (concretizer:concretization_cache) is not used: it still
runs the ~10 s problem setup, and its key leaves recipe changes out (spack/spack#51553).
"""

import json
import os
import shutil
from pathlib import Path

from climstack import pins
from climstack.common import atomic, cache, progress, stamp
from climstack.spack import DEFAULT, Spack

#: the sections Spack loads (and so validates) before reporting the inputs
SECTIONS = "concretizer config definitions include mirrors modules packages repos".split()


def report(env_dir: Path, spack: Spack = DEFAULT) -> dict:
    """What the environment's concretization depends on, as Spack reports it
    (`spack -e ENV python concretize_inputs.py`); ScriptFailed on invalid configuration."""
    return spack.python("concretize_inputs.py", ",".join(SECTIONS), env=env_dir)


def concretize(
    env_dir: Path, spack: Spack = DEFAULT, reuse: bool = True, reported: dict | None = None
) -> bool:
    """`spack concretize --fresh --force`, or the lockfile of an earlier concretization with
    the same key; returns whether it was reused. `reported`: report()'s result, if known."""
    digest = key(reported or report(env_dir, spack))
    solved, solving = entry(digest), []

    def fill(lockfile: Path):
        with progress.step(f"concretizing {env_dir} --fresh"):
            spack.run("concretize", "--fresh", "--force", env=env_dir)
        shutil.copy2(env_dir / "spack.lock", lockfile)
        solving.append(lockfile)

    solved.build(fill, force=not reuse)  # the same inputs are solved once, under its lock
    if solving:
        return False
    atomic.write_text(env_dir / "spack.lock", solved.path.read_text())
    os.utime(solved.path)  # last use, for whoever prunes the cache
    progress.note(f"{env_dir}: inputs unchanged, concretization reused ({digest[:12]})")
    return True


def entry(digest: str) -> cache.Entry:
    """The lockfile solved from the inputs `digest` names (locks/<digest>.lock)."""
    return cache.Entry(store() / f"{digest}.lock", digest)


def store() -> Path:
    return pins.cache_dir() / "locks"


def key(reported: dict) -> str:
    """The key of an environment from what report() returns."""
    inputs = dict(reported)
    builtin = str(pins.builtin_repo_root())
    repos = [
        pins.SPACK_PACKAGES.commit if root == builtin else stamp.tree(Path(root))
        for _, root in sorted(inputs.pop("repos").items())
    ]
    return stamp.digest(json.dumps(inputs, sort_keys=True), pins.SPACK.commit, *repos, length=32)
