"""Non-inferiority and equivalence against a margin: every test method checked against an independent computation
(statsmodels' TOST, scipy on the shifted differences, sign flips enumerated by hand), the decisions on constructed
per-user data, and the refusals."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.weightstats import ttost_paired

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report import report_string
from mlflow_recsys.stats import ComparisonReport, ComparisonSettings, compare_models

ALPHA = 0.05


def _results(base, cand) -> dict[str, EvaluationResult]:
    ids = np.arange(len(base))
    make = lambda v: EvaluationResult({"m": float(np.mean(v))}, {"m": np.asarray(v, float)}, ids, "same targets")  # noqa: E731
    return {"A": make(base), "B": make(cand)}


def _pair(n=400, shift=-0.004, sd=0.05, seed=1):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, n)
    return base, base + rng.normal(shift, sd, n)


def _row(base, cand, **settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_models(_results(base, cand), metrics="m", reference="A", **settings).comparisons[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("margin", [0.005, 0.01, 0.02])
def test_equivalence_by_t_is_statsmodels_ttost_paired(seed, margin):
    base, cand = _pair(seed=seed)
    row = _row(base, cand, hypothesis="equivalence", margin=margin, test_method="t")
    expected = ttost_paired(cand, base, -margin, margin)[0]
    assert row.p_value == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert row.direction == ("equivalent" if expected <= ALPHA else row.direction)


@pytest.mark.parametrize("margin", [0.002, 0.01])
def test_non_inferiority_by_t_is_ttest_rel_on_the_shifted_candidate(margin):
    base, cand = _pair()
    row = _row(base, cand, hypothesis="non-inferiority", margin=margin, test_method="t")
    expected = scipy.stats.ttest_rel(cand + margin, base, alternative="greater").pvalue
    assert row.p_value == pytest.approx(expected, rel=1e-9)
    assert row.alternative == "greater"


def test_non_inferiority_by_wilcoxon_and_sign_test_is_scipy_on_the_shifted_differences():
    base, cand = _pair(n=200)
    d = cand - base
    wilcoxon = _row(base, cand, hypothesis="non-inferiority", margin=0.01, test_method="wilcoxon")
    expected = scipy.stats.wilcoxon(d + 0.01, alternative="greater", method="approx", correction=False).pvalue
    assert wilcoxon.p_value == pytest.approx(expected, rel=1e-9)
    sign = _row(base, cand, hypothesis="non-inferiority", margin=0.01, test_method="sign")
    wins = int(np.count_nonzero(d + 0.01 > 0))
    assert sign.p_value == pytest.approx(scipy.stats.binomtest(wins, len(d), 0.5, alternative="greater").pvalue)


def test_equivalence_by_wilcoxon_is_the_larger_of_two_scipy_one_sided_tests():
    base, cand = _pair(n=150, shift=0.001, sd=0.02)
    d = cand - base
    row = _row(base, cand, hypothesis="equivalence", margin=0.006, test_method="wilcoxon")
    low = scipy.stats.wilcoxon(d + 0.006, alternative="greater", method="approx", correction=False).pvalue
    high = scipy.stats.wilcoxon(d - 0.006, alternative="less", method="approx", correction=False).pvalue
    assert row.p_value == pytest.approx(max(low, high), rel=1e-9)


def test_randomization_against_a_margin_enumerates_every_sign_flip_of_the_shifted_differences():
    d = np.array([0.03, -0.01, 0.02, -0.04, 0.05, 0.01, -0.02, 0.015])
    base = np.full(d.shape, 0.5)
    row = _row(base, base + d, hypothesis="non-inferiority", margin=0.01, n_resamples=9999)
    shifted = (base + d - base) + 0.01
    means = [np.mean(np.array(s) * shifted) for s in itertools.product((1, -1), repeat=len(d))]
    expected = np.mean(np.array(means) >= shifted.mean() - 1e-12)
    assert row.test_method == "randomization-exact"
    assert row.p_value == pytest.approx(expected)


def test_bootstrap_against_a_margin_reads_the_share_of_replicates_beyond_it():
    base, cand = _pair(n=300, shift=-0.002)
    row = _row(base, cand, hypothesis="non-inferiority", margin=0.006, test_method="bootstrap", n_resamples=4999)
    replicates = row.bootstrap_distribution
    assert row.p_value == (1 + np.count_nonzero(replicates <= -0.006)) / (4999 + 1)
    # its one-sided 95% bound is the lower end of the 90% interval: it clears the margin exactly when p <= alpha
    assert row.ci_low == pytest.approx(np.quantile(replicates, ALPHA))
    assert (row.ci_low > -0.006) == (row.p_value <= ALPHA)


def test_a_relative_margin_by_t_uses_the_delta_method_of_the_ratio_of_means():
    base, cand = _pair(n=250, shift=-0.003)
    row = _row(base, cand, hypothesis="non-inferiority", margin=0.02, relative_margin=True, test_method="t")
    n, mb, mc = len(base), base.mean(), cand.mean()
    ratio = mc / mb
    cov = np.cov(base, cand, ddof=1)  # var(R) by the delta method from the means' variances and covariance
    var_ratio = (cov[1, 1] - 2 * ratio * cov[0, 1] + ratio**2 * cov[0, 0]) / (n * mb**2)
    t = (ratio - 0.98) / math.sqrt(var_ratio)
    assert row.p_value == pytest.approx(scipy.stats.t(n - 1).sf(t), rel=1e-9)
    assert row.margin == pytest.approx(0.02 * mb)
    assert row.relative_margin == pytest.approx(0.02)
    assert row.margin_scale == "relative"


def test_a_relative_margin_by_wilcoxon_tests_the_candidate_against_a_fraction_of_the_reference():
    base, cand = _pair(n=200)
    row = _row(base, cand, hypothesis="non-inferiority", margin=0.03, relative_margin=True, test_method="wilcoxon")
    expected = scipy.stats.wilcoxon(cand - 0.97 * base, alternative="greater", method="approx", correction=False)
    assert row.p_value == pytest.approx(expected.pvalue, rel=1e-9)


def test_a_relative_margin_by_bootstrap_reads_the_interval_of_the_ratio_in_metric_units():
    base, cand = _pair(n=300)
    margin = {"hypothesis": "equivalence", "margin": 0.02, "relative_margin": True}
    row = _row(base, cand, **margin, test_method="bootstrap", n_resamples=999)
    mb = base.mean()
    # the ratio's interval, written as (R - 1) * mean of the reference, holds the observed difference
    assert row.ci_low <= row.difference <= row.ci_high
    assert row.ci_high - row.ci_low > 0
    assert row.direction in ("equivalent", "inconclusive")
    assert (row.direction == "equivalent") == (row.ci_low > -0.02 * mb and row.ci_high < 0.02 * mb)


@pytest.mark.parametrize(
    ("shift", "margin", "hypothesis", "expected"),
    [
        (0.0, 0.02, "non-inferiority", "non-inferior"),  # the interval (about +-0.005) clears -0.02
        (-0.06, 0.02, "non-inferiority", "inferior"),  # the whole interval lies below -0.02
        (-0.019, 0.02, "non-inferiority", "inconclusive"),  # the interval straddles -0.02
        (0.0, 0.02, "equivalence", "equivalent"),
        (0.06, 0.02, "equivalence", "not equivalent"),
        (0.019, 0.02, "equivalence", "inconclusive"),
    ],
)
@pytest.mark.parametrize("test_method", ["randomization", "bootstrap", "t", "wilcoxon"])
def test_each_decision_on_constructed_per_user_data(shift, margin, hypothesis, expected, test_method):
    # 400 users whose differences spread evenly and symmetrically about the shift (SD 0.05, SE 0.0025): the 90%
    # interval is the shift +- 0.0041, so -0.019 straddles a margin of 0.02 and 0 clears it
    base = np.full(400, 0.5)
    cand = base + shift + np.linspace(-0.0866, 0.0866, 400)
    row = _row(base, cand, hypothesis=hypothesis, margin=margin, test_method=test_method, n_resamples=1999)
    assert row.difference == pytest.approx(shift)
    assert row.direction == expected


def test_the_words_follow_the_numbers():
    base = np.full(400, 0.5)
    jitter = np.where(np.arange(400) % 2 == 0, 0.05, -0.05)
    shown = _results(base, base + jitter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ni = compare_models(shown, metrics="m", reference="A", hypothesis="non-inferiority", margin=0.005)
        open_ = compare_models(shown, metrics="m", reference="A", hypothesis="non-inferiority", margin=0.001)
        eq = compare_models(shown, metrics="m", reference="A", hypothesis="equivalence", margin=0.005)
    assert "non-inferior within 0.005" in str(ni)
    assert "non-inferior within 0.005" in ni.results_text("m", "B")
    assert "not shown non-inferior" in report_string(open_)
    assert "equivalent within \u00b10.005" in str(eq)
    assert "delta = 0.005 on m (1.00% of the reference's mean)" in str(eq)
    assert "90% (each end a one-sided 95% bound)" in ni.methods_text()
    assert "Blackwelder" in ni.methods_text() and "Schuirmann" in eq.methods_text()


def test_a_margin_report_round_trips_through_save_and_load(tmp_path):
    base, cand = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare_models(
            _results(base, cand), metrics="m", reference="A", hypothesis="equivalence", margin=0.01, n_resamples=999
        )
    loaded = ComparisonReport.load(report.save(tmp_path / "saved"))
    assert loaded.to_frame().equals(report.to_frame())
    assert loaded.comparisons[0].hypothesis == "equivalence" and loaded.comparisons[0].margin == 0.01


def test_same_seed_same_numbers_against_a_margin():
    base, cand = _pair()
    first = _row(base, cand, hypothesis="non-inferiority", margin=0.003, n_resamples=999, random_state=7)
    again = _row(base, cand, hypothesis="non-inferiority", margin=0.003, n_resamples=999, random_state=7)
    assert (first.p_value, first.ci_low, first.ci_high) == (again.p_value, again.ci_low, again.ci_high)


@pytest.mark.parametrize(
    ("settings", "named", "found"),
    [
        ({"hypothesis": "non-inferiority", "margin": 0}, "margin", "0"),
        ({"hypothesis": "non-inferiority", "margin": -0.01}, "margin", "-0.01"),
        ({"hypothesis": "non-inferiority", "margin": math.inf}, "margin", "inf"),
        ({"hypothesis": "non-inferiority", "margin": math.nan}, "margin", "nan"),
        ({"hypothesis": "equivalence", "margin": 1.0, "relative_margin": True}, "margin", "1.0"),
        ({"hypothesis": "non-inferiority"}, "margin", "None"),
        ({"hypothesis": "superiority", "margin": 0.01}, "margin", "0.01"),
        ({"hypothesis": "non-inferiority", "margin": 0.01, "reference": None}, "reference", "None"),
        ({"hypothesis": "non-inferiority", "margin": 0.01, "alternative": "greater"}, "alternative", "greater"),
        (
            {"hypothesis": "equivalence", "margin": 0.1, "relative_margin": True, "interval_method": "bca"},
            "interval_method",
            "bca",
        ),
        ({"hypothesis": "launch"}, "hypothesis", "launch"),
        ({"relative_margin": True}, "relative_margin", "True"),
    ],
)
def test_bad_margins_are_refused_naming_the_setting(settings, named, found):
    with pytest.raises(ValueError, match=rf"^{named}: expected .*found .*{found}"):
        ComparisonSettings(**{"reference": "A", **settings})


def test_a_relative_margin_of_a_reference_whose_mean_is_zero_is_refused():
    base = np.zeros(50)
    with pytest.raises(ValueError, match=r"^relative_margin: expected a positive mean of 'm' for the reference 'A'"):
        _row(base, base + 0.1, hypothesis="non-inferiority", margin=0.1, relative_margin=True)


def test_the_study_tables_legend_and_the_forest_plot_name_the_margin(tmp_path):
    from mlflow_recsys.report import forest_plot
    from mlflow_recsys.report._study import table_legend

    settings = ComparisonSettings(reference="A", hypothesis="non-inferiority", margin=0.02, relative_margin=True)
    legend = table_legend(settings)
    assert "non-inferiority (H1: difference > -delta), delta = 0.02 of the reference's mean" in legend
    assert legend.endswith("test for a difference (two-sided), not against the margin.")
    base, cand = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare_models(_results(base, cand), metrics="m", reference="A", hypothesis="equivalence", margin=0.01)
    forest_plot(report, tmp_path / "forest.png")
    assert (tmp_path / "forest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_inconclusive_row_whose_interval_would_pass_says_so():
    import dataclasses

    from mlflow_recsys.report._rows import decision_words

    base, cand = _pair()
    row = _row(base, cand, hypothesis="non-inferiority", margin=0.01, n_resamples=999)
    split = dataclasses.replace(row, direction="inconclusive", significant=False, ci_low=-0.009, ci_high=0.002)
    assert decision_words(split) == (
        "not shown non-inferior (the interval clears -0.01, but the test's p is above alpha)"
    )
    assert decision_words(dataclasses.replace(split, ci_low=-0.011)) == "not shown non-inferior"
    eq = dataclasses.replace(split, hypothesis="equivalence")
    assert decision_words(eq).startswith("not shown equivalent (the interval lies within \u00b10.01")


def test_a_margin_needs_a_level_above_one_half():
    with pytest.raises(ValueError, match=r"^confidence_level: expected a level above 0.5 with hypothesis"):
        ComparisonSettings(reference="A", hypothesis="non-inferiority", margin=0.01, confidence_level=0.4)


def test_a_relative_margins_interval_is_named_as_the_ratios():
    base, cand = _pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare_models(
            _results(base, cand),
            metrics="m",
            reference="A",
            hypothesis="non-inferiority",
            margin=0.02,
            relative_margin=True,
            n_resamples=999,
        )
    assert "bootstrap interval of the ratio of means (candidate / reference), written in metric units" in str(report)
