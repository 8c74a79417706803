"""Statistics: summaries, outliers, confidence intervals, comparisons.

Pure functions over lists of floats. The distributions and the tests are
scipy's (``scipy.stats``, imported on first use, so that a command that
compares nothing does not pay for it); what scipy has no function for is
written here, with its source.

References
----------
* Student-t interval for a mean: x̄ ± t(0.975, n−1)·s/√n (``scipy.stats.t``).
* Modified Z-score Mᵢ = 0.6745·(xᵢ − x̃)/MAD, outlier when |Mᵢ| > 3.5
  (Iglewicz & Hoaglin, *How to Detect and Handle Outliers*, 1993).
* Welch's t-test (``scipy.stats.ttest_ind``, ``equal_var=False``): with one
  side constant its Welch–Satterthwaite degrees of freedom become the other
  side's n − 1 (a pooled n₁ + n₂ − 2 would be anti-conservative). Both sides
  constant, or fewer than two samples a side: no test (p = 1), where scipy
  gives t = ±∞ and p = 0 for two constants apart, which would call two
  samples a side significant.
* Mann–Whitney U (``scipy.stats.mannwhitneyu``, two-sided): the exact
  permutation distribution (Mann & Whitney, 1947) without ties and with at
  most 20 samples a side; otherwise the normal approximation with tie and
  continuity corrections, its p clipped to 1.
* Ratio of medians: percentile bootstrap (``scipy.stats.bootstrap``;
  Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13),
  2000 resamples of each side, seeded, so the same samples always give the
  same interval.

One sample set describes a result: its median (the headline), its
interval and its overhead are all computed from every sample. Outliers
(modified Z-score) are flagged for people to see, never dropped.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache

MAD_THRESHOLD = 3.5
ALPHA = 0.05
# rule 14: acceleration off is a real switch from a 20 % slowdown on (the cipher table requires
# it, significantly; a stack's twin that slow by its medians alone is undecided, not missed)
MIN_SLOWDOWN = 1.2
BOOTSTRAP = 2000
HOST_DRIFT = 0.10     # the host's CPU speed moved more than this between a result's samples
# a quiet host's memory copies vary by well under this (CV, runner.core.quiet.memory_noise)
STEADY_MEMORY = 0.02
# Mann–Whitney's exact distribution up to this many samples a side, without ties
EXACT_UP_TO = 20


def _scipy():
    """``scipy.stats``, imported when first needed (about a second, cold)."""
    import scipy.stats
    return scipy.stats


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom."""
    if not 0.5 <= p < 1.0:
        raise ValueError("p must be in [0.5, 1)")
    return float(_scipy().t.ppf(p, df))


# --- one series ------------------------------------------------------------------

def mad_outliers(xs: list[float], threshold: float = MAD_THRESHOLD) -> list[int]:
    """Indices of outliers by the modified Z-score (Iglewicz & Hoaglin)."""
    if len(xs) < 3:
        return []
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    if mad == 0:
        return []
    return [i for i, x in enumerate(xs) if abs(0.6745 * (x - med) / mad) > threshold]


def mean_ci(xs: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval for the mean; (x, x) for one sample."""
    n = len(xs)
    mean = statistics.fmean(xs)
    if n < 2:
        return (mean, mean)
    half = t_quantile(0.5 + confidence / 2, n - 1) * statistics.stdev(xs) / math.sqrt(n)
    return (mean - half, mean + half)


@dataclass(frozen=True)
class Summary:
    """A series of samples summarised, every figure from every sample:
    ``median`` (the headline), ``ci95`` (the t-interval of the mean),
    ``outliers`` (indices flagged by the modified Z-score, not dropped)."""

    n: int
    median: float
    mean: float
    stdev: float
    ci95: tuple[float, float]
    outliers: tuple[int, ...] = ()
    minimum: float = 0.0
    maximum: float = 0.0

    @property
    def rel_half_width(self) -> float:
        """CI half-width relative to the median (0.03 = ±3 %)."""
        if self.median == 0:
            return math.inf if self.ci95[1] != self.ci95[0] else 0.0
        return (self.ci95[1] - self.ci95[0]) / 2 / abs(self.median)

    @property
    def cv(self) -> float:
        """Coefficient of variation: stdev / mean."""
        return self.stdev / abs(self.mean) if self.mean else 0.0

    def to_dict(self) -> dict:
        return {"n": self.n, "median": self.median, "mean": self.mean, "stdev": self.stdev,
                "ci95": list(self.ci95), "outliers": list(self.outliers),
                "min": self.minimum, "max": self.maximum}


def summarize(xs: list[float]) -> Summary:
    """Median, mean, stdev and 95 % CI of every sample in ``xs``, with the
    MAD outliers flagged (and kept)."""
    if not xs:
        raise ValueError("no samples")
    return Summary(n=len(xs), median=statistics.median(xs), mean=statistics.fmean(xs),
                   stdev=statistics.stdev(xs) if len(xs) > 1 else 0.0, ci95=mean_ci(xs),
                   outliers=tuple(mad_outliers(xs)), minimum=min(xs), maximum=max(xs))


@dataclass(frozen=True)
class Policy:
    """When to stop repeating a series (METHODOLOGY rules 10 and 12)."""

    min_samples: int = 3
    max_samples: int = 10
    target: float = 0.03          # CI half-width / mean
    warmup: int = 1               # discarded runs before the first sample

    def __post_init__(self):
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")

    deadline: float | None = None  # time.monotonic() after which no series takes more than it must

    def stop_reason(self, xs: list[float]) -> str | None:
        """``'ci_target_met'``, ``'cap_reached'``, ``'time_budget'``, or None to keep sampling."""
        if len(xs) < self.min_samples:
            return None
        if len(xs) >= 2 and summarize(xs).rel_half_width <= self.target:
            return "ci_target_met"
        if len(xs) >= self.max_samples:
            return "cap_reached"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "time_budget"
        return None

    def expected_samples(self, xs: list[float]) -> int:
        """How many samples the series will likely have when it stops: its own
        spread says, once it has two (the interval's half-width shrinks as
        t(n-1)/√n at the same CV); before that, the minimum."""
        n = len(xs)
        if self.stop_reason(xs) is not None:
            return n
        if n < 2:
            return self.min_samples
        s = summarize(xs)
        cv = s.stdev / abs(s.median) if s.median else math.inf
        for m in range(max(n + 1, self.min_samples), self.max_samples + 1):
            if t_quantile(0.975, m - 1) * cv / math.sqrt(m) <= self.target:
                return m
        return self.max_samples


# --- two series --------------------------------------------------------------------

def welch_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of Welch's t-test; 1.0 when it cannot be computed
    (fewer than two samples a side, or no spread on either side: two constant
    series carry no evidence of a difference, however far apart)."""
    if len(a) < 2 or len(b) < 2 or (len(set(a)) == 1 and len(set(b)) == 1):
        return 1.0                                # (scipy: t = ±inf and p = 0 for constants apart)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # scipy warns of what the nan below says
        p = float(_scipy().ttest_ind(a, b, equal_var=False).pvalue)
    return 1.0 if math.isnan(p) else p


def log_welch_p(a: list[float], b: list[float]) -> float:
    """Welch's t-test on the logarithms: whether the ratio of the two series
    differs from 1. Throughput noise is multiplicative — a sample twice as
    fast spreads twice as wide — so raw values give the faster side's spread
    undue weight. A series with a value ≤ 0 has no logarithm: raw Welch."""
    if min(a + b, default=0) <= 0:
        return welch_p(a, b)
    return welch_p([math.log(x) for x in a], [math.log(x) for x in b])


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann–Whitney U test: exact without ties (up to
    :data:`EXACT_UP_TO` a side), tie-corrected normal approximation otherwise."""
    if not a or not b:
        return 1.0
    tied = len(set(a + b)) < len(a) + len(b)
    method = "exact" if max(len(a), len(b)) <= EXACT_UP_TO and not tied else "asymptotic"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(_scipy().mannwhitneyu(a, b, alternative="two-sided", method=method,
                                        use_continuity=True).pvalue)
    return 1.0 if math.isnan(p) else min(1.0, p)


def median_ratio_ci(a: list[float], b: list[float], confidence: float = 0.95,
                    resamples: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float, float]:
    """median(b)/median(a) and its percentile-bootstrap CI (``scipy.stats.bootstrap``, each
    side resampled on its own, seeded). A side of one sample is its own median in every
    resample; both such sides: the ratio alone, and scipy.stats is not imported."""
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= 0 or mb <= 0:
        return (math.nan, math.nan, math.nan)
    ratio = mb / ma
    if len(set(a)) < 2 and len(set(b)) < 2:
        return (ratio, ratio, ratio)
    import numpy as np
    # scipy resamples a side of two or more samples; a side of one stays its median
    if len(a) >= 2 and len(b) >= 2:
        data, stat = (b, a), (lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis))
    elif len(b) >= 2:
        data, stat = (b,), (lambda x, axis: np.median(x, axis=axis) / ma)
    else:
        data, stat = (a,), (lambda y, axis: mb / np.median(y, axis=axis))
    got = _scipy().bootstrap(data, stat, n_resamples=resamples, confidence_level=confidence,
                             method="percentile", vectorized=True,
                             rng=np.random.default_rng(seed))
    lo, hi = (float(x) for x in got.confidence_interval)
    return (ratio, min(lo, ratio), max(hi, ratio))


@dataclass(frozen=True)
class Comparison:
    """``b`` against ``a``: the ratio of medians with its CI and whether the
    difference is significant: None where it could not be tested (one sample
    a side), and then no p-value either. ``verdict`` is a sentence for people."""

    ratio: float
    ratio_ci95: tuple[float, float]
    p_welch: float | None
    p_mann_whitney: float | None
    significant: bool | None
    verdict: str = field(default="")
    p_paired: float | None = None       # :func:`compare_paired`'s t-test on the rounds' ratios

    def to_dict(self) -> dict:
        return {"ratio": self.ratio, "ratio_ci95": list(self.ratio_ci95), "p_welch": self.p_welch,
                "p_mann_whitney": self.p_mann_whitney, "significant": self.significant,
                "verdict": self.verdict, **({"p_paired": self.p_paired}
                                            if self.p_paired is not None else {})}


UNTESTED = "untested: one sample a side"


def compare(a: list[float], b: list[float], alpha: float = ALPHA) -> Comparison:
    """Compare series ``b`` with ``a`` (the reference), on the same samples
    that their medians and intervals come from.

    Significant only with at least two samples a side, when the bootstrap
    CI of the ratio of medians excludes 1 and a test agrees at ``alpha``:
    Mann–Whitney once each side has ≥ 4 samples (the fewest with which the
    exact test can reach 0.05), Welch's t-test below that — on the
    logarithms (:func:`log_welch_p`), since throughput's noise scales with
    it and the figure tested is a ratio. With three a side
    the bootstrap interval excludes 1 whenever the samples do not overlap,
    which chance alone does one time in ten (Mann–Whitney's exact p = 0.1):
    alone it would rank noise. Otherwise the honest answer is "no
    significant difference".
    """
    return _compare(tuple(a), tuple(b), alpha)


@lru_cache(maxsize=1024)
def _compare(a: tuple[float, ...], b: tuple[float, ...], alpha: float) -> Comparison:
    """:func:`compare`, once for each pair of sample sets (a report's analysis compares many
    series more than once: its ranking, its findings and its recommendation)."""
    ratio, lo, hi = median_ratio_ci(list(a), list(b))
    if min(len(a), len(b)) < 2:
        # one sample on a side: nothing to test, and no test runs (with one a side, nor is
        # scipy.stats, seconds to import in an emulated guest, loaded)
        return Comparison(ratio, (lo, hi), None, None, None, UNTESTED)
    pw, pm = log_welch_p(list(a), list(b)), mann_whitney_p(list(a), list(b))
    excludes_one = not (lo <= 1.0 <= hi)
    test_ok = pm <= alpha if min(len(a), len(b)) >= 4 else pw <= alpha
    significant = bool(excludes_one and test_ok and not math.isnan(ratio))
    if significant:
        verdict = f"{(ratio - 1) * 100:+.1f} % ({(lo - 1) * 100:+.1f} … {(hi - 1) * 100:+.1f} %)"
    else:
        verdict = "no significant difference"
    return Comparison(ratio, (lo, hi), pw, pm, significant, verdict)


def compare_paired(a: list[float], b: list[float], alpha: float = ALPHA) -> Comparison:
    """Series ``b`` against ``a`` round by round: sample *i* of each was measured in the same
    interleaved round (rule 2: the two ran one after the other, in an order that rotates), so a
    drift of the whole host between rounds moves both, and their ratio keeps what the stacks
    differ by. The figure is the geometric mean of the rounds' ratios, its interval Student's t
    on their logarithms, and it is significant when that interval excludes 1 (the paired t-test
    at ``alpha``). Sides of unequal length (a series cut short) are not paired:
    :func:`compare` judges them."""
    if len(a) != len(b) or len(a) < 2 or min(a + b) <= 0:
        return compare(a, b, alpha)
    d = [math.log(y / x) for x, y in zip(a, b)]
    n, mean = len(d), statistics.fmean(d)
    sd = statistics.stdev(d)
    if sd == 0:
        half, p = 0.0, 0.0 if mean else 1.0
    else:
        se = sd / math.sqrt(n)
        half = t_quantile(1 - alpha / 2, n - 1) * se
        p = float(2 * _scipy().t.sf(abs(mean) / se, n - 1))
    ratio, lo, hi = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    significant = not (lo <= 1.0 <= hi) and p <= alpha
    verdict = (f"{(ratio - 1) * 100:+.1f} % ({(lo - 1) * 100:+.1f} … {(hi - 1) * 100:+.1f} %, "
               f"paired by round)" if significant else "no significant difference")
    return Comparison(ratio, (lo, hi), None, None, significant, verdict, p_paired=p)

