"""Effect sizes and precision of a row (issue 32, point 4): the relative difference and d_z with their bootstrap
intervals, the Monte Carlo standard error of resampled p-values and the digits they are printed to, and the sign test
reported beside every test; each held to values computed here independently (by hand, by scipy's noncentral t)."""

import math
import warnings

import numpy as np
import pytest
import scipy.stats

from mlflow_recsys.report import results_text
from mlflow_recsys.report._rows import format_p
from mlflow_recsys.stats import compare_models
from mlflow_recsys.stats._effects import adjusted_mcse, effect_columns
from simulated import paired_results


def _row(base, cand, **settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_models(
            dict(zip("AB", paired_results(base, cand), strict=True)), metrics="m", reference="A", **settings
        )


def test_d_z_is_the_mean_over_the_sd_of_the_differences_and_its_interval_matches_the_noncentral_t():
    # Normal differences: the exact interval of d_z inverts the noncentral t (Cumming & Finch 2001); the bootstrap's
    # percentile interval should land close to it at n = 2,000.
    rng = np.random.default_rng(1)
    n = 2000
    base = rng.uniform(0.2, 0.8, n)
    cand = base + rng.normal(0.01, 0.1, n)
    (row,) = _row(base, cand).comparisons
    d = cand - base
    assert row.effect_size_dz == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-9)
    t = row.effect_size_dz * math.sqrt(n)

    def ncp_at(q):
        return scipy.optimize.brentq(lambda ncp: scipy.stats.nct.cdf(t, n - 1, ncp) - q, t - 10, t + 10)

    exact = (ncp_at(0.975) / math.sqrt(n), ncp_at(0.025) / math.sqrt(n))
    assert (row.dz_ci_low, row.dz_ci_high) == pytest.approx(exact, abs=0.01)


def test_relative_interval_of_a_constant_ratio_is_that_ratio():
    # The candidate scores 10% above the baseline on every user: every bootstrap replicate has the same ratio.
    base = np.random.default_rng(2).uniform(0.2, 0.8, 300)
    (row,) = _row(base, 1.1 * base).comparisons
    assert row.relative_difference == pytest.approx(0.1, rel=1e-9)
    assert (row.relative_ci_low, row.relative_ci_high) == pytest.approx((0.1, 0.1), rel=1e-9)


def test_effect_columns_by_hand():
    # Three users, d = (0, 1, 2): mean 1, sd 1, so d_z = 1; the baseline's mean is 4. Two replicates: (mean d, mean
    # d^2, mean baseline) = (1, 2, 4) and (3, 10, 6). Relative: 1/4 and 3/6; variance (m2 - m1^2) * 3/2 = 1.5 in both,
    # so the d_z replicates are 1/sqrt(1.5) and 3/sqrt(1.5). At level 0.5 (numpy's linear quantiles at 0.25 and 0.75)
    # each interval would miss its estimate, and is widened to hold it.
    out = effect_columns(
        np.array([0.0, 1.0, 2.0]), 1.0, np.array([3.0, 4.0, 5.0]), np.array([1.0, 3.0]), np.array([2.0, 10.0]),
        np.array([4.0, 6.0]), confidence_level=0.5,
    )  # fmt: skip
    assert out["relative_difference"] == pytest.approx(0.25)
    assert (out["relative_ci_low"], out["relative_ci_high"]) == pytest.approx((0.25, 0.25 + 0.25 * 0.75))
    assert out["effect_size_dz"] == pytest.approx(1.0)
    replicates = np.array([1.0, 3.0]) / math.sqrt(1.5)
    assert (out["dz_ci_low"], out["dz_ci_high"]) == pytest.approx((1.0, np.quantile(replicates, 0.75)))
    # No spread in the differences: d_z and its interval are undefined; a zero baseline mean: no relative change.
    flat = effect_columns(np.ones(3), 1.0, np.zeros(3), np.ones(4), np.ones(4), np.zeros(4), 0.95)
    assert all(math.isnan(v) for v in flat.values())


def test_a_constant_shift_has_no_d_z_and_a_baseline_near_zero_no_relative_change():
    # A shift of 0.01 on every user differs from 0.01 only by rounding: its sd is noise, not spread (the helper's
    # break-test found d_z = 3.17e15 here).
    a = np.random.default_rng(7).random(50)
    (row,) = _row(a, a + 0.01).comparisons
    assert math.isnan(row.effect_size_dz) and math.isnan(row.dz_ci_low) and math.isnan(row.dz_ci_high)
    # A signed metric centred on 0: the baseline's mean is rounding, so the relative change is undefined.
    rng = np.random.default_rng(8)
    centred = rng.normal(0, 1, 100)
    centred -= centred.mean()
    (row,) = _row(centred, centred + rng.normal(0.1, 0.5, 100)).comparisons
    assert math.isnan(row.relative_difference) and math.isnan(row.relative_ci_low)
    # A negative baseline: the relative change takes the difference's sign.
    (row,) = _row(np.full(40, -1.5) + rng.normal(0, 0.1, 40), np.full(40, -1.0) + rng.normal(0, 0.1, 40)).comparisons
    assert row.difference > 0 and row.relative_difference > 0 and row.relative_ci_low > 0


def test_monte_carlo_errors_and_the_printed_digits():
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.8, 400)
    cand = base + rng.normal(0.0, 0.1, 400)
    (row,) = _row(base, cand, n_resamples=9999).comparisons
    assert row.p_value_mcse == pytest.approx(math.sqrt(row.p_value * (1 - row.p_value) / 9999))
    assert row.adjusted_p_value_mcse == row.p_value_mcse  # a family of one
    (exact,) = _row(base, cand, test_method="t").comparisons
    assert exact.p_value_mcse == 0.0
    # The case: 0.4980 at B = 9,999 has an error of 0.005, so only two decimals mean anything.
    assert format_p(0.4980, math.sqrt(0.498 * 0.502 / 9999)) == "0.50"
    assert format_p(0.0012, math.sqrt(0.0012 * 0.9988 / 9999)) == "0.0012"
    assert format_p(0.4980) == "0.4980"  # exact or analytic: four decimals
    assert format_p(3e-6, 1e-6) == "3.00e-06"
    # A rounded value must not cross alpha: 0.054 at B = 999 would read 0.05, beside "not significant".
    error = math.sqrt(0.054 * 0.946 / 999)
    assert format_p(0.054, error) == "0.05" and format_p(0.054, error, alpha=0.05) == "0.054"
    assert format_p(0.050, error, alpha=0.05) == "0.05"


def test_holm_and_bonferroni_carry_the_error_of_the_p_value_that_set_each_adjusted_one():
    p = np.array([0.01, 0.04, 0.03])
    se = np.array([0.001, 0.002, 0.003])
    # Holm: sorted 0.01 (x3), 0.03 (x2), 0.04 (x1) -> 0.03, 0.06, 0.06 (the last one set by 0.03's 2 x 0.03).
    holm = np.array([0.03, 0.06, 0.06])
    assert adjusted_mcse(p, se, holm, "holm") == pytest.approx([3 * 0.001, 2 * 0.003, 2 * 0.003])
    bonferroni = np.minimum(1, 3 * p)
    assert adjusted_mcse(p, se, bonferroni, "bonferroni") == pytest.approx(3 * se)
    assert adjusted_mcse(np.array([0.5, 0.6]), se[:2], np.array([1.0, 1.0]), "holm").tolist() == [0.0, 0.0]


@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_the_sign_test_is_reported_beside_any_test_and_named_in_the_sentence(alternative):
    rng = np.random.default_rng(4)
    base = rng.uniform(0.2, 0.8, 187)
    cand = base + rng.normal(-0.005, 0.05, 187)
    report = _row(base, cand, test_method="t", alternative=alternative)
    (row,) = report.comparisons
    expected = scipy.stats.binomtest(row.wins, row.wins + row.losses, 0.5, alternative=alternative).pvalue
    assert row.sign_test_p_value == pytest.approx(expected, rel=1e-12)
    sentence = results_text(report, row)
    assert f"; won on {row.wins} users, lost on {row.losses} (sign test p = " in sentence
    assert f"d_z = {row.effect_size_dz:.2f} [{row.dz_ci_low:.2f}, {row.dz_ci_high:.2f}]" in sentence


def test_against_a_margin_the_effect_intervals_name_their_level_beside_the_1_minus_2_alpha_difference_interval():
    rng = np.random.default_rng(9)
    base = rng.uniform(0.3, 0.6, 300)
    cand = base + rng.normal(0.01, 0.05, 300)
    results = dict(zip("AB", paired_results(base, cand), strict=True))
    margin = compare_models(results, metrics="m", reference="A", hypothesis="non-inferiority", margin=0.02)
    c = margin.comparisons[0]
    text = results_text(margin, c)
    assert "(90% (each end a one-sided 95% bound)" in text  # the difference's, whose ends the tests read
    assert f"[{c.relative_ci_low:+.1%}, {c.relative_ci_high:+.1%}] (95%)" in text
    assert f"[{c.dz_ci_low:.2f}, {c.dz_ci_high:.2f}] (95%)" in text
    plain = compare_models(results, metrics="m", reference="A")
    assert "(95%)" not in results_text(plain, plain.comparisons[0])  # one level in the sentence: not repeated
    # Beside a one-sided difference interval, the effect sizes' two-sided intervals say they are.
    greater = compare_models(results, metrics="m", reference="A", alternative="greater")
    c = greater.comparisons[0]
    text = results_text(greater, c)
    assert f"[{c.ci_low:.4f}, inf)" in text
    assert f"[{c.relative_ci_low:+.1%}, {c.relative_ci_high:+.1%}] (two-sided 95%)" in text
    assert f"[{c.dz_ci_low:.2f}, {c.dz_ci_high:.2f}] (two-sided 95%)" in text
