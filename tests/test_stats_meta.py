"""The random-effects meta-analysis over datasets, against statsmodels' ``combine_effects`` and formulas by hand."""

import math

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.meta_analysis import combine_effects

from mlflow_recsys.stats import META_COLUMNS, paired_effect, random_effects

# statsmodels' own notes on its per-dataset intervals and its HKSJ row when tau2 < 0; neither value is compared here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`use_t=True` requires `nobs`"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning"),
]


def _cases():
    rng = np.random.default_rng(3)
    yield np.array([0.1, 0.3, 0.05, 0.2, 0.4]), np.sqrt([0.01, 0.02, 0.015, 0.01, 0.03])  # heterogeneous
    yield np.array([0.1, 0.11, 0.09]), np.array([0.05, 0.06, 0.04])  # tau2 truncated at 0 (Q < k - 1)
    yield np.array([0.02, -0.01]), np.array([0.01, 0.02])  # two datasets: no prediction interval
    for k in (4, 6, 12):
        yield rng.normal(0.05, 0.03, k), rng.uniform(0.005, 0.03, k)


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: f"k{len(c[0])}")
def test_the_pooled_effect_tau2_and_hksj_interval_agree_with_statsmodels(case):
    y, se = case
    ours = random_effects(list(y), list(se), confidence_level=0.9)
    theirs = combine_effects(y, se**2, method_re="dl", alpha=0.1, use_t=True)
    # statsmodels leaves DerSimonian-Laird's tau2 negative when Q < k - 1; truncated at 0, as the estimator is defined,
    # the random-effects model is the fixed-effect one, whose HKSJ row statsmodels also gives.
    truncated = theirs.tau2 < 0
    hksj = theirs.summary_frame(alpha=0.1).loc["fixed effect wls" if truncated else "random effect wls"]
    assert ours.effect == pytest.approx(hksj["eff"], rel=1e-12)
    assert ours.tau2 == (0.0 if truncated else pytest.approx(theirs.tau2, rel=1e-12))
    assert ours.q == pytest.approx(theirs.q, rel=1e-12)
    assert ours.i2 == pytest.approx(max(0.0, theirs.i2), abs=1e-12)
    assert ours.standard_error == pytest.approx(hksj["sd_eff"], rel=1e-12)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((hksj["ci_low"], hksj["ci_upp"]), rel=1e-10)
    assert ours.weights == pytest.approx(theirs.weights_rel_fe if truncated else theirs.weights_rel_re, rel=1e-12)
    t = ours.effect / ours.standard_error
    assert ours.p_value == pytest.approx(2 * scipy.stats.t.sf(abs(t), len(y) - 1), rel=1e-12)


def test_the_prediction_interval_is_higgins_thompson_spiegelhalter():
    y, se = next(_cases())
    m = random_effects(dict(zip("abcde", y, strict=True)), dict(zip("abcde", se, strict=True)))
    half = scipy.stats.t.ppf(0.975, 3) * math.sqrt(m.tau2 + m.standard_error**2)  # k - 2 = 3 df
    assert (m.prediction_low, m.prediction_high) == pytest.approx((m.effect - half, m.effect + half), rel=1e-12)
    assert m.prediction_low < m.ci_low and m.prediction_high > m.ci_high  # tau2 > 0 widens it
    assert math.isnan(random_effects([0.1, 0.2], [0.1, 0.1]).prediction_low)


def test_the_frame_has_a_row_per_dataset_and_the_pooled_row():
    m = random_effects(
        {"ml-100k": 0.02, "goodbooks": 0.05, "netflix": 0.01}, {"ml-100k": 0.01, "goodbooks": 0.02, "netflix": 0.005}
    )
    frame = m.to_frame()
    assert tuple(frame.columns) == META_COLUMNS
    assert frame["dataset"].tolist() == ["ml-100k", "goodbooks", "netflix", "pooled"]
    row = frame.iloc[1]
    assert (row.ci_low, row.ci_high) == pytest.approx((0.05 - 1.959963985 * 0.02, 0.05 + 1.959963985 * 0.02))
    assert frame["weight"].iloc[:3].sum() == pytest.approx(1.0)


def test_a_difference_effect_is_the_mean_paired_difference_and_its_standard_error():
    rng = np.random.default_rng(0)
    b = rng.uniform(0, 1, 50)
    c = b + rng.normal(0.03, 0.1, 50)
    effect, se = paired_effect(c, b)
    assert effect == pytest.approx(np.mean(c - b))
    assert se == pytest.approx(scipy.stats.sem(c - b))


def test_a_log_ratio_standard_error_is_that_of_the_mean_linearised_difference():
    # The delta method's variance of log(mean c / mean b) is the variance of the mean of c_i / mean(c) - b_i / mean(b).
    rng = np.random.default_rng(1)
    b = rng.uniform(0.1, 0.9, 80)
    c = np.clip(b * 1.1 + rng.normal(0, 0.05, 80), 0, 1)
    effect, se = paired_effect(c, b, "log-ratio")
    assert effect == pytest.approx(math.log(c.mean() / b.mean()))
    assert se == pytest.approx(scipy.stats.sem(c / c.mean() - b / b.mean()), rel=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: random_effects([0.1], [0.1]), "effects: expected at least 2 datasets"),
        (lambda: random_effects([0.1, 0.2], [0.1, 0.0]), "standard_errors: expected positive values"),
        (lambda: random_effects([0.1, 0.2], [0.1]), "standard_errors: expected one per effect"),
        (lambda: random_effects({"pooled": 0.1, "b": 0.2}, {"pooled": 0.1, "b": 0.1}), "effects: 'pooled' names the"),
        (lambda: random_effects({"a": 0.1, "b": 0.2}, {"a": 0.1, "c": 0.1}), "standard_errors: expected one per"),
        (lambda: random_effects([0.1, float("nan")], [0.1, 0.1]), "effects: expected a 1-D sequence of finite"),
        (lambda: random_effects([0.1, 0.2], [0.1, 0.1], confidence_level=1), "confidence_level: expected"),
        (lambda: random_effects([0.1, 0.2], [0.1, 0.1], scale="ratio"), "scale: expected"),
        (lambda: paired_effect(np.ones(3), np.ones(4)), "baseline: expected 3 users as in candidate, found 4"),
        (lambda: paired_effect(np.ones(1), np.ones(1)), "candidate: expected a 1-D array of at least 2"),
        (lambda: paired_effect(np.zeros(3), np.ones(3), "log-ratio"), "scale: a log ratio needs positive means"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
