"""Percentile bootstrap intervals of one model's metric levels, users resampled (stats/_levels.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.metrics import MAX_CUTOFF, METRIC_CLASSES
from mlflow_recsys.stats._levels import metric_level_intervals
from mlflow_recsys.tracking._limits import MAX_KEY_LENGTH
from mlflow_recsys.tracking._logged_models import CI_HIGH, CI_LOW
from mlflow_recsys.tracking._naming import mlflow_metric_name
from simulated import result as _result

B = 9999


def _ranking_like(n: int, seed: int) -> np.ndarray:
    """nDCG-like per-user values: in [0, 1], a third of the users at 0."""
    rng = np.random.default_rng(seed)
    return rng.beta(2, 3, n) * (rng.random(n) > 0.3)


def _monte_carlo_tolerance(standard_error: float, n_resamples: int, tail: float = 0.025) -> float:
    """Four standard errors of the difference of two independent B-replicate estimates of a bootstrap quantile.

    One estimate's SE is sqrt(p (1 - p) / B) / g(q_p) (the sample quantile's asymptotic SE), with the bootstrap
    density g at the quantile taken from the normal approximation of the mean's bootstrap distribution
    (SD = the mean's standard error): g = phi(1.96) / SE. Two independent estimates differ by sqrt(2) times that.
    For nDCG-like values of 188 users (SE ~ 0.016) at B = 9999 this is about 0.0027.
    """
    density = scipy.stats.norm.pdf(scipy.stats.norm.ppf(1 - tail)) / standard_error
    return 4 * np.sqrt(2) * np.sqrt(tail * (1 - tail) / n_resamples) / density


@pytest.mark.parametrize("n_users", [188, 2000])
def test_interval_agrees_with_scipy_percentile_bootstrap_within_monte_carlo_error(n_users):
    values = _ranking_like(n_users, seed=n_users)
    ours = metric_level_intervals(_result({"ndcg@100": values}, np.arange(n_users)), n_resamples=B)
    theirs = scipy.stats.bootstrap(
        (values,), np.mean, n_resamples=B, method="percentile", random_state=np.random.default_rng(5)
    ).confidence_interval
    tolerance = _monte_carlo_tolerance(np.std(values) / np.sqrt(n_users), B)
    assert abs(ours.ci_low["ndcg@100"] - theirs.low) < tolerance
    assert abs(ours.ci_high["ndcg@100"] - theirs.high) < tolerance
    # The bound is tight enough to matter: well under the interval's half-width.
    assert tolerance < (theirs.high - theirs.low) / 8


def test_users_with_several_rows_are_resampled_whole_as_scipy_does_with_paired_sums_and_counts():
    """Users with 1 to 3 rows: the replicate is the mean of the drawn users' rows; scipy resamples the users'
    (sum, row count) pairs together and takes sum of sums / sum of counts."""
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 4, 300)
    ids = np.repeat(np.arange(300), counts)
    rows = _ranking_like(len(ids), seed=4)
    ours = metric_level_intervals(_result({"ndcg@100": rows}, ids), n_resamples=B)
    sums = np.bincount(ids, weights=rows)
    theirs = scipy.stats.bootstrap(
        (sums, counts.astype(float)),
        lambda s, c, axis: s.sum(axis=axis) / c.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=B,
        method="percentile",
        random_state=np.random.default_rng(6),
    ).confidence_interval
    assert ours.estimates["ndcg@100"] == pytest.approx(rows.mean(), abs=1e-15)
    tolerance = _monte_carlo_tolerance(np.std(sums / counts) / np.sqrt(300), B)
    assert abs(ours.ci_low["ndcg@100"] - theirs.low) < tolerance
    assert abs(ours.ci_high["ndcg@100"] - theirs.high) < tolerance


def _exact_quantiles(unit_sums, unit_counts, probabilities):
    """Quantiles (inverse CDF) of the exact bootstrap distribution: all n**n ordered resamples, equally likely,
    and the gap from each asked probability to the nearest jump of the CDF."""
    n = len(unit_sums)
    draws = np.array(list(itertools.product(range(n), repeat=n)))
    means = unit_sums[draws].sum(axis=1) / unit_counts[draws].sum(axis=1)
    values, counts = np.unique(np.round(means, 12), return_counts=True)
    cdf = np.cumsum(counts) / len(means)
    out = []
    for p in probabilities:
        position = int(np.searchsorted(cdf, p))
        out.append((values[position], np.min(np.abs(cdf - p))))
    return out


def test_interval_of_four_users_is_the_exact_bootstraps_quantiles_from_enumerating_all_256_resamples():
    """With 4 users the bootstrap distribution is discrete. At a 93.75 % level each tail (3.125 %) lies midway
    between two jumps of its CDF, more than 6 Monte Carlo SDs from either (checked), so B = 9999 replicates put
    both percentiles on the exact quantiles: 0.1 and 0.9 for these (symmetric) values."""
    values = np.array([0.0, 0.2, 0.8, 1.0])
    ours = metric_level_intervals(_result({"ndcg@100": values}, ["a", "b", "c", "d"]), confidence_level=0.9375)
    (low, low_gap), (high, high_gap) = _exact_quantiles(values, np.ones(4), [0.03125, 0.96875])
    assert min(low_gap, high_gap) > 6 * np.sqrt(0.03125 * 0.96875 / B)
    assert (low, high) == (pytest.approx(0.1), pytest.approx(0.9))
    assert ours.ci_low["ndcg@100"] == pytest.approx(low, abs=1e-12)
    assert ours.ci_high["ndcg@100"] == pytest.approx(high, abs=1e-12)


def test_interval_of_three_users_one_with_two_rows_matches_the_exact_27_resamples():
    """Users a (rows 0.2, 0.4), b (0.9), c (0.0) at an 80 % level: the 10 % and 90 % quantiles of the 27 ordered
    resamples' row means."""
    rows, ids = np.array([0.2, 0.4, 0.9, 0.0]), ["a", "a", "b", "c"]
    ours = metric_level_intervals(_result({"ndcg@100": rows}, ids), confidence_level=0.8, n_resamples=B)
    (low, low_gap), (high, high_gap) = _exact_quantiles(
        np.array([0.6, 0.9, 0.0]), np.array([2.0, 1.0, 1.0]), [0.1, 0.9]
    )
    assert min(low_gap, high_gap) > 6 * np.sqrt(0.1 * 0.9 / B)
    assert ours.estimates["ndcg@100"] == pytest.approx(0.375)
    assert (ours.ci_low["ndcg@100"], ours.ci_high["ndcg@100"]) == (pytest.approx(low), pytest.approx(high))


def test_each_interval_holds_its_estimate_and_a_constant_metric_has_a_zero_width_interval():
    values = _ranking_like(50, seed=1)
    ours = metric_level_intervals(_result({"ndcg@100": values, "recall@20": np.full(50, 0.3)}, np.arange(50)))
    frame = ours.to_frame()
    assert list(frame.columns) == ["metric", "estimate", "ci_low", "ci_high"]
    assert (frame["ci_low"] <= frame["estimate"]).all() and (frame["estimate"] <= frame["ci_high"]).all()
    # Every replicate of a constant is exactly 0.3; the estimate (numpy's mean of 50 copies) may be an ulp off,
    # and the interval is widened onto it.
    assert set(ours.bootstrap_distribution[:, 1]) == {0.3}
    assert ours.ci_high["recall@20"] - ours.ci_low["recall@20"] <= np.spacing(0.3)
    assert ours.ci_low["ndcg@100"] < ours.ci_high["ndcg@100"]


def test_same_seed_gives_identical_intervals_and_another_seed_other_draws():
    result = _result({"ndcg@100": _ranking_like(188, seed=2)}, np.arange(188))
    first, again = metric_level_intervals(result, random_state=3), metric_level_intervals(result, random_state=3)
    other = metric_level_intervals(result, random_state=4)
    assert first.to_frame().equals(again.to_frame())
    assert np.array_equal(first.bootstrap_distribution, again.bootstrap_distribution)
    assert not np.array_equal(first.bootstrap_distribution, other.bootstrap_distribution)


def test_a_metrics_interval_does_not_depend_on_the_other_metrics_evaluated_with_it():
    ndcg = _ranking_like(188, seed=8)
    alone = metric_level_intervals(_result({"ndcg@100": ndcg}, np.arange(188)))
    together = metric_level_intervals(_result({"recall@20": ndcg[::-1], "ndcg@100": ndcg}, np.arange(188)))
    assert (alone.ci_low["ndcg@100"], alone.ci_high["ndcg@100"]) == (
        together.ci_low["ndcg@100"],
        together.ci_high["ndcg@100"],
    )


def test_the_settings_say_how_the_intervals_were_made():
    ours = metric_level_intervals(
        _result({"ndcg@100": np.ones(3)}, [1, 2, 3]), confidence_level=0.9, n_resamples=99, random_state=7
    )
    settings = ours.settings()
    assert {k: settings[k] for k in ("confidence_level", "n_resamples", "random_state", "unit")} == {
        "confidence_level": 0.9,
        "n_resamples": 99,
        "random_state": 7,
        "unit": "user",
    }
    assert "percentile bootstrap" in settings["method"] and ours.bootstrap_distribution.shape == (99, 1)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("confidence_level", 1.0, "confidence_level: expected a number strictly between 0 and 1, found 1.0"),
        ("n_resamples", 0, "n_resamples: expected an integer in [1, 1,000,000], found 0"),
        ("random_state", -1, "random_state: expected an integer >= 0"),
    ],
)
def test_a_setting_out_of_range_is_refused_naming_it(setting, value, message):
    with pytest.raises(ValueError, match=re_escape(message)):
        metric_level_intervals(_result({"ndcg@100": np.ones(3)}, [1, 2, 3]), **{setting: value})


def test_a_result_without_per_user_values_is_refused():
    result = EvaluationResult(metrics={"ndcg@100": 0.5}, per_user=None, sample_ids=np.arange(3))
    with pytest.raises(ValueError, match="result: expected per-user values, found none"):
        metric_level_intervals(result)
    with pytest.raises(ValueError, match="result: expected an EvaluationResult"):
        metric_level_intervals({"ndcg@100": [0.5]})


def test_the_interval_metric_names_of_every_metric_at_the_largest_cutoff_fit_mlflows_key_limit():
    for name in METRIC_CLASSES:
        longest = mlflow_metric_name(f"{name}@{MAX_CUTOFF}")
        assert len(longest + CI_HIGH) <= MAX_KEY_LENGTH and len(longest + CI_LOW) <= MAX_KEY_LENGTH


def re_escape(text: str) -> str:
    import re

    return re.escape(text)
