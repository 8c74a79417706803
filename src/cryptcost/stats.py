"""Statistics: summaries, outliers, confidence intervals, comparisons.

Pure functions over lists of floats; no dependency beyond the standard
library, so that every formula is visible here.

References
----------
* Student-t interval for a mean: x̄ ± t(0.975, n−1)·s/√n.
* Regularized incomplete beta I_x(a, b) by Lentz's continued fraction
  (Press et al., *Numerical Recipes*, 3rd ed., §6.4); the t distribution's
  CDF is F(t) = 1 − ½·I_{ν/(ν+t²)}(ν/2, ½) for t ≥ 0.
* Modified Z-score Mᵢ = 0.6745·(xᵢ − x̃)/MAD, outlier when |Mᵢ| > 3.5
  (Iglewicz & Hoaglin, *How to Detect and Handle Outliers*, 1993).
* Welch's t-test: t = (x̄₁ − x̄₂)/√(s₁²/n₁ + s₂²/n₂) with the
  Welch–Satterthwaite degrees of freedom
  ν = (s₁²/n₁ + s₂²/n₂)² / ((s₁²/n₁)²/(n₁−1) + (s₂²/n₂)²/(n₂−1)),
  always (with one side constant it becomes the other side's n − 1; a
  pooled n₁ + n₂ − 2 would be anti-conservative); both sides constant:
  no test (p = 1, or 0 when the means differ).
* Mann–Whitney U, exact two-sided p-value from the permutation
  distribution of U (Mann & Whitney, 1947) when there are no ties and at
  most 20 samples a side; otherwise the normal approximation with tie
  correction σ² = n₁n₂/12·((n+1) − Σ(t³−t)/(n(n−1))) and continuity
  correction, as scipy.stats.mannwhitneyu does (the tests compare).
* Ratio of medians: percentile bootstrap (Efron & Tibshirani, *An
  Introduction to the Bootstrap*, 1993, ch. 13), 2000 resamples of each
  side, seeded, so the same samples always give the same interval.

One sample set describes a result: its median (the headline), its
interval and its overhead are all computed from every sample. Outliers
(modified Z-score) are flagged for people to see, never dropped.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from functools import lru_cache

MAD_THRESHOLD = 3.5
ALPHA = 0.05
BOOTSTRAP = 2000
HOST_DRIFT = 0.10     # the host's CPU speed moved more than this between a result's samples
STEADY_MEMORY = 0.02   # a quiet host's memory copies vary by well under this (CV, runner.quiet.memory_noise)


# --- distributions -------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for I_x(a, b), modified Lentz (Numerical Recipes §6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """Inverse of :func:`t_cdf` for 0.5 ≤ p < 1, by bisection."""
    if not 0.5 <= p < 1.0:
        raise ValueError("p must be in [0.5, 1)")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


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
    """Two-sided p-value of Welch's t-test; 1.0 when it cannot be computed."""
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return 1.0
    va, vb = statistics.variance(a) / na, statistics.variance(b) / nb
    diff = statistics.fmean(a) - statistics.fmean(b)
    if va + vb == 0:
        return 1.0 if diff == 0 else 0.0
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))     # Welch–Satterthwaite, always
    return 2.0 * (1.0 - t_cdf(abs(t), df))


def log_welch_p(a: list[float], b: list[float]) -> float:
    """Welch's t-test on the logarithms: whether the ratio of the two series
    differs from 1. Throughput noise is multiplicative — a sample twice as
    fast spreads twice as wide — so raw values give the faster side's spread
    undue weight (345/217/212 against 95/100/85 MB/s: p = 0.06 raw, 0.02 on
    the logarithms). A series with a value ≤ 0 has no logarithm: raw Welch."""
    if min(a + b, default=0) <= 0:
        return welch_p(a, b)
    return welch_p([math.log(x) for x in a], [math.log(x) for x in b])


def _u_statistic(a: list[float], b: list[float]) -> float:
    u = 0.0
    for x in a:
        for y in b:
            u += 1.0 if x > y else 0.5 if x == y else 0.0
    return u


@lru_cache(maxsize=64)
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """Number of arrangements giving each U for sample sizes n1, n2 (no ties)."""
    # f(i, j)[u]: ways for i of the first and j of the second sample.
    table = {(0, j): (1,) for j in range(n2 + 1)}
    for i in range(1, n1 + 1):
        table[(i, 0)] = (1,)
        for j in range(1, n2 + 1):
            left = table[(i - 1, j)]          # largest element from sample 1: adds j
            down = table[(i, j - 1)]
            size = max(len(left) + j, len(down))
            row = [0] * size
            for u, c in enumerate(left):
                row[u + j] += c
            for u, c in enumerate(down):
                row[u] += c
            table[(i, j)] = tuple(row)
    return table[(n1, n2)]


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann–Whitney U test: exact without ties (up to
    20 a side), tie-corrected normal approximation otherwise."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    u = _u_statistic(a, b)
    mu = n1 * n2 / 2.0
    tied = len(set(a + b)) < n1 + n2
    if max(n1, n2) <= 20 and not tied:
        counts = _u_counts(n1, n2)
        total = sum(counts)
        extreme = abs(u - mu)
        tail = sum(c for k, c in enumerate(counts) if abs(k - mu) >= extreme - 1e-9)
        return min(1.0, tail / total)
    ranks = sorted(a + b)
    ties = {}
    for x in ranks:
        ties[x] = ties.get(x, 0) + 1
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties.values()) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u - mu) - 0.5) / sigma
    return 2.0 * (1.0 - statistics.NormalDist().cdf(z))


def median_ratio_ci(a: list[float], b: list[float], confidence: float = 0.95,
                    resamples: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float, float]:
    """median(b)/median(a) and its percentile-bootstrap CI (seeded)."""
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= 0 or mb <= 0:
        return (math.nan, math.nan, math.nan)
    ratio = mb / ma
    if len(set(a)) < 2 and len(set(b)) < 2:
        return (ratio, ratio, ratio)
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(b, k=len(b))) / statistics.median(rng.choices(a, k=len(a)))
                    for _ in range(resamples))
    tail = (1 - confidence) / 2
    lo = ratios[int(math.floor(tail * (resamples - 1)))]
    hi = ratios[int(math.ceil((1 - tail) * (resamples - 1)))]
    return (ratio, min(lo, ratio), max(hi, ratio))


@dataclass(frozen=True)
class Comparison:
    """``b`` against ``a``: the ratio of medians with its CI and whether the
    difference is significant. ``verdict`` is a sentence for people."""

    ratio: float
    ratio_ci95: tuple[float, float]
    p_welch: float
    p_mann_whitney: float
    significant: bool
    verdict: str = field(default="")

    def to_dict(self) -> dict:
        return {"ratio": self.ratio, "ratio_ci95": list(self.ratio_ci95), "p_welch": self.p_welch,
                "p_mann_whitney": self.p_mann_whitney, "significant": self.significant,
                "verdict": self.verdict}


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
    ratio, lo, hi = median_ratio_ci(a, b)
    pw, pm = log_welch_p(a, b), mann_whitney_p(a, b)
    excludes_one = not (lo <= 1.0 <= hi)
    test_ok = pm <= alpha if min(len(a), len(b)) >= 4 else pw <= alpha
    testable = min(len(a), len(b)) >= 2                     # one sample a side: nothing to test
    significant = bool(testable and excludes_one and test_ok and not math.isnan(ratio))
    if significant:
        verdict = f"{(ratio - 1) * 100:+.1f} % ({(lo - 1) * 100:+.1f} … {(hi - 1) * 100:+.1f} %)"
    else:
        verdict = "no significant difference"
    return Comparison(ratio, (lo, hi), pw, pm, significant, verdict)
