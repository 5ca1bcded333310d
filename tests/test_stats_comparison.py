"""Paired comparison statistics, checked against independent computations."""

import itertools
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import (
    COLUMNS,
    FewNonzeroUnitsWarning,
    LowResamplesWarning,
    UnverifiedPairingWarning,
    adjust_p_values,
    compare_models,
    compare_pair,
)
from simulated import result


def pair_from_differences(d, base=None):
    """Baseline and candidate results whose per-user differences are exactly ``d``."""
    d = np.asarray(d, dtype=np.float64)
    base = np.full_like(d, 0.5) if base is None else base
    return result({"m": base}), result({"m": base + d})


def enumerate_sign_flip_p(d, alternative="two-sided"):
    """Exact p by looping over all 2**n sign patterns in plain Python."""
    d = [float(x) for x in d]
    n = len(d)
    observed = sum(d) / n
    extreme = 0
    total = 0
    for signs in itertools.product((1, -1), repeat=n):
        t = sum(s * x for s, x in zip(signs, d, strict=True)) / n
        total += 1
        if alternative == "two-sided":
            extreme += abs(t) >= abs(observed) - 1e-12
        elif alternative == "greater":
            extreme += t >= observed - 1e-12
        else:
            extreme += t <= observed + 1e-12
    return extreme / total


@pytest.mark.parametrize("n", [2, 5, 9, 12])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_randomization_p_equals_exhaustive_enumeration_for_small_n(n, alternative):
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.05, 0.1, n), 3)
    base, cand = pair_from_differences(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        c = compare_pair(base, cand, metric="m", alternative=alternative)
    assert c.test_method == "randomization-exact"
    assert c.p_value == pytest.approx(enumerate_sign_flip_p(d, alternative), abs=1e-12)
    assert c.null_distribution.shape == (2**n,)


def test_exact_randomization_agrees_with_scipy_permutation_test():
    rng = np.random.default_rng(7)
    d = rng.normal(0.02, 0.1, 10)
    base, cand = pair_from_differences(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        for alternative in ("two-sided", "greater", "less"):
            ours = compare_pair(base, cand, metric="m", alternative=alternative).p_value
            theirs = scipy.stats.permutation_test(
                (d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative=alternative
            ).pvalue
            assert ours == pytest.approx(theirs, abs=1e-12)


def test_zero_differences_do_not_count_toward_exact_enumeration():
    # 3 non-zero differences among 40 users: 2**3 patterns, the zeros only dilute the mean.
    d = np.zeros(40)
    d[:3] = [0.3, 0.1, -0.05]
    base, cand = pair_from_differences(d)
    with pytest.warns(FewNonzeroUnitsWarning):
        c = compare_pair(base, cand, metric="m")
    assert c.n_nonzero == 3 and c.tie_rate == pytest.approx(37 / 40)
    assert c.p_value == pytest.approx(enumerate_sign_flip_p(d[:3]))


def test_monte_carlo_p_is_close_to_exact_enumeration():
    rng = np.random.default_rng(3)
    d = rng.normal(0.03, 0.1, 15)  # 2**15 > 9999 patterns: Monte Carlo
    base, cand = pair_from_differences(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        c = compare_pair(base, cand, metric="m", n_resamples=9999)
    assert c.test_method == "randomization"
    exact = scipy.stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
    se = np.sqrt(exact * (1 - exact) / 9999)
    assert abs(c.p_value - exact) <= 4 * se + 2 / 10000


def test_p_value_floor_is_one_over_b_plus_one_and_never_zero():
    rng = np.random.default_rng(0)
    d = rng.normal(1.0, 0.1, 200)
    base, cand = pair_from_differences(d)
    for test_method in ("randomization", "bootstrap"):
        c = compare_pair(base, cand, metric="m", n_resamples=999, test_method=test_method)
        assert c.p_value == 1 / 1000


def test_t_test_agrees_with_scipy_ttest_1samp():
    rng = np.random.default_rng(11)
    d = rng.normal(0.01, 0.2, 300)
    base, cand = pair_from_differences(d)
    for alternative in ("two-sided", "greater", "less"):
        c = compare_pair(base, cand, metric="m", test_method="t", alternative=alternative)
        assert c.p_value == pytest.approx(scipy.stats.ttest_1samp(d, 0.0, alternative=alternative).pvalue, rel=1e-12)


def test_bootstrap_standard_error_matches_the_standard_error_of_the_mean():
    rng = np.random.default_rng(5)
    d = rng.exponential(0.1, 2000) - 0.08
    base, cand = pair_from_differences(d)
    c = compare_pair(base, cand, metric="m")
    # The bootstrap SE of a mean estimates sd(d, ddof=0) / sqrt(n); with B = 9999 the Monte Carlo error is ~1%.
    assert c.bootstrap_standard_error == pytest.approx(np.std(d) / np.sqrt(len(d)), rel=0.04)
    assert c.ci_low < c.difference < c.ci_high
    assert np.quantile(c.bootstrap_distribution, 0.025) == pytest.approx(c.ci_low)


def test_one_sided_alternative_gives_one_sided_interval():
    rng = np.random.default_rng(1)
    d = rng.normal(0.02, 0.1, 500)
    base, cand = pair_from_differences(d)
    greater = compare_pair(base, cand, metric="m", alternative="greater")
    less = compare_pair(base, cand, metric="m", alternative="less")
    assert greater.ci_high == np.inf and np.isfinite(greater.ci_low)
    assert less.ci_low == -np.inf and np.isfinite(less.ci_high)
    assert greater.ci_low == pytest.approx(np.quantile(greater.bootstrap_distribution, 0.05))


def test_difference_means_and_relative_difference_by_hand():
    base, cand = result({"m": np.array([0.2, 0.4, 0.6])}), result({"m": np.array([0.3, 0.4, 0.8])})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        c = compare_pair(base, cand, metric="m", baseline_name="A", candidate_name="B")
    assert c.baseline_mean == pytest.approx(0.4)
    assert c.candidate_mean == pytest.approx(0.5)
    assert c.difference == pytest.approx(0.1)
    assert c.relative_difference == pytest.approx(0.25)
    assert c.n_nonzero == 2 and c.tie_rate == pytest.approx(1 / 3)
    # Non-zero differences 0.1 and 0.2: patterns give means 0.1, 1/30, -1/30, -0.1; |t| >= 0.1 twice.
    assert c.p_value == pytest.approx(0.5)


def test_holm_matches_hand_worked_values_from_four_metrics():
    raw = np.array([0.0399, 0.0123, 0.0159, 0.0338])
    # sorted: 0.0123*4=0.0492, 0.0159*3=0.0477 -> running max 0.0492, 0.0338*2=0.0676, 0.0399*1 -> 0.0676
    np.testing.assert_allclose(adjust_p_values(raw, "holm"), [0.0676, 0.0492, 0.0492, 0.0676])
    np.testing.assert_allclose(adjust_p_values(raw, "bonferroni"), [0.1596, 0.0492, 0.0636, 0.1352])
    np.testing.assert_allclose(adjust_p_values(raw, None), raw)
    np.testing.assert_allclose(adjust_p_values(np.array([0.5, 0.4]), "holm"), [0.8, 0.8])


def test_compare_models_adjusts_over_every_pair_and_metric():
    rng = np.random.default_rng(2)
    base = {k: rng.random(400) for k in ("a", "b")}
    results = {
        "A": result(base),
        "B": result({k: v + rng.normal(0.01, 0.1, 400) for k, v in base.items()}),
        "C": result({k: v + rng.normal(0.0, 0.1, 400) for k, v in base.items()}),
    }
    report = compare_models(results, metrics=["a", "b"], reference="A", n_resamples=999)
    frame = report.to_frame()
    assert list(frame.columns) == list(COLUMNS)
    assert len(frame) == 4 and report.family_size == 4
    np.testing.assert_allclose(frame["adjusted_p_value"], adjust_p_values(frame["p_value"].to_numpy(), "holm"))
    all_pairs = compare_models(results, metrics=["a"], n_resamples=999)
    assert [(c.baseline, c.candidate) for c in all_pairs.comparisons] == [("A", "B"), ("A", "C"), ("B", "C")]


def test_direction_is_inconclusive_when_not_significant_whatever_the_sign():
    rng = np.random.default_rng(4)
    d = rng.normal(0.0, 0.2, 300)
    d = d - d.mean() - 0.002  # mean exactly -0.002, far inside the noise
    base, cand = pair_from_differences(d)
    c = compare_pair(base, cand, metric="m", n_resamples=999)
    assert c.difference < 0 and not c.significant and c.direction == "inconclusive"
    d = rng.normal(-0.1, 0.05, 300)
    base, cand = pair_from_differences(d)
    assert compare_pair(base, cand, metric="m", n_resamples=999).direction == "worse"


def test_confidence_level_moves_interval_and_significance_bar():
    rng = np.random.default_rng(8)
    d = rng.normal(0.012, 0.1, 400)  # p between 0.01 and 0.05
    base, cand = pair_from_differences(d)
    c95 = compare_pair(base, cand, metric="m")
    c99 = compare_pair(base, cand, metric="m", confidence_level=0.99)
    assert c99.ci_high - c99.ci_low > c95.ci_high - c95.ci_low
    assert c95.p_value == c99.p_value
    assert 0.01 < c95.p_value <= 0.05
    assert c95.significant and not c99.significant


def test_repeated_rows_are_reduced_to_unit_means():
    rng = np.random.default_rng(6)
    n_users, draws = 50, 3
    ids = np.repeat(np.arange(n_users), draws)
    base_rows = rng.random(n_users * draws)
    cand_rows = base_rows + rng.normal(0.05, 0.1, n_users * draws)
    rows = compare_pair(result({"m": base_rows}, ids), result({"m": cand_rows}, ids), metric="m")
    units = compare_pair(
        result({"m": base_rows.reshape(-1, draws).mean(1)}, np.arange(n_users)),
        result({"m": cand_rows.reshape(-1, draws).mean(1)}, np.arange(n_users)),
        metric="m",
    )
    assert rows.n_samples == 150 and rows.n_units == 50
    for col in ("difference", "ci_low", "ci_high", "p_value", "bootstrap_standard_error", "n_nonzero"):
        assert getattr(rows, col) == pytest.approx(getattr(units, col), rel=1e-12, abs=1e-15)


def test_fewer_than_two_units_raises():
    ids = np.array([7, 7, 7])
    with pytest.raises(ValueError, match="at least 2 distinct users"):
        compare_pair(result({"m": np.ones(3)}, ids), result({"m": np.zeros(3)}, ids), metric="m")


def test_same_random_state_gives_identical_output_and_hypotheses_ignore_the_rest_of_the_call():
    rng = np.random.default_rng(9)
    base = {k: rng.random(300) for k in ("a", "b", "c")}
    A = result(base)
    B = result({k: v + rng.normal(0.01, 0.1, 300) for k, v in base.items()})
    C = result({k: v + rng.normal(0.02, 0.1, 300) for k, v in base.items()})
    one = compare_models({"A": A, "B": B}, metrics=["a"], reference="A", n_resamples=999, correction=None)
    again = compare_models({"A": A, "B": B}, metrics=["a"], reference="A", n_resamples=999, correction=None)
    pd.testing.assert_frame_equal(one.to_frame(), again.to_frame())
    bigger = compare_models(
        {"C": C, "A": A, "B": B}, metrics=["c", "a", "b"], reference="A", n_resamples=999, correction=None
    )
    for col in ("difference", "baseline_mean", "p_value", "ci_low", "ci_high", "bootstrap_standard_error"):
        assert getattr(bigger.get("a", "B"), col) == getattr(one.comparisons[0], col)
    np.testing.assert_array_equal(bigger.get("a", "B").null_distribution, one.comparisons[0].null_distribution)
    other_seed = compare_models({"A": A, "B": B}, metrics=["a"], reference="A", n_resamples=999, random_state=1)
    assert other_seed.comparisons[0].ci_low != one.comparisons[0].ci_low


# -- errors and warnings -------------------------------------------------------------


def test_result_without_per_user_values_is_refused():
    base = result({"m": np.ones(40)})
    bare = EvaluationResult(metrics={"m": 1.0}, per_user=None, sample_ids=np.arange(40), targets_fingerprint="fp")
    with pytest.raises(ValueError, match="collect_per_user=False"):
        compare_pair(base, bare, metric="m")


def test_sample_ids_differing_in_length_content_or_order_are_refused():
    v = np.linspace(0, 1, 40)
    base = result({"m": v}, np.arange(40))
    with pytest.raises(ValueError, match="40 rows.*39"):
        compare_pair(base, result({"m": v[:39]}, np.arange(39)), metric="m")
    with pytest.raises(ValueError, match="in content"):
        compare_pair(base, result({"m": v}, np.arange(1, 41)), metric="m")
    with pytest.raises(ValueError, match="different order"):
        compare_pair(base, result({"m": v}, np.arange(40)[::-1]), metric="m")


def test_different_targets_fingerprints_are_refused_naming_both():
    v = np.linspace(0, 1, 40)
    with pytest.raises(ValueError, match=r"fingerprints differ.*A: aaaa.*B: bbbb"):
        compare_pair(
            result({"m": v}, fingerprint="aaaa"),
            result({"m": v}, fingerprint="bbbb"),
            metric="m",
            baseline_name="A",
            candidate_name="B",
        )


def test_missing_fingerprint_warns_that_pairing_is_unverified():
    v = np.linspace(0, 1, 40)
    with pytest.warns(UnverifiedPairingWarning, match="no targets fingerprint"):
        compare_pair(result({"m": v}, fingerprint=None), result({"m": v + 0.1}), metric="m", n_resamples=999)


def test_metric_not_evaluated_lists_available_keys():
    v = np.linspace(0, 1, 40)
    with pytest.raises(ValueError, match=r"\['ndcg@10'\] not evaluated.*available: \['m'\]"):
        compare_pair(result({"m": v}), result({"m": v}), metric="ndcg@10")


def test_non_finite_per_user_values_are_refused():
    v = np.linspace(0, 1, 40)
    bad = v.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="non-finite.*sample id 3"):
        compare_pair(result({"m": v}), result({"m": bad}), metric="m")


@pytest.mark.parametrize("huge", [1e300, -1.5e308, 1.0000001e100])
def test_per_user_values_too_large_to_square_and_sum_are_refused(huge):
    """Squares of the differences (for d_z) and their sums over users must stay finite in float64."""
    v = np.linspace(0, 1, 40)
    bad = v.copy()
    bad[4] = huge
    match = r"magnitude at most 1e\+100, found 1 above 1e\+100 in magnitude \(first at sample id 4: " + re.escape(
        repr(huge)
    )
    with pytest.raises(ValueError, match=match):
        compare_pair(result({"m": v}), result({"m": bad}), metric="m")
    bad[4] = 1e100  # the largest taken
    assert np.isfinite(compare_pair(result({"m": v}), result({"m": bad}), metric="m", n_resamples=999).ci_high)


def test_one_sided_alternative_without_reference_is_refused():
    v = np.linspace(0, 1, 40)
    with pytest.raises(ValueError, match="reference"):
        compare_models({"A": result({"m": v}), "B": result({"m": v})}, metrics=["m"], alternative="greater")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_resamples": 0}, "n_resamples"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"alternative": "bigger"}, "alternative"),
        ({"test_method": "wilcoxn"}, "test_method"),
        ({"interval_method": "BCa "}, r"interval_method: expected one of \('percentile', 'bca'\), found 'BCa '"),
        ({"zero_method": "zero"}, r"zero_method: expected one of \('wilcox', 'pratt', 'zsplit'\), found 'zero'"),
        ({"random_state": -1}, "random_state"),
    ],
)
def test_bad_settings_are_refused_naming_the_argument(kwargs, match):
    v = np.linspace(0, 1, 40)
    with pytest.raises(ValueError, match=match):
        compare_pair(result({"m": v}), result({"m": v + 0.1}), metric="m", **kwargs)


def test_low_n_resamples_warns_with_the_adjusted_floor():
    rng = np.random.default_rng(0)
    base = {k: rng.random(100) for k in "abc"}
    results = {
        "A": result(base),
        "B": result({k: v + 0.1 for k, v in base.items()}),
        "C": result({k: v + 0.2 for k, v in base.items()}),
    }
    with pytest.warns(LowResamplesWarning, match=r"J/\(B\+1\) = 0\.0594"):
        compare_models(results, metrics=list("abc"), reference="A", n_resamples=100)


def test_few_nonzero_units_warning_points_at_the_callers_line():
    d = np.zeros(100)
    d[:10] = 0.1
    base, cand = pair_from_differences(d)
    with pytest.warns(FewNonzeroUnitsWarning) as record:
        compare_pair(base, cand, metric="m")
    assert record[0].filename == __file__
