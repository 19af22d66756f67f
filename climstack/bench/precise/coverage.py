"""What the stopping rule does to the method's error rates, measured by resampling: a
cell's per-repeat log ratios, centred (no effect: the A/A control's truth) or shifted by a
known effect, drawn with replacement repeat after repeat; the rule applied as the run
applies it; the share of trials whose final interval claims an effect (excludes 1) or
says "within 2%". Compared with the same data at a fixed number of repeats (the cap). Over a
page's A/A cells, those rates bound how many may claim an effect (`most_claims`)."""

import math

import numpy as np

from climstack.bench.precise.stopping import Rule
from climstack.bench.report import stats

TRIALS = 4000


def _intervals(draws: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Per trial and n (2..cap): the interval's (low, high) in logs, as stats.estimate."""
    from scipy.stats import t as student_t  # here: scipy takes ~1 CPU-s to import

    n = np.arange(1, draws.shape[1] + 1)
    mean = np.cumsum(draws, axis=1) / n
    square = np.cumsum(draws**2, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.maximum(square - n * mean**2, 0) / (n - 1))
        half = student_t.ppf((1 + stats.CONFIDENCE) / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    half = np.maximum(half, floor)
    return mean - half, mean + half


def rates(logs: list[float], rule: Rule, effect: float = 1.0, floor: float = 0.0,
          seed: int = 0) -> dict[str, float]:  # fmt: skip
    """{'claims', 'claims_fixed', 'within', 'within_fixed', 'mean_repeats'}: the shares of
    TRIALS in which the rule (and a fixed `rule.cap` repeats) ends on an interval that
    excludes 1 (a claimed effect) or lies within 1 ± stats.WITHIN, when the true ratio is
    `effect` and the noise is `logs`' (centred)."""
    centred = np.asarray(logs, float) - np.mean(logs) + math.log(effect)
    rng = np.random.default_rng(seed)
    draws = rng.choice(centred, size=(TRIALS, rule.cap), replace=True)
    low, high = _intervals(draws, floor)
    width = np.exp(high - low) - 1
    n = np.arange(1, rule.cap + 1)
    ok = (n >= rule.min_repeats) & (width < rule.target)
    ok[:, -1] = True  # the cap
    stop = ok.argmax(axis=1)
    rows = np.arange(TRIALS)
    ends = {"": (low[rows, stop], high[rows, stop]), "_fixed": (low[:, -1], high[:, -1])}
    band = math.log1p(stats.WITHIN), math.log1p(-stats.WITHIN)
    found = {"mean_repeats": float(np.mean(stop + 1))}
    for suffix, (lo, hi) in ends.items():
        found[f"claims{suffix}"] = float(np.mean((lo > 0) | (hi < 0)))
        found[f"within{suffix}"] = float(np.mean((lo >= band[1]) & (hi <= band[0])))
    return found


def most_claims(rates: list[float], level: float = stats.CONFIDENCE) -> int:
    """The A/A bound: the fewest claims k that cells claiming an effect with chances `rates`
    (each cell's resampled rate, no effect there) stay within with probability `level`,
    from the distribution of their count (Poisson binomial)."""
    chances = np.array([1.0])  # of 0, 1, 2, ... claims
    for p in rates:
        chances = np.append(chances * (1 - p), 0) + np.append(0, chances * p)
    return int(np.searchsorted(np.cumsum(chances), level - 1e-12))
