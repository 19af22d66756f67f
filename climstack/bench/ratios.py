"""Paired ratios to native: repeat i of a mode against repeat i of native (the runs
alternate A B A B, so a pair shares the machine's state), their spread and their means."""

import math
import statistics


def paired_ratio(mode: dict[int, float], native: dict[int, float]):
    """(median, low, high) of mode/native over the repeats both have, or None."""
    ratios = [mode[r] / native[r] for r in sorted(mode.keys() & native.keys()) if native[r]]
    if not ratios:
        return None
    return statistics.median(ratios), min(ratios), max(ratios)


def noisy(ratio) -> bool:
    """The ratios' spread is wider than the effect their median claims."""
    median, low, high = ratio
    return len({low, high}) > 1 and (high - low) / 2 > abs(median - 1)


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))
