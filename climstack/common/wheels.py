"""PyPI wheels installed into prefixes of their own in the user cache (never into the
project's .venv): MPIs for the images and tests, the local site's host libfabric."""

import sys
from pathlib import Path

from climstack import pins
from climstack.common import atomic, process


def pip_install(requirement, prefix: Path) -> None:
    """`pip install --prefix`, not `--target`: wheels keep their libraries in the data
    scheme (prefix/lib), which `--target` silently drops."""
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
    process.run(
        [*command, "--prefix", prefix, requirement], f"pip install of {requirement}", timeout=900
    )


def installed(name: str, version: str) -> Path:
    """Prefix holding PyPI's `name` `version` installed (bin/, lib/), once, atomically."""
    final = pins.cache_dir() / "wheels" / f"{name}-{version}"
    return atomic.directory(final, lambda work: pip_install(f"{name}=={version}", work))
