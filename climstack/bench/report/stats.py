"""How a mode is compared with native, one way everywhere (the report's headline and
details, its plot's band, `make bench`, the docs):

- pairs: repeat i of the mode with repeat i of native, within one batch of runs (one site,
  host and job), whose runs were interleaved in a rotated order;
- per repeat, the time ratio mode/native (for rates and bandwidths native/mode: above 1 is
  always slower), over sizes their geometric mean;
- over repeats, the geometric mean of those ratios and its 95% confidence interval: a
  Student t-interval of the mean log ratio (n - 1 degrees of freedom), never narrower
  than the outputs' printed resolution allows (Ratio.bound: two latencies printed as 0.21
  are anything from 0.205 to 0.215, so their ratio anything from 0.95 to 1.05);
- the verdict from the interval alone: `within 2%` only when it lies inside 1 +- WITHIN,
  `N% slower`/`faster` only when it excludes 1, else `inconclusive (n repeats)`.
"""

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

WITHIN = 0.02  # the band the verdicts, the plot and the docs call "within 2%"
CONFIDENCE = 0.95
METHOD = f"{CONFIDENCE:.0%} t-interval of the geometric mean of the paired ratios over repeats"


@dataclass(frozen=True)
class Estimate:
    ratio: float  # geometric mean of the per-repeat ratios
    low: float | None  # the interval; None with one repeat
    high: float | None
    repeats: int

    @property
    def verdict(self) -> str:
        return verdict(self)


def geomean(values) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


@dataclass(frozen=True)
class Ratio:
    value: float
    bound: float = 0.0  # how far rounding its outputs to their printed step moves log(value)


def rounding(value: float, step: float) -> float:
    """How far the log of a value printed to `step` can be from the log of what was
    measured (half a step away); 0 for an exact value (no step known)."""
    share = step / (2 * value) if step else 0.0
    return -math.log1p(-share) if share < 1 else math.inf


def paired(mode: dict, native: dict, rate: bool = False) -> dict[int, Ratio]:
    """repeat -> the time Ratio mode/native (native/mode for a rate) of the repeats both
    have with positive values; `mode`, `native`: repeat -> a record (`value`, its printed
    `resolution`)."""
    both = mode.keys() & native.keys()
    both = sorted(r for r in both if mode[r].value > 0 and native[r].value > 0)
    return {
        r: Ratio(
            native[r].value / mode[r].value if rate else mode[r].value / native[r].value,
            rounding(mode[r].value, mode[r].resolution)
            + rounding(native[r].value, native[r].resolution),
        )
        for r in both
    }


def combined(ratios: list[Ratio]) -> Ratio:
    """The geometric mean of `ratios` (one repeat's, over sizes), and its rounding bound."""
    return Ratio(geomean(r.value for r in ratios), statistics.fmean(r.bound for r in ratios))


def estimate(ratios: Iterable[float | Ratio]) -> Estimate | None:
    """The geometric mean of `ratios` (one per repeat) and its confidence interval, at
    least as wide as their rounding bounds (their mean: how far rounding can move the mean
    log ratio)."""
    ratios = [r if isinstance(r, Ratio) else Ratio(r) for r in ratios]
    if not ratios:
        return None
    logs = [math.log(r.value) for r in ratios]
    centre = statistics.fmean(logs)
    if len(logs) < 2:
        return Estimate(math.exp(centre), None, None, 1)
    from scipy.stats import t as student_t  # here: scipy takes ~1 CPU-s to import

    half = student_t.ppf((1 + CONFIDENCE) / 2, len(logs) - 1) * statistics.stdev(logs)
    half = max(half / math.sqrt(len(logs)), statistics.fmean(r.bound for r in ratios))
    return Estimate(math.exp(centre), math.exp(centre - half), math.exp(centre + half), len(logs))


def _effect(ratio: float) -> str:
    if ratio >= 1:
        return f"{(ratio - 1) * 100:.0f}% slower" if ratio < 1.5 else f"{ratio:.1f}x slower"
    return (
        f"{(1 / ratio - 1) * 100:.0f}% faster" if ratio > 1 / 1.5 else f"{1 / ratio:.1f}x faster"
    )


def verdict(e: Estimate) -> str:
    if e.low is None:
        return f"inconclusive ({e.repeats} repeat{'s' * (e.repeats != 1)})"
    if 1 - WITHIN <= e.low and e.high <= 1 + WITHIN:
        return f"within {WITHIN:.0%}"
    if e.low > 1 or e.high < 1:
        return _effect(e.ratio)
    return f"inconclusive ({e.repeats} repeats)"


def _number(x: float) -> str:
    return f"{x:.3f}" if x < 100 else f"{x:.3g}"


def interval_text(e: Estimate) -> str:
    """'1.012 [0.998-1.026], n=3' (one repeat: '1.012, n=1')."""
    if e.low is None:
        return f"{_number(e.ratio)}, n={e.repeats}"
    return f"{_number(e.ratio)} [{_number(e.low)}-{_number(e.high)}], n={e.repeats}"


def opposite(per_size: dict) -> str:
    """'' or a note naming the sizes whose intervals say slower and those that say faster:
    effects a mean over sizes would hide."""
    slower = [s for s, e in per_size.items() if e.low is not None and e.low > 1]
    faster = [s for s, e in per_size.items() if e.high is not None and e.high < 1]
    if not (slower and faster):
        return ""
    return f"opposite effects: slower at {_sizes(slower)}, faster at {_sizes(faster)}"


def _sizes(sizes) -> str:
    shown = [("-" if s is None else f"{s} B") for s in sorted(sizes, key=lambda s: s or 0)]
    return ", ".join(shown[:3]) + (f" (+{len(shown) - 3})" if len(shown) > 3 else "")
