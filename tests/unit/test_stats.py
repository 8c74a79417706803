"""Statistics against known values (textbook tables and hand computation)."""

import math

import pytest
# in the locked test environment: missing, these tests fail, never skip
import scipy.stats as scipy_stats

from cryptcost import stats


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (5, 2.5706), (10, 2.2281),
                                         (30, 2.0423), (1000, 1.9623)])
def test_t_quantile_matches_tables(df, expected):
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_mean_ci_hand_computed():
    lo, hi = stats.mean_ci([10, 12, 14])
    half = 4.3027 * 2 / math.sqrt(3)
    assert (lo, hi) == (pytest.approx(12 - half, abs=1e-3), pytest.approx(12 + half, abs=1e-3))


def test_mad_outlier():
    assert stats.mad_outliers([10, 11, 12, 10.5, 50]) == [4]
    assert stats.mad_outliers([10, 10, 10]) == []


def test_one_sample_set_outliers_flagged_not_dropped():
    """Median, mean and interval all come from every sample; the outlier is
    shown, and it widens the interval instead of silently vanishing."""
    xs = [10, 11, 12, 10.5, 50]
    s = stats.summarize(xs)
    assert s.outliers == (4,)
    assert s.median == 11 and s.n == 5
    assert s.mean == pytest.approx(sum(xs) / 5)
    lo, hi = s.ci95
    assert lo < 18.7 < hi and hi > 40                 # the interval of all five samples
    assert s.rel_half_width == pytest.approx((hi - lo) / 2 / 11)


def test_policy_stops_on_target_or_cap():
    p = stats.Policy(min_samples=3, max_samples=5, target=0.03)
    assert p.stop_reason([100, 100.1]) is None                  # below min
    assert p.stop_reason([100, 100.1, 99.9]) == "ci_target_met"
    assert p.stop_reason([100, 130, 70]) is None
    assert p.stop_reason([100, 130, 70, 120, 80]) == "cap_reached"


def test_mann_whitney_exact():
    assert stats.mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    assert stats.mann_whitney_p([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx(2 / 70)
    assert stats.mann_whitney_p([1, 3, 5], [2, 4, 6]) > 0.5


def test_welch_matches_reference():
    # scipy.stats.ttest_ind([1,2,3,4],[2,3,4,5], equal_var=False).pvalue = 0.31533...
    assert stats.welch_p([1, 2, 3, 4], [2, 3, 4, 5]) == pytest.approx(0.31533, abs=1e-4)


def test_compare_says_no_significant_difference():
    c = stats.compare([100, 101, 99], [100.5, 99, 101])
    assert not c.significant
    assert c.verdict == "no significant difference"


def test_compare_finds_a_real_difference():
    c = stats.compare([100, 101, 99, 100, 100.5], [90, 91, 89, 90, 90.5])
    assert c.significant
    assert c.ratio == pytest.approx(0.9)                  # a ratio of medians
    assert c.ratio_ci95[0] <= 0.9 <= c.ratio_ci95[1] < 1


def test_overhead_is_a_ratio_of_the_medians_the_table_shows():
    a, b = [100, 102, 98, 300], [50, 51, 49, 52]          # one wild sample on the reference side
    c = stats.compare(a, b)
    assert c.ratio == pytest.approx(50.5 / 101)  # medians, not means (which give 0.34)
    assert (
        c.ratio_ci95 == stats.compare(a, b).ratio_ci95
    )  # seeded: the same samples, the same interval


def test_three_samples_each_cannot_pass_mann_whitney_so_welch_decides():
    c = stats.compare([100, 100.5, 99.5], [50, 50.5, 49.5])
    assert c.significant and c.p_mann_whitney == pytest.approx(0.1) and c.p_welch < 0.001


def test_three_samples_that_do_not_overlap_by_chance_are_not_a_difference():
    # Two stacks' 1 MiB reads from a quick run here: no sample of one side
    # reaches the other's, so the bootstrap interval of the ratio excludes 1,
    # which three samples a side do by chance one time in ten; Welch's
    # p on the logarithms, 0.065, says so (0.085 on raw values), and the stacks tie.
    a = [496.4e6, 575.9e6, 455.1e6]
    b = [372.1e6, 421.1e6, 429.5e6]
    c = stats.compare(a, b)
    assert c.ratio_ci95[1] < 1                            # the interval alone would call it
    assert c.p_welch == pytest.approx(0.0650, abs=1e-3)
    assert not c.significant and c.verdict == "no significant difference"


# --- against scipy's own implementations --------------------------------------

CASES = [
    ([1, 2, 3, 4], [2, 3, 4, 5]),
    ([1, 2], [3, 5]),  # n = 2
    ([1, 2], [1, 2]),  # identical: |U − μ| = 0, below the 0.5 correction
    ([1, 2, 3], [1, 2, 3]),
    ([1, 2, 3], [1.5, 2, 3.5]),  # |U − μ| = 0.5
    ([100, 100, 100], [90, 91, 89]),  # one side constant
    ([5.0, 5.1, 4.9, 5.2, 5.0], [5.0, 5.0, 5.3, 4.8]),  # ties across the sides
    ([1, 1, 2, 2, 3, 3], [2, 2, 3, 3, 4, 4]),  # many ties
    ([10, 20, 30, 40, 50, 60, 70, 80, 90], [15, 25, 35, 45, 55, 65, 75, 85, 95, 105]),
    (list(range(25)), [x + 7.5 for x in range(22)]),  # beyond the exact table
]


@pytest.mark.parametrize("a,b", CASES)
def test_welch_matches_scipy(a, b):
    expected = scipy_stats.ttest_ind(a, b, equal_var=False).pvalue
    assert stats.welch_p(a, b) == pytest.approx(expected, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("a,b", CASES)
def test_mann_whitney_matches_scipy(a, b):
    tied = len(set(a + b)) < len(a) + len(b)
    method = "asymptotic" if tied or max(len(a), len(b)) > 20 else "exact"
    expected = scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method=method,
                                        use_continuity=True).pvalue
    assert stats.mann_whitney_p(a, b) == pytest.approx(expected, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("a,b", [c for c in CASES if min(c[0] + c[1]) > 0])
def test_log_welch_is_scipys_welch_on_the_logarithms(a, b):
    expected = scipy_stats.ttest_ind(
        [math.log(x) for x in a], [math.log(x) for x in b], equal_var=False
    ).pvalue
    assert stats.log_welch_p(a, b) == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_a_wide_fast_side_against_a_tight_slow_one_is_a_difference_on_the_log_scale():
    # R3's gocryptfs-openssl read with acceleration on and off, three samples a
    # side (MB/s): on raw values the fast side's spread, which scales with its
    # speed, leaves Welch at p = 0.06 for a 2.3× gap with no overlap.
    on, off = [345e6, 217e6, 212e6], [95e6, 100e6, 85e6]
    assert stats.welch_p(off, on) > 0.05
    c = stats.compare(off, on)
    assert c.p_welch == pytest.approx(0.0177, abs=1e-3) and c.significant


def test_log_welch_falls_back_to_raw_values_when_a_value_has_no_logarithm():
    assert stats.log_welch_p([0, 1, 2], [3, 4, 5]) == stats.welch_p([0, 1, 2], [3, 4, 5])


def test_the_old_welch_fallback_was_anti_conservative():
    """With one constant side, pooled df (n1 + n2 − 2) gave a smaller p than Welch's."""
    a, b = [100, 100, 100], [90, 95, 99]
    pooled = 2 * (
        1 - scipy_stats.t.cdf(abs((100 - 94.6667) / ((stats.statistics.variance(b) / 3) ** 0.5)), 4)
    )
    assert stats.welch_p(a, b) > pooled


@pytest.mark.parametrize("a,b", [([1, 2], [1, 2]), ([1, 2, 3], [1, 2, 3]), ([5.0] * 6, [5.0] * 6),
                                 ([1, 2, 3], [1.5, 2, 3.5])])
def test_no_p_value_exceeds_one(a, b):
    """The normal approximation with its continuity correction went past 1 when |U − μ| < 0.5
    (1.33 for [1, 2] against itself)."""
    c = stats.compare(a, b)
    assert 0 <= c.p_mann_whitney <= 1 and 0 <= c.p_welch <= 1, c


@pytest.mark.parametrize("n", [2, 3])
def test_two_constant_series_apart_are_no_evidence_of_a_difference(n):
    """No spread on either side: Welch has nothing to weigh the gap against (scipy: nan), and
    with fewer than four a side it decides alone. Such series used to give p = 0 and
    'significant' from n = 2."""
    c = stats.compare([100.0] * n, [90.0] * n)
    assert c.p_welch == 1.0 and not c.significant and c.verdict == "no significant difference"


def test_t_quantile_is_scipys():
    for df in (1, 2, 3, 7.5, 40):
        assert stats.t_quantile(0.975, df) == pytest.approx(scipy_stats.t.ppf(0.975, df), rel=1e-12)
    with pytest.raises(ValueError):
        stats.t_quantile(0.2, 3)


def test_one_sample_a_side_runs_no_test_and_loads_no_scipy():
    """With one sample on a side nothing can be tested: no p-value, significance unknown (None,
    never False: "no significant difference" would claim a test that never ran), the verdict
    says so, and scipy.stats (seconds to import in an emulated guest) stays unloaded."""
    import subprocess
    import sys
    code = ("import sys; from cryptcost import stats\n"
            "c = stats.compare([100.0], [80.0]); m = stats.summarize([100.0])\n"
            "print(c.p_welch, c.p_mann_whitney, c.significant, round(c.ratio, 2), "
            "'scipy.stats' in sys.modules, c.verdict.replace(' ', '_'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "None", "None", "None", "0.8", "False", "untested:_one_sample_a_side",
    ]
    two = stats.compare([100.0, 101.0], [80.0, 81.0])
    assert two.p_welch < 1 and two.p_mann_whitney < 1          # two a side: the tests run


def test_paired_rounds_see_through_the_hosts_drift_that_hides_a_gap_from_unpaired_tests():
    """dm-crypt's twin in a CI guest: every stack was fast in round 1 and slow after (dm-null
    112, 50, 68 MB/s), and the unpaired tests called a 1.6× gap no significant difference."""
    on, off = [40.0, 24.7, 28.6], [25.7, 16.8, 15.1]
    assert not stats.compare(on, off).significant
    paired = stats.compare_paired(on, off)
    assert paired.significant and 0.55 < paired.ratio < 0.67 and paired.ratio_ci95[1] < 1
    assert "paired by round" in paired.verdict
    scipy_p = scipy_stats.ttest_rel([math.log(x) for x in off], [math.log(x) for x in on]).pvalue
    assert paired.p_paired == pytest.approx(scipy_p)


def test_paired_rounds_find_no_difference_in_noise_and_unequal_sides_are_not_paired():
    a = [100.0, 80.0, 120.0, 90.0, 110.0]
    b = [101.0, 78.0, 118.0, 93.0, 108.0]
    assert stats.compare_paired(a, b).significant is False
    cut = stats.compare_paired(a, b[:3])
    assert cut.p_paired is None and cut == stats.compare(a, b[:3])
