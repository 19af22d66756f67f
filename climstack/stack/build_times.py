"""The package builds of a run, slowest first, from the record Spack writes into each prefix
it installs (`<prefix>/.spack/install_times.json`: `name`, `cache` (installed from a
buildcache), `total` and `phases` in seconds). Builds that ran side by side overlap: their
seconds are wall time each, not a share of the run.

Standard library only: `make local`'s closing table reads it before the .venv may exist.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

RECORD = Path(".spack") / "install_times.json"


@dataclass(frozen=True)
class Build:
    package: str
    where: str  # the install tree it went into, as a path under the searched root
    seconds: float


def _where(prefix: Path, root: Path) -> str:
    """The first two directories of the prefix under `root` (images/container-archer2,
    envs/local ...): enough to tell the image's build from the native one."""
    return "/".join(prefix.relative_to(root).parts[:2])


def builds_since(root: Path, since: float) -> list[Build]:
    """The source builds installed under `root` whose record is no older than `since` (a
    time.time()), slowest first; a copy of a prefix (an image's twin) counts once, by the
    record's Spack hash, under the first tree in name order."""
    found, seen = [], set()
    for top, dirs, _ in os.walk(root):
        dirs.sort()  # in name order: an image before its tests' copies (tests-<image>-...)
        here = Path(top)
        record = here / RECORD
        if ".spack" not in dirs or not record.is_file():
            continue
        dirs.clear()  # an install prefix: no other lies below it
        try:
            if record.stat().st_mtime < since:
                continue
            data = json.loads(record.read_text())
            if data.get("cache") or data.get("hash", here) in seen:
                continue
            seen.add(data.get("hash", here))
            found.append(Build(data["name"], _where(here, root), float(data["total"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a record being written, or not Spack's: not a build of this run
    return sorted(found, key=lambda build: -build.seconds)


def table(builds: list[Build], count: int = 10) -> str:
    """The `count` slowest builds, one line each, and how many there were in all."""
    shown = builds[:count]
    if not shown:
        return "package builds: none (every package came from a cache)"
    width = max(len(b.package) for b in shown)
    where = max(len(b.where) for b in shown)
    lines = [f"{'slowest package builds':<{width + where + 2}}  {'wall s':>8}"]
    lines += [f"{b.package:<{width}}  {b.where:<{where}}  {b.seconds:8.0f}" for b in shown]
    total = sum(b.seconds for b in builds)
    lines.append(f"{len(builds)} packages built, {total:.0f} s in all (side by side: overlapping)")
    return "\n".join(lines)
