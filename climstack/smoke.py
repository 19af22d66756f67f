"""The smoke slice: install xpmem-stub and mpi-probe in an environment and run the probe."""

import shutil
import subprocess
from pathlib import Path

from climstack import spack
from climstack.errors import ClimstackError

SLICE = ("xpmem-stub", "mpi-probe")


def install(env_dir: Path) -> Path:
    """Install the slice (the environment must be concretized); return mpi-probe's prefix."""
    spack.run("install", *SLICE, env=env_dir)
    return Path(spack.run("location", "-i", "mpi-probe", env=env_dir).stdout.strip())


def run_probe(prefix: Path, ranks: int = 2, launcher: str = "mpirun") -> str:
    """Run mpi-probe under the MPI launcher on PATH; return its output."""
    if not shutil.which(launcher):
        raise ClimstackError(f"no `{launcher}` on PATH", fix="install the site's MPI (bin/setup)")
    proc = subprocess.run([launcher, "-np", str(ranks), str(prefix / "bin" / "mpi-probe")],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ClimstackError(f"mpi-probe failed under {launcher}: {proc.stderr.strip()}")
    return proc.stdout


def register(commands) -> None:
    def run(args):
        from climstack import environments

        print(run_probe(install(environments.resolve(args.environment))), end="")

    sub = commands.add_parser("smoke", help="install xpmem-stub + mpi-probe, run it on 2 ranks")
    sub.add_argument("environment", nargs="?", default="local")
    sub.set_defaults(run=run)
