"""Reuse a concretization while everything it was made from is unchanged.

The key digests what `spack concretize --fresh` depends on: the merged solver configuration
and the user specs Spack reports for the environment (climstack.spack.scripts.concretize_inputs),
the content of every package repository in use (the builtin one by its pinned commit),
the pinned Spack, and the host's platform, OS and target. A lockfile concretized from the
same key is copied in instead of solving again; any change to a recipe, a scope or a spec
solves afresh. Entries live in the user cache (locks/<key>.lock), shared by every checkout
and by copies of an environment elsewhere (the tests' temporary environments).

An environment whose solve does not depend on the host (every package required to a target
and an OS, `host_compatible: false`: the Cray sites) is keyed without the host, and its
lockfile may be committed under environments/locks/<key>.lock (`climstack concretize
--save-locks`): a newcomer's machine copies it in instead of solving, and any changed input
makes another key, which is solved again.

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
#: the committed lockfiles of host-independent environments, by key
COMMITTED = pins.PROJECT_ROOT / "environments" / "locks"


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
        committed = COMMITTED / f"{digest}.lock"
        if reuse and committed.is_file():  # solved from the same inputs where it was committed
            shutil.copy2(committed, lockfile)
            return
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


def host_independent(config: dict) -> bool:
    """Does the solve leave the host out: every package required to a target and an OS,
    and targets the host cannot run allowed (the Cray sites' scopes)?"""
    required = ((config.get("packages") or {}).get("all") or {}).get("require") or []
    text = " ".join(map(str, required if isinstance(required, list) else [required]))
    targets = (config.get("concretizer") or {}).get("targets") or {}
    return "target=" in text and "os=" in text and targets.get("host_compatible") is False


def save(env_dir: Path, spack: Spack = DEFAULT) -> Path | None:
    """Commit the environment's lockfile under its key if its solve is host-independent
    (environments/locks/<key>.lock, a tracked file: a developer's deliberate step)."""
    reported = report(env_dir, spack)
    if not host_independent(reported["config"]):
        return None
    target = COMMITTED / f"{key(reported)}.lock"
    COMMITTED.mkdir(exist_ok=True)
    atomic.write_text(target, (env_dir / "spack.lock").read_text())
    return target


def key(reported: dict) -> str:
    """The key of an environment from what report() returns (without the host for a
    host-independent one)."""
    inputs = dict(reported)
    if host_independent(inputs["config"]):
        inputs.pop("host")
    builtin = str(pins.builtin_repo_root())
    repos = [
        pins.SPACK_PACKAGES.commit if root == builtin else stamp.tree(Path(root))
        for _, root in sorted(inputs.pop("repos").items())
    ]
    return stamp.digest(json.dumps(inputs, sort_keys=True), pins.SPACK.commit, *repos, length=32)
