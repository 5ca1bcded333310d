"""Statistical calibration: size of the tests, coverage of the interval, family-wise error.

Slow, so not part of the default run: ``make validate`` runs them and prints the figures.
Simulated data imitate ranking-metric differences: most users tied exactly, the rest
drawn from skewed, bounded per-model scores with heavy-tailed differences.
"""

import warnings

import numpy as np
import pytest
import scipy.stats

from mlflow_recsys.stats import ComparisonWarning, compare_models, compare_pair
from simulated import exchangeable_pair, paired_results

pytestmark = pytest.mark.validation
ALPHA = 0.05
B = 999  # alpha * (B + 1) is an integer, so a valid Monte Carlo test has size exactly alpha


def rejection_rate(n, test_method, n_sims, seed):
    rng = np.random.default_rng(seed)
    rejections = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        for sim in range(n_sims):
            base, cand = paired_results(*exchangeable_pair(rng, n))
            c = compare_pair(base, cand, metric="m", n_resamples=B, test_method=test_method, random_state=sim)
            rejections += c.p_value <= ALPHA
    return rejections / n_sims


@pytest.mark.parametrize("n", [100, 2500])
def test_type_one_error_of_each_test_under_an_exchangeable_null(n):
    n_sims = 4000
    rates = {method: rejection_rate(n, method, n_sims, seed=n) for method in ("randomization", "bootstrap", "t")}
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_sims)
    print(
        f"\ntype-I error at alpha={ALPHA}, n={n}, {n_sims} null data sets (MC s.e. {se:.4f}): "
        + ", ".join(f"{m} {r:.4f}" for m, r in rates.items())
    )
    assert 0.04 <= rates["randomization"] <= 0.06
    assert 0.03 <= rates["t"] <= 0.07
    assert 0.03 <= rates["bootstrap"] <= 0.08


def interval_coverage(n: int, n_sims: int, seed: int, interval_method: str) -> float:
    """Share of data sets whose 95% interval holds the true difference.

    Candidate scores beta(0.5, 2) against baseline beta(0.4, 2), both equal for 60% of users: skewed,
    heavy-tailed differences.
    """
    rng = np.random.default_rng(seed)
    true_difference = 0.4 * (0.5 / 2.5 - 0.4 / 2.4)
    covered = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        for sim in range(n_sims):
            a = rng.beta(0.4, 2.0, n)
            b = rng.beta(0.5, 2.0, n)
            tied = rng.random(n) < 0.6
            b[tied] = a[tied]
            c = compare_pair(
                *paired_results(a, b),
                metric="m",
                n_resamples=B,
                test_method="t",
                random_state=sim,
                interval_method=interval_method,
            )
            covered += c.ci_low <= true_difference <= c.ci_high
    return covered / n_sims


def test_bootstrap_interval_covers_the_true_difference_95_percent_of_the_time():
    n, n_sims = 2500, 2000
    rate = interval_coverage(n, n_sims, seed=7, interval_method="percentile")
    print(f"\ncoverage of the 95% percentile bootstrap interval, n={n}, {n_sims} data sets: {rate:.4f}")
    assert 0.93 <= rate <= 0.97


def test_bca_interval_covers_the_true_difference_95_percent_of_the_time_on_skewed_differences():
    # BCa corrects the skewness of the bootstrap distribution but not the heavy tails' short intervals at small n:
    # at n = 200 both intervals cover about 93% (percentile 0.936, BCa 0.929 in 2,000 data sets), at n = 500
    # about 94%.
    n, n_sims = 1000, 2000
    rate = interval_coverage(n, n_sims, seed=13, interval_method="bca")
    se = np.sqrt(0.95 * 0.05 / n_sims)
    print(f"\ncoverage of the 95% BCa bootstrap interval, n={n}, {n_sims} data sets (MC s.e. {se:.4f}): {rate:.4f}")
    assert 0.93 <= rate <= 0.97


@pytest.mark.parametrize("correction", ["holm", "bonferroni"])
def test_family_wise_error_under_a_global_null_with_four_correlated_metrics(correction):
    n, n_sims = 500, 2000
    rng = np.random.default_rng(11)
    keys = ("ndcg@100", "recall@20", "mrr@20", "map@20")
    any_rejection = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        for sim in range(n_sims):
            # One latent quality per user and model, seen by every metric through its own noise:
            # the metrics are correlated, and the two models stay interchangeable for each user.
            latent_a, latent_b = exchangeable_pair(rng, n)
            base = np.column_stack([np.clip(latent_a + rng.normal(0, 0.05, n), 0, 1) for _ in keys])
            cand = np.column_stack([np.clip(latent_b + rng.normal(0, 0.05, n), 0, 1) for _ in keys])
            report = compare_models(
                dict(zip(("A", "B"), paired_results(base, cand, keys), strict=True)),
                metrics=list(keys),
                reference="A",
                correction=correction,
                n_resamples=B,
                random_state=sim,
            )
            any_rejection += any(c.significant for c in report.comparisons)
    fwer = any_rejection / n_sims
    print(f"\nfamily-wise error with {correction}, 4 correlated metrics, {n_sims} global-null data sets: {fwer:.4f}")
    assert fwer <= ALPHA


def _differences(rng, shape, mean, sd, shape_name):
    """Per-user differences with the given mean and SD: normal, or gamma(4) (skewness 1) shifted and scaled."""
    if shape_name == "normal":
        return rng.normal(mean, sd, shape)
    k = 4.0
    return mean + sd * (rng.gamma(k, 1.0, shape) - k) / np.sqrt(k)


@pytest.mark.parametrize("shape_name", ["normal", "skewed"])
@pytest.mark.parametrize("correction", [None, "bonferroni"])
def test_power_at_the_reported_minimum_detectable_effect(shape_name, correction):
    """Data whose true mean difference is the report's mde are detected about 80% of the time.

    The mde comes from a pilot report (188 users, SD of the differences about 0.1; two metrics under
    Bonferroni, so each is tested at alpha/2). New data sets draw 188 differences with that mean and the
    pilot's SD; the paired t-test (scipy.stats.ttest_1samp, vectorised over the data sets) rejects at the
    per-hypothesis level. The randomization test is checked on fewer data sets (compare_pair, B = 999).
    """
    n, n_sims = 188, 20000
    rng = np.random.default_rng(13)
    base = rng.beta(0.4, 2.0, (n, 2))
    pilot = compare_models(
        dict(zip(("A", "B"), paired_results(base, base + rng.normal(0.0, 0.1, (n, 2)), ("m", "k")), strict=True)),
        metrics=["m", "k"] if correction else ["m"],
        reference="A",
        correction=correction,
        n_resamples=B,
    )
    c = pilot.comparisons[0]
    level = ALPHA / pilot.family_size if correction else ALPHA
    mde, sd = c.mde, float(np.std(c.unit_differences, ddof=1))

    d = _differences(rng, (n_sims, n), mde, sd, shape_name)
    p = scipy.stats.ttest_1samp(d, 0.0, axis=1).pvalue
    power_t = float(np.mean(p <= level))
    se = np.sqrt(0.8 * 0.2 / n_sims)
    print(
        f"\npower at the reported mde = {mde:.5f} (sd {sd:.4f}, n={n}, per-hypothesis level {level:.3g}, "
        f"{shape_name} differences): paired t-test (scipy.stats.ttest_1samp) {power_t:.4f} over {n_sims} data "
        f"sets (MC s.e. {se:.4f})",
        end="",
    )
    assert 0.77 <= power_t <= 0.83

    if shape_name == "normal" and correction is None:
        n_rand = 2000
        rejected = 0
        zeros = np.zeros(n)
        for sim in range(n_rand):
            dr = _differences(rng, n, mde, sd, shape_name)
            r = compare_pair(*paired_results(zeros, dr), metric="m", n_resamples=B, random_state=sim)
            rejected += r.p_value <= level
        power_r = rejected / n_rand
        print(
            f"; randomization test (compare_pair, B={B}) {power_r:.4f} over {n_rand} data sets "
            f"(MC s.e. {np.sqrt(0.16 / n_rand):.4f})",
            end="",
        )
        assert 0.77 <= power_r <= 0.83
    print()


def pooled_interval_coverage(n_datasets: int, tau: float, n_sims: int, seed: int) -> float:
    """Share of simulated studies whose pooled 95% interval (random effects, HKSJ) holds the pooled effect.

    Each dataset draws its own true effect from N(0.02, tau^2) and scores 300 to 3,000 users whose differences are
    that effect plus skewed noise (a centred exponential), so the datasets' standard errors differ by a factor of 3.
    """
    from mlflow_recsys.stats import paired_effect, random_effects

    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(n_sims):
        effects, errors = [], []
        for theta in rng.normal(0.02, tau, n_datasets):
            n = int(rng.integers(300, 3001))
            d = theta + 0.15 * (rng.exponential(1.0, n) - 1.0)
            effect, error = paired_effect(d, np.zeros(n))
            effects.append(effect)
            errors.append(error)
        meta = random_effects(effects, errors)
        covered += meta.ci_low <= 0.02 <= meta.ci_high
    return covered / n_sims


def test_the_pooled_interval_over_five_heterogeneous_datasets_covers_95_percent_of_the_time():
    n_sims = 4000
    rates = {tau: pooled_interval_coverage(5, tau, n_sims, seed=7) for tau in (0.005, 0.01, 0.02)}
    print(
        f"\npooled 95% interval (DerSimonian-Laird, HKSJ) over 5 datasets, {n_sims} studies: "
        + ", ".join(f"tau {tau}: {rate:.4f}" for tau, rate in rates.items())
    )
    assert all(0.93 <= rate <= 0.97 for rate in rates.values())
