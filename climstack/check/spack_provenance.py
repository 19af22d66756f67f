"""The MPI a program of an image was built against, as Spack recorded it: each install
prefix keeps its spec (`<prefix>/.spack/spec.json`), whose nodes name the MPI it linked
(an external one too: Debian's MPICH at /usr). verify reads it where the image holds no MPI
library of its own, as a buildcache image that runs on the host's MPI alone (`buildcache
push --base-image`): its program's MPICH base is then still known, and compared."""

import json
from pathlib import Path, PurePosixPath

from climstack.cray import mpich_base
from climstack.image import image_check

#: how far above the program its prefix may be (bin/, libexec/osu-micro-benchmarks/mpi/pt2pt/)
DEPTH = 6


def built_against(tree: Path, executable: str) -> tuple[str, str] | None:
    """(the MPI as Spack names it, its MPICH base) from the spec of the install prefix that
    holds `executable` (a path in the image `tree`, symlinks followed there); None without
    a spec, or for an MPI of no MPICH base."""
    real = image_check.resolve_in(tree, PurePosixPath(executable))
    for prefix in list(real.parents)[:DEPTH]:
        spec = prefix / ".spack" / "spec.json"
        if spec.is_file():
            return _mpi(json.loads(spec.read_text()))
    return None


def _mpi(spec: dict) -> tuple[str, str] | None:
    for node in spec.get("spec", {}).get("nodes", []):
        name, version = node.get("name"), str(node.get("version", ""))
        if name == "mpich":
            return f"mpich@{version} (the program's Spack spec)", version
        if name == "cray-mpich":
            return (
                f"cray-mpich@{version} (the program's Spack spec)",
                mpich_base.base_of(version)[0],
            )
    return None
