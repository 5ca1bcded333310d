"""Minimum detectable effect and required users: the normal-approximation power formulas (Cohen 1988)."""

import math
import warnings

import numpy as np
import pytest
import scipy.stats

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._text import display_frame
from mlflow_recsys.stats import (
    COLUMNS,
    ComparisonWarning,
    compare_models,
    minimum_detectable_effect,
    required_users,
)
from simulated import result

# Standard normal quantiles as printed in textbook tables: z_{0.975}, z_{0.95}, z_{0.8}, z_{0.9}.
Z975, Z95, Z80, Z90 = 1.959964, 1.644854, 0.841621, 1.281552


def test_worked_example_two_sided():
    # (1.959964 + 0.841621) * 0.1 / sqrt(188) = 2.801585 * 0.1 / 13.711309 = 0.020433
    assert minimum_detectable_effect(0.1, 188, 0.05) == pytest.approx(0.0204327, abs=1e-6)
    assert minimum_detectable_effect(0.1, 188, 0.05) == pytest.approx((Z975 + Z80) * 0.1 / math.sqrt(188), rel=1e-6)


def test_worked_example_matches_scipy_quantiles():
    z = scipy.stats.norm.ppf(1 - 0.05 / 2) + scipy.stats.norm.ppf(0.8)
    assert minimum_detectable_effect(0.1, 188, 0.05) == pytest.approx(z * 0.1 / np.sqrt(188), rel=1e-12)


def test_one_sided_uses_the_full_alpha_in_one_tail():
    for alternative in ("greater", "less"):
        assert minimum_detectable_effect(0.1, 188, 0.05, alternative=alternative) == pytest.approx(
            (Z95 + Z80) * 0.1 / math.sqrt(188), rel=1e-6
        )
    assert minimum_detectable_effect(0.1, 188, 0.05, alternative="greater") < minimum_detectable_effect(0.1, 188, 0.05)


def test_power_and_alpha_enter_as_quantiles():
    assert minimum_detectable_effect(2.0, 400, 0.05, power=0.9) == pytest.approx((Z975 + Z90) * 2.0 / 20, rel=1e-6)
    # alpha/J under Bonferroni: J = 2 gives z_{1 - 0.0125} = 2.241403
    assert minimum_detectable_effect(1.0, 100, 0.025) == pytest.approx((2.241403 + Z80) / 10, rel=1e-6)


def test_mde_not_estimable_without_spread_is_nan():
    # Differences that are all equal give the formula no SD to scale: no effect size is "detectable", not 0.
    assert math.isnan(minimum_detectable_effect(0.0, 10, 0.05))
    assert required_users(0.01, 0.0) == 1


def test_required_users_half_sd_effect():
    # d = effect / sd = 0.5, two-sided 0.05, 80% power: (2.801585 / 0.5)^2 = 31.4 -> 32 (normal approximation)
    assert required_users(0.05, 0.1) == 32
    # one-sided: (2.486475 / 0.5)^2 = 24.7 -> 25
    assert required_users(0.05, 0.1, alternative="greater") == 25


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize("effect", [0.003, 0.01, 0.0204, 0.07])
def test_required_users_is_the_inverse(effect, alternative):
    sd, alpha = 0.1, 0.01
    n = required_users(effect, sd, alpha, alternative=alternative)
    # n users detect the effect; one user fewer does not (the smallest such n).
    assert minimum_detectable_effect(sd, n, alpha, alternative=alternative) <= effect
    if n > 2:
        assert minimum_detectable_effect(sd, n - 1, alpha, alternative=alternative) > effect


def test_required_users_recovers_n_from_the_mde():
    for n in (2, 10, 188, 5000):
        assert required_users(minimum_detectable_effect(0.1, n, 0.05), 0.1) == n


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(sd=-0.1), "sd"),
        (dict(sd=float("nan")), "sd"),
        (dict(sd=float("inf")), "sd"),
        (dict(sd="0.1"), "sd"),
        (dict(n=1), "n"),
        (dict(n=10.0), "n"),
        (dict(n=True), "n"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=1.0), "alpha"),
        (dict(power=0.0), "power"),
        (dict(power=1.0), "power"),
        (dict(alternative="two_sided"), "alternative"),
    ],
)
def test_minimum_detectable_effect_refuses(kwargs, name):
    args = dict(sd=0.1, n=188, alpha=0.05) | kwargs
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        minimum_detectable_effect(**args)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(effect=0.0), "effect"),
        (dict(effect=-0.01), "effect"),
        (dict(effect=float("nan")), "effect"),
        (dict(sd=-1.0), "sd"),
        (dict(alpha=1.5), "alpha"),
        (dict(power=-0.2), "power"),
        (dict(alternative="both"), "alternative"),
    ],
)
def test_required_users_refuses(kwargs, name):
    args = dict(effect=0.01, sd=0.1) | kwargs
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        required_users(**args)


def _results(rng, n=150):
    base = {"a": rng.random(n), "b": rng.random(n)}
    strong = {"a": base["a"] + rng.normal(0.1, 0.1, n), "b": base["b"] + rng.normal(0.0, 0.2, n)}
    return {"base": result(base), "cand": result(strong)}


@pytest.fixture(scope="module")
def results():
    return _results(np.random.default_rng(3))


@pytest.mark.parametrize(
    "correction, alternative, level, z_alpha",
    [
        ("holm", "two-sided", 0.05 / 2, scipy.stats.norm.isf(0.05 / 4)),
        ("bonferroni", "two-sided", 0.05 / 2, scipy.stats.norm.isf(0.05 / 4)),
        (None, "two-sided", 0.05, scipy.stats.norm.isf(0.025)),
        ("holm", "greater", 0.05 / 2, scipy.stats.norm.isf(0.05 / 2)),
    ],
)
def test_mde_column_is_the_formula_at_the_adjusted_level(results, correction, alternative, level, z_alpha):
    report = compare_models(
        results,
        metrics=["a", "b"],
        reference="base",
        correction=correction,
        alternative=alternative,
        n_resamples=999,
    )
    frame = report.to_frame()
    assert list(frame.columns) == list(COLUMNS)
    assert COLUMNS.index("mde") == COLUMNS.index("adjusted_p_value") + 1
    for c, mde in zip(report.comparisons, frame["mde"], strict=True):
        d = c.unit_differences
        sd = math.sqrt(sum((x - d.mean()) ** 2 for x in d) / (len(d) - 1))
        expected = (z_alpha + scipy.stats.norm.ppf(0.8)) * sd / math.sqrt(len(d))
        assert c.mde == mde == pytest.approx(expected, rel=1e-9)
        assert c.mde == pytest.approx(minimum_detectable_effect(sd, c.n_units, level, alternative=alternative))
    assert display_frame(report)["mde"].tolist() == [f"{c.mde:.6f}" for c in report.comparisons]


def test_mde_counts_users_not_rows():
    rng = np.random.default_rng(5)
    ids = np.repeat(np.arange(40), 3)
    base = rng.random(120)
    cand = base + rng.normal(0.0, 0.1, 120)
    report = compare_models(
        {
            "base": EvaluationResult.from_per_user({"m": base}, sample_ids=ids, targets_fingerprint="x"),
            "cand": EvaluationResult.from_per_user({"m": cand}, sample_ids=ids, targets_fingerprint="x"),
        },
        metrics="m",
        n_resamples=999,
    )
    c = report.comparisons[0]
    assert c.n_units == 40 and c.unit_differences.shape == (40,)
    assert c.mde == pytest.approx(minimum_detectable_effect(float(np.std(c.unit_differences, ddof=1)), 40, 0.05))


def test_sentence_names_the_mde_only_when_not_significant(results):
    report = compare_models(results, metrics=["a", "b"], reference="base", n_resamples=999)
    strong, null = report.get("a", "cand"), report.get("b", "cand")
    assert strong.significant and not null.significant
    inconclusive = report.results_text("b", "cand")
    assert (
        f"not significant; with {null.n_units:,} users this comparison would detect a true difference of "
        f"{null.mde:.4f} with 80% power" in inconclusive
    )
    assert "would detect" not in report.results_text("a", "cand")
    methods = report.methods_text()
    assert "minimum detectable effect" in methods and "Cohen, 1988" in methods and "0.05/2" in methods


def test_methods_text_states_the_level_of_each_correction(results):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        texts = {
            corr: compare_models(
                results, metrics=["a", "b"], reference="base", correction=corr, n_resamples=99
            ).methods_text()
            for corr in ("holm", "bonferroni", None)
        }
    assert "first step of Holm's procedure" in texts["holm"]
    assert "Bonferroni level alpha/J = 0.05/2" in texts["bonferroni"]
    assert "test at alpha = 0.05 would detect" in texts[None]


def test_mde_absent_without_spread_is_said_in_words():
    # Two identical runs: every per-user difference is 0, so the SD is 0 and no effect size can be "detected".
    values = np.random.default_rng(7).random(50)
    same = {
        "EASE": EvaluationResult.from_per_user({"ndcg@100": values}, targets_fingerprint="x"),
        "copy": EvaluationResult.from_per_user({"ndcg@100": values.copy()}, targets_fingerprint="x"),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        report = compare_models(same, metrics="ndcg@100", reference="EASE", n_resamples=999)
    c = report.comparisons[0]
    assert float(np.std(c.unit_differences, ddof=1)) == 0.0 and math.isnan(c.mde)
    assert report.to_frame()["mde"].isna().all()
    sentence = report.results_text("ndcg@100", "copy")
    assert "would detect" not in sentence and "0.0000 with 80% power" not in sentence
    assert "not significant; no minimum detectable effect: the per-user differences have no spread" in sentence
    note = "mde n/a (1 of 1 hypotheses): the per-user differences have no spread"
    assert display_frame(report)["mde"].tolist() == ["n/a"]
    for surface in (str(report), report.to_markdown(), report.methods_text()):
        assert note in surface, surface
    assert "mde n/a" in report.to_latex()
    from mlflow_recsys.report._html import legend

    assert note in legend(report)
