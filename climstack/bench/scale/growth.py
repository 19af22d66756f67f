"""What each figure of `bench scale` costs per added rank: a straight line fitted to every run
of a mode (figure = per launch + per rank x ranks; least squares, the slope's 95 % interval
from Student's t on the runs' scatter), and from it the start-up load on a centre's Lustre
metadata server at 1,000 and 10,000 ranks, with the assumptions stated where it is shown."""

import math
from dataclasses import dataclass

from scipy import stats

#: the figures fitted: name -> (the run record's key, its unit)
FIGURES = {
    "start-up": ("wall_s", "s"),
    "slowest MPI_Init": ("init_max_ms", "ms"),
    "MOM6 to its main loop": ("to_main_loop_s", "s"),
    "memory (PSS)": ("pss_mib", "MiB"),
    "processes": ("processes", ""),
    "SIF mounts": ("image_mounts", ""),
    "metadata calls": ("calls_all", ""),
    "on the shared file system": ("calls_shared", ""),
}
#: where a mode's calls land on a centre's shared (Lustre) file system, what each mode is
#: charged in the projection: natively the ranks' look-ups in the install tree; a SIF's
#: look-ups inside it are squashfuse's reads of the SIF's data (object servers, then the page
#: cache), so only the SIF's own opens and stats; a directory image (Charliecloud, podman's
#: --rootfs) on the shared file system, as on a diskless Cray node, every look-up in it
SHARED = {
    "native": ("install tree",),
    "apptainer": ("image file",),
    "apptainer-sharens": ("image file",),
    "charliecloud": ("image", "image file"),
    "charliecloud-joined": ("image", "image file"),
    "podman": ("image", "image file"),
}
RANKS_PER_NODE = 128  # ARCHER2's and Gaea C5's nodes: 2 x 64 cores
AT_SCALE = (1_000, 10_000)
#: a published metadata rate of one Lustre metadata server (one MDT): mdtest file stat
MDS_RATE = 400_000
MDS_SOURCE = (
    'Dell EMC, "Dell HPC Lustre Storage solution with Intel Enterprise Edition for Lustre" '
    '(Lustre 2.5, one active MDS and one MDT, mdtest 1.9.3): file stat "more than 400K OPS '
    'with 240 concurrent threads"; create "almost 15K OPS". Newer Lustre on the same '
    "design: 500K-544K stat/s (Lustre 2.7)"
)


@dataclass(frozen=True)
class Line:
    per_launch: float
    per_rank: float
    low: float  # the per-rank slope's 95 % interval
    high: float
    runs: int

    def at(self, ranks: float) -> float:
        return self.per_launch + self.per_rank * ranks


def fit(points: list[tuple[int, float]]) -> Line | None:
    """The line through (ranks, figure) points; None with fewer than three or one rank
    count."""
    points = [(r, v) for r, v in points if v is not None]
    if len(points) < 3 or len({r for r, _ in points}) < 2:
        return None
    ranks, values = zip(*points)
    line = stats.linregress(ranks, values)
    spread = stats.t.ppf(0.975, len(points) - 2) * line.stderr
    spread = 0.0 if math.isnan(spread) else spread
    return Line(line.intercept, line.slope, line.slope - spread, line.slope + spread, len(points))


def shared_calls(mode: str, calls: dict) -> int:
    return sum(calls.get(category, 0) for category in SHARED[mode])


def load_at(line: Line, ranks: int) -> tuple[float, float]:
    """(calls, seconds of one metadata server) for a job of `ranks` ranks on full nodes of
    RANKS_PER_NODE: each node's launch costs its per-launch part, each rank its slope."""
    calls = max(0.0, line.per_launch * ranks / RANKS_PER_NODE + line.per_rank * ranks)
    return calls, calls / MDS_RATE
