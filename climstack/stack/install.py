"""`climstack install`'s library code: fill the offline source mirror and install a whole
environment (the stack, its benchmarks and the model), what `bench local` runs natively on."""

from pathlib import Path

from climstack import spack
from climstack.common import progress
from climstack.stack import environments
from climstack.stack.sources import bench_sources, develop_trees, git_sources


def install(env_dir: Path) -> dict[str, Path]:
    """Fill the source mirror, install the whole environment; name -> prefix."""
    bench_sources.fill(env_dir, git_sources.local_mirror())
    develop_trees.refresh_for(env_dir)
    with progress.step(f"installing the whole {environments.label(env_dir)} environment"):
        spack.stream("install", "-j", "2", env=env_dir)
    return installed(env_dir)


def installed(env_dir: Path) -> dict[str, Path]:
    """What the environment has installed: name -> prefix."""
    found = spack.run("find", "--format", "{name} {prefix}", env=env_dir).stdout.split("\n")
    return {name: Path(prefix) for name, prefix in (line.split() for line in found if line)}
