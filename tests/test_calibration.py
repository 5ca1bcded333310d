"""A reduced calibration check, part of every `make test` (a few seconds): the sign-flip test's p-values under an
exchangeable null, and the paired bootstrap interval's coverage and width, on 200 simulated data sets at small B.

Each bound is 4 standard errors of its Monte Carlo estimate around the nominal value, so a fixed seed does not fail
by chance, yet a p-value twice or half what it should be, or an interval of half or twice its width, fails.
`make validate` (tests/test_validation.py) checks the same at full size and prints the figures.
"""

import math
import warnings

import numpy as np

from mlflow_recsys.stats import ComparisonWarning, compare_pair
from simulated import exchangeable_pair, paired_results

N_SIMS = 200


def four_sigma(rate: float) -> float:
    """4 binomial standard errors of a share estimated from N_SIMS data sets."""
    return 4 * math.sqrt(rate * (1 - rate) / N_SIMS)


def test_sign_flip_p_values_are_uniform_under_an_exchangeable_null():
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        p = np.array(
            [
                compare_pair(
                    *paired_results(*exchangeable_pair(rng, 60)),
                    metric="m",
                    n_resamples=99,  # alpha * (B + 1) is an integer: a valid test has size exactly alpha
                    test_method="randomization",
                    random_state=sim,
                ).p_value
                for sim in range(N_SIMS)
            ]
        )
    for level in (0.05, 0.5):
        rate = float(np.mean(p <= level))
        assert abs(rate - level) <= four_sigma(level), f"P(p <= {level}) = {rate}"


def test_paired_bootstrap_interval_covers_the_true_difference_with_the_estimates_spread():
    """Candidate beta(0.5, 2) against baseline beta(0.4, 2), equal for 60% of 200 users: coverage about 0.94
    (0.939 in 2,000 data sets), and a half width about 1.96 times the SD of the estimate across data sets."""
    rng = np.random.default_rng(2)
    true_difference = 0.4 * (0.5 / 2.5 - 0.4 / 2.4)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        for sim in range(N_SIMS):
            a = rng.beta(0.4, 2.0, 200)
            b = rng.beta(0.5, 2.0, 200)
            tied = rng.random(200) < 0.6
            b[tied] = a[tied]
            c = compare_pair(
                *paired_results(a, b),
                metric="m",
                n_resamples=199,
                test_method="t",
                interval_method="percentile",
                random_state=sim,
            )
            rows.append((c.difference, c.ci_low, c.ci_high))
    difference, low, high = np.array(rows).T
    coverage = float(np.mean((low <= true_difference) & (true_difference <= high)))
    assert abs(coverage - 0.95) <= four_sigma(0.95), f"coverage {coverage}"
    # Coverage cannot see an interval too wide (it tends to 1); its width against the estimate's spread can. The SD
    # of N_SIMS estimates has a relative standard error of about 1 / sqrt(2 (N_SIMS - 1)).
    width_ratio = float(np.mean(high - low) / 2 / (1.959964 * np.std(difference, ddof=1)))
    assert abs(width_ratio - 1) <= 4 / math.sqrt(2 * (N_SIMS - 1)), f"half width / (1.96 SD) = {width_ratio}"
