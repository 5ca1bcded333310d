"""Win/tie/loss counts, the Wilcoxon signed-rank test and the BCa interval, against hand counts and scipy."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
import scipy.stats

from mlflow_recsys.report._text import display_frame
from mlflow_recsys.stats import COLUMNS, ComparisonWarning, compare_models, compare_pair
from mlflow_recsys.stats._inference import WILCOXON_EXACT_MAX, _bca_interval, wilcoxon_method
from mlflow_recsys.stats._settings import ALTERNATIVES, ZERO_METHODS
from mlflow_recsys.stats._warnings import IntervalFallbackWarning
from simulated import result


def skewed_pair(seed, n):
    """Per-user scores like MRR: skewed towards 0, 40% of users tied; the candidate slightly better."""
    rng = np.random.default_rng(seed)
    a = rng.beta(0.4, 2.0, n)
    b = rng.beta(0.5, 2.0, n)
    tied = rng.random(n) < 0.4
    b[tied] = a[tied]
    return a, b


# -- wins, ties, losses -----------------------------------------------------------------


def test_win_tie_loss_counts_users_after_averaging_their_rows():
    # Rows per user (ids): 1 1 2 3 3 4 5. By hand, user means of candidate - baseline:
    # user 1: (0.5 + 0.5)/2 - (0.25 + 0.75)/2 = 0 (tie, though both rows differ); user 2: +0.5 (win);
    # user 3: (0 + 0.25)/2 - (0.5 + 0.5)/2 < 0 (loss); user 4: 0 (tie); user 5: +0.125 (win).
    ids = [1, 1, 2, 3, 3, 4, 5]
    base = [0.25, 0.75, 0.0, 0.5, 0.5, 1.0, 0.5]
    cand = [0.5, 0.5, 0.5, 0.0, 0.25, 1.0, 0.625]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        report = compare_models({"A": result(base, ids), "B": result(cand, ids)}, metrics="m", reference="A")
    c = report.comparisons[0]
    assert (c.wins, c.ties, c.losses) == (2, 2, 1)
    assert c.wins + c.ties + c.losses == c.n_units == 5 and c.ties == c.n_units - c.n_nonzero
    frame = report.to_frame()
    assert list(frame.columns[frame.columns.get_loc("tie_rate") + 1 :][:3]) == ["wins", "ties", "losses"]
    assert list(frame.columns) == list(COLUMNS)
    assert frame[["wins", "ties", "losses"]].to_numpy().tolist() == [[2, 2, 1]]
    assert all(np.issubdtype(frame[k].dtype, np.integer) for k in ("wins", "ties", "losses"))
    assert display_frame(report)["W/T/L"].tolist() == ["2/2/1"]
    assert "| 2/2/1 " in report.to_markdown()


# -- Wilcoxon signed-rank test ----------------------------------------------------------


@pytest.mark.parametrize("alternative", ALTERNATIVES)
@pytest.mark.parametrize("zero_method", ZERO_METHODS)
@pytest.mark.parametrize(
    "case",
    ["small-exact", "zeros-and-ties", "skewed-large"],
)
def test_wilcoxon_p_value_equals_scipy_for_every_alternative_and_zero_method(case, alternative, zero_method):
    rng = np.random.default_rng(5)
    if case == "small-exact":  # 12 distinct non-zero differences: scipy's exact null
        base, cand = rng.random(12), rng.random(12)
    elif case == "zeros-and-ties":  # rounded scores: equal users and tied magnitudes, the normal approximation
        base, cand = np.round(rng.random(80), 1), np.round(rng.random(80), 1)
    else:
        base, cand = skewed_pair(6, 700)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        c = compare_pair(
            result(base),
            result(cand),
            metric="m",
            test_method="wilcoxon",
            zero_method=zero_method,
            alternative=alternative,
            n_resamples=99,
        )
        method = "exact" if case == "small-exact" else "approx"
        expected = scipy.stats.wilcoxon(
            cand - base, zero_method=zero_method, alternative=alternative, method=method, correction=False
        ).pvalue
    assert c.p_value == expected
    assert c.test_method == ("wilcoxon-exact" if case == "small-exact" else "wilcoxon")
    assert c.zero_method == zero_method and c.null_distribution is None


def test_wilcoxon_and_randomization_disagree_when_rare_large_wins_outweigh_many_small_losses():
    # 80 users lose 0.01, 20 gain 0.5: the mean difference is +0.092, but the wins hold the 20 largest ranks
    # (81..100, sum 1810) against 3240 for the losses, so the signed ranks point the other way.
    d = np.r_[np.full(80, -0.01), np.full(20, 0.5)]
    base = np.full(100, 0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        mean_test = compare_pair(result(base), result(base + d), metric="m", n_resamples=999)
        rank_less = compare_pair(result(base), result(base + d), metric="m", test_method="wilcoxon", alternative="less")
    assert mean_test.difference > 0 and mean_test.p_value < 0.01
    assert rank_less.p_value < 0.05  # the rank test favours the baseline
    assert (mean_test.wins, mean_test.ties, mean_test.losses) == (20, 0, 80)


def test_wilcoxon_is_named_with_its_zero_method_in_the_methods_text_and_results_sentence():
    base, cand = skewed_pair(3, 200)
    report = compare_models(
        {"A": result(base), "B": result(cand)}, metrics="m", reference="A", test_method="wilcoxon", zero_method="pratt"
    )
    text = report.methods_text()
    assert "Wilcoxon signed-rank test" in text and "(Wilcoxon, 1945)" in text and "(Pratt, 1959)" in text
    assert "Monte Carlo p-value" not in text
    assert "Wilcoxon signed-rank test (normal approximation), p = " in report.results_text("m", "B")
    # zero_method belongs to the Wilcoxon test only.
    assert compare_pair(result(base), result(cand), metric="m", zero_method="zsplit").zero_method is None


# -- BCa interval -----------------------------------------------------------------------


def bca_by_definition(replicates, d, alpha, alternative):
    """BCa ends from an explicit leave-one-out loop (Efron 1987; Efron & Tibshirani 1993, ch. 14)."""
    n = d.shape[0]
    estimate = d.mean()
    jack = np.array([np.delete(d, i).mean() for i in range(n)])
    dev = jack.mean() - jack
    a = (dev**3).sum() / (6 * ((dev**2).sum()) ** 1.5)
    z0 = scipy.stats.norm.ppf(np.mean(replicates < estimate) + 0.5 * np.mean(replicates == estimate))

    def end(q):
        z = z0 + scipy.stats.norm.ppf(q)
        return np.percentile(replicates, 100 * scipy.stats.norm.cdf(z0 + z / (1 - a * z)))

    if alternative == "two-sided":
        return end(alpha / 2), end(1 - alpha / 2)
    if alternative == "greater":
        return end(alpha), np.inf
    return -np.inf, end(1 - alpha)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_bca_ends_equal_the_definition_with_an_explicit_jackknife(alternative):
    base, cand = skewed_pair(8, 300)
    c = compare_pair(
        result(base),
        result(cand),
        metric="m",
        interval_method="bca",
        alternative=alternative,
        n_resamples=4999,
        test_method="t",
    )
    expected = bca_by_definition(c.bootstrap_distribution, c.unit_differences, 0.05, alternative)
    assert c.interval_method == "bca"
    np.testing.assert_allclose([c.ci_low, c.ci_high], expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_bca_agrees_with_scipy_bootstrap_within_monte_carlo_error(alternative):
    # Both draw B = 20,000 replicates of their own. An end's Monte Carlo s.d. is about sqrt(q(1-q)/B) /
    # density at the quantile: with the bootstrap distribution near normal with s.d. se, 0.019 se at q = 0.025
    # and 0.026 se at q = 0.01 (BCa levels move towards the skewed side), so the difference of two independent
    # ends has s.d. at most ~0.037 se. A tolerance of 0.15 se is four of those s.d.; a wrong acceleration or bias
    # correction moves the skewed end of these data by more than 0.2 se.
    base, cand = skewed_pair(9, 400)
    b = 20_000
    c = compare_pair(
        result(base),
        result(cand),
        metric="m",
        interval_method="bca",
        alternative=alternative,
        n_resamples=b,
        test_method="t",
    )
    ref = scipy.stats.bootstrap(
        (cand - base,),
        np.mean,
        method="BCa",
        n_resamples=b,
        alternative=alternative,
        random_state=np.random.default_rng(1),
    ).confidence_interval
    se = c.bootstrap_standard_error
    assert abs(c.ci_low - ref.low) <= 0.15 * se or (np.isinf(c.ci_low) and np.isinf(ref.low))
    assert abs(c.ci_high - ref.high) <= 0.15 * se or (np.isinf(c.ci_high) and np.isinf(ref.high))
    assert c.ci_low <= c.difference <= c.ci_high


def test_one_sided_bca_bound_is_the_end_of_the_two_sided_interval_at_twice_alpha():
    base, cand = skewed_pair(10, 250)
    kw = dict(metric="m", interval_method="bca", n_resamples=1999, test_method="t")
    two = compare_pair(result(base), result(cand), confidence_level=0.90, **kw)
    greater = compare_pair(result(base), result(cand), alternative="greater", **kw)
    less = compare_pair(result(base), result(cand), alternative="less", **kw)
    # Same replicates; 1 - 0.90 is 0.0999... in floating point, hence the relative tolerance.
    assert greater.ci_low == pytest.approx(two.ci_low, rel=1e-12) and greater.ci_high == np.inf
    assert less.ci_high == pytest.approx(two.ci_high, rel=1e-12) and less.ci_low == -np.inf


def test_bca_with_every_replicate_on_one_side_falls_back_to_the_percentile_interval():
    # One replicate that differs from the estimate: the share below it is 0 or 1, so z0 is infinite.
    base, cand = np.zeros(7), np.arange(7.0) ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        for seed in range(20):
            c = compare_pair(
                result(base),
                result(cand),
                metric="m",
                interval_method="bca",
                n_resamples=1,
                random_state=seed,
                test_method="t",
            )
            if c.bootstrap_distribution[0] != c.difference:
                break
        else:  # pragma: no cover
            pytest.fail("no seed gave a replicate away from the estimate")
        plain = compare_pair(result(base), result(cand), metric="m", n_resamples=1, random_state=seed, test_method="t")
        with pytest.warns(IntervalFallbackWarning, match="BCa bias correction is infinite"):
            compare_pair(
                result(base),
                result(cand),
                metric="m",
                interval_method="bca",
                n_resamples=1,
                random_state=seed,
                test_method="t",
            )
    assert c.interval_method == "percentile"
    assert (c.ci_low, c.ci_high) == (plain.ci_low, plain.ci_high)
    # Beside a row that kept its BCa interval, the methods text says how many fell back.
    a, b = skewed_pair(12, 100)
    report = compare_models(
        {"A": result(a), "B": result(b), "C": result(b[::-1])},
        metrics="m",
        reference="A",
        interval_method="bca",
        n_resamples=999,
    )
    fell = dataclasses.replace(report.comparisons[1], interval_method="percentile")
    mixed = dataclasses.replace(report, comparisons=(report.comparisons[0], fell))
    assert "BCa" in report.methods_text() and "reported instead" not in report.methods_text()
    assert "for 1 of 2 hypotheses every replicate fell on one side" in mixed.methods_text()


def test_bca_of_a_constant_difference_is_the_point_interval():
    base = np.linspace(0, 0.5, 40)
    c = compare_pair(result(base), result(base + 0.125), metric="m", interval_method="bca", n_resamples=99)
    assert (c.ci_low, c.ci_high, c.interval_method) == (0.125, 0.125, "bca")


def test_bca_acceleration_closed_form_matches_the_explicit_jackknife():
    d = skewed_pair(11, 60)[1] - skewed_pair(11, 60)[0]
    replicates = np.sort(np.random.default_rng(0).choice(d, (999, d.shape[0])).mean(axis=1))
    got = _bca_interval(replicates, d, float(d.mean()), 0.05, "two-sided")
    np.testing.assert_allclose(got, bca_by_definition(replicates, d, 0.05, "two-sided"), rtol=1e-10)


# -- the Wilcoxon method is the package's rule, checked against independent computations ---------------------


def _signed_rank_sum(d: np.ndarray) -> float:
    """T+: the sum of the (mid)ranks of |d| over the positive differences."""
    return float(scipy.stats.rankdata(np.abs(d))[d > 0].sum())


def _exact_p_by_enumeration(d: np.ndarray, alternative: str) -> float:
    """The exact p-value of T+ from all 2**n sign patterns of the ranks 1..n (no zeros, no ties)."""
    n = d.shape[0]
    ranks = np.arange(1, n + 1)
    signs = (np.arange(2**n)[:, None] >> np.arange(n)) & 1  # every subset of ranks taken as positive
    null = signs @ ranks
    t = _signed_rank_sum(d)
    greater, less = np.mean(null >= t), np.mean(null <= t)
    return {"greater": greater, "less": less, "two-sided": min(1.0, 2 * min(greater, less))}[alternative]


def _normal_p_by_hand(d: np.ndarray, alternative: str) -> float:
    """Zeros dropped (zero_method="wilcox"), midranks, variance less sum(t^3 - t)/48 for ties, no continuity."""
    d = d[d != 0]
    n = d.shape[0]
    _, counts = np.unique(np.abs(d), return_counts=True)
    mean = n * (n + 1) / 4
    var = n * (n + 1) * (2 * n + 1) / 24 - np.sum(counts**3 - counts) / 48
    z = (_signed_rank_sum(d) - mean) / math.sqrt(var)
    return {
        "greater": scipy.stats.norm.sf(z),
        "less": scipy.stats.norm.cdf(z),
        "two-sided": 2 * scipy.stats.norm.sf(abs(z)),
    }[alternative]


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_wilcoxon_method_is_chosen_by_the_package_not_the_scipy_version(alternative):
    # The issue's case: 7 users with a zero and tied magnitudes. SciPy 1.17's "auto" gives an exact permutation
    # p-value (0.03125) where SciPy 1.11 gave the normal approximation; the package passes method= itself.
    with_ties = np.array([0.0, 0.1, 0.1, 0.2, 0.3, 0.3, 0.4])
    distinct = np.array([0.05, -0.11, 0.32, 0.47, -0.02, 0.61, 0.23, 0.9, 0.15, -0.38])
    assert wilcoxon_method(with_ties) == "approx" and wilcoxon_method(distinct) == "exact"
    assert wilcoxon_method(np.linspace(0.01, 1, WILCOXON_EXACT_MAX + 1)) == "approx"  # too many for exact
    base = np.full(10, 0.5)
    approx = compare_pair(
        result(base[:7]), result(base[:7] + with_ties), metric="m", test_method="wilcoxon", alternative=alternative
    )
    exact = compare_pair(
        result(base), result(base + distinct), metric="m", test_method="wilcoxon", alternative=alternative
    )
    assert approx.test_method == "wilcoxon" and exact.test_method == "wilcoxon-exact"
    assert approx.p_value == pytest.approx(_normal_p_by_hand(with_ties, alternative), rel=1e-12)
    assert exact.p_value == pytest.approx(_exact_p_by_enumeration(distinct, alternative), rel=1e-12)
    if alternative == "two-sided":
        # 6 non-zero differences, T+ = 21 of 21: z = (21 - 10.5) / sqrt(22.75 - 12/48) = 2.2136, p = 0.02686.
        assert approx.p_value == pytest.approx(0.026857, abs=1e-6)
        assert exact.p_value == pytest.approx(2 * 54 / 1024, rel=1e-12)  # T+ = 44: 54 of 1,024 patterns as high


def test_wilcoxon_method_is_stated_in_the_methods_text_and_the_sentence():
    base = np.full(7, 0.5)
    report = compare_models(
        {"A": result(base), "B": result(base + np.array([0.0, 0.1, 0.1, 0.2, 0.3, 0.3, 0.4]))},
        metrics="m",
        reference="A",
        test_method="wilcoxon",
    )
    text = report.methods_text()
    assert f"the exact null distribution when a hypothesis had at most {WILCOXON_EXACT_MAX} differences" in text
    assert "normal approximation of the signed-rank sum" in text
    assert "Wilcoxon signed-rank test (normal approximation)" in report.results_text("m", "B")
    assert "Wilcoxon signed-rank test, normal approximation" in str(report)
