"""Statistics against known values (textbook tables and hand computation)."""

import math

import pytest

from cryptcost import stats


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (5, 2.5706), (10, 2.2281),
                                         (30, 2.0423), (1000, 1.9623)])
def test_t_quantile_matches_tables(df, expected):
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_betainc_symmetry_and_known_value():
    assert stats.betainc(2, 3, 0.4) == pytest.approx(0.5248, abs=1e-4)
    assert stats.betainc(2, 3, 0.4) == pytest.approx(1 - stats.betainc(3, 2, 0.6))


def test_mean_ci_hand_computed():
    lo, hi = stats.mean_ci([10, 12, 14])
    half = 4.3027 * 2 / math.sqrt(3)
    assert (lo, hi) == (pytest.approx(12 - half, abs=1e-3), pytest.approx(12 + half, abs=1e-3))


def test_mad_outlier():
    assert stats.mad_outliers([10, 11, 12, 10.5, 50]) == [4]
    assert stats.mad_outliers([10, 10, 10]) == []


def test_summary_reports_outlier_but_keeps_median_over_all():
    s = stats.summarize([10, 11, 12, 10.5, 50])
    assert s.outliers == (4,)
    assert s.median == 11
    assert s.mean == pytest.approx(10.875)
    assert s.n == 5


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
    c = stats.compare([100, 101, 99, 100], [90, 91, 89, 90])
    assert c.significant
    assert c.ratio == pytest.approx(0.9)
    assert c.ratio_ci95[0] < 0.9 < c.ratio_ci95[1] < 1


def test_three_samples_each_cannot_pass_mann_whitney_so_welch_and_ci_decide():
    c = stats.compare([100, 100.5, 99.5], [50, 50.5, 49.5])
    assert c.significant and c.p_mann_whitney == pytest.approx(0.1)
