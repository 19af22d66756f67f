"""The smoke slice: install the stack's `probes` (environments/stack.yaml: xpmem-stub,
mpi-probe) in an environment and run mpi-probe under the site's MPI launcher."""

import shutil
from pathlib import Path

from climstack import spack
from climstack.common import process, progress
from climstack.errors import ClimstackError
from climstack.stack import environments


def install(env_dir: Path) -> Path:
    """Install the probes (the environment must be concretized); return mpi-probe's prefix."""
    probes = environments.definition("probes")
    with progress.step(f"installing {' '.join(probes)} in {environments.label(env_dir)}"):
        spack.stream("install", *probes, env=env_dir)
    return Path(spack.run("location", "-i", "mpi-probe", env=env_dir).stdout.strip())


def run_probe(prefix: Path, ranks: int = 2, launcher: str = "mpirun") -> str:
    """Run mpi-probe under the MPI launcher on PATH; return its output."""
    if not shutil.which(launcher):
        raise ClimstackError(f"no `{launcher}` on PATH", fix="install the site's MPI (bin/setup)")
    return process.run(
        [launcher, "-np", str(ranks), prefix / "bin" / "mpi-probe"],
        f"mpi-probe under {launcher}",
        timeout=120,
    ).stdout
