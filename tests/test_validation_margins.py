"""Calibration of the tests against a margin (``make validate``): the type-I error of each test method at the margin's
boundary (true difference = -margin), and the power at a stated true effect beside the normal approximation's.

Per-user differences are the boundary shift plus symmetric, heavy-tailed noise (Student t with 5 degrees of freedom,
SD 0.1), the scores themselves bounded in [0, 1]: the setting where each method's null (symmetry about the boundary
for the randomization, Wilcoxon and sign tests; the mean for the t-test and the bootstrap) holds.
"""

import warnings

import numpy as np
import pytest

from mlflow_recsys.stats import ComparisonWarning, compare_pair, non_inferiority_power
from simulated import paired_results

pytestmark = pytest.mark.validation
ALPHA, B, N, SD = 0.05, 999, 500, 0.1
METHODS = ("randomization", "bootstrap", "t", "wilcoxon", "sign")


def _pair(rng, true_difference, *, relative_to=None):
    base = rng.uniform(0.3, 0.7, N)
    noise = rng.standard_t(5, N) * SD / np.sqrt(5 / 3)
    if relative_to is not None:  # the candidate's mean is (1 - r) times the baseline's, user by user
        return base, (1 - relative_to) * base + noise
    return base, base + true_difference + noise


def rejection_rate(method, n_sims, seed, *, margin, true_difference, relative=False):
    rng = np.random.default_rng(seed)
    rejections = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        for sim in range(n_sims):
            base, cand = _pair(rng, true_difference, relative_to=margin if relative else None)
            c = compare_pair(
                *paired_results(base, cand),
                metric="m",
                n_resamples=B,
                test_method=method,
                random_state=sim,
                hypothesis="non-inferiority",
                margin=margin,
                relative_margin=relative,
            )
            rejections += c.p_value <= ALPHA
    return rejections / n_sims


def test_type_one_error_at_the_margin_boundary_for_each_test_method():
    n_sims, margin = 4000, 0.01
    rates = {m: rejection_rate(m, n_sims, seed=11, margin=margin, true_difference=-margin) for m in METHODS}
    relative = {m: rejection_rate(m, n_sims, seed=12, margin=0.02, true_difference=0, relative=True) for m in METHODS}
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_sims)
    print(
        f"\nnon-inferiority type-I error at the boundary (true difference = -margin = -{margin}), alpha={ALPHA}, "
        f"n={N}, {n_sims} data sets (MC s.e. {se:.4f}): " + ", ".join(f"{m} {r:.4f}" for m, r in rates.items())
    )
    print(
        "relative margin 2% at its boundary (true ratio of means 0.98): "
        + ", ".join(f"{m} {r:.4f}" for m, r in relative.items())
    )
    for rate in [*rates.values(), *relative.values()]:
        assert 0.04 <= rate <= 0.06


def test_power_at_a_stated_true_effect_matches_the_normal_approximation():
    n_sims, margin = 2000, 0.01
    expected = non_inferiority_power(SD, N, margin, ALPHA, true_difference=0.0)
    rates = {m: rejection_rate(m, n_sims, seed=13, margin=margin, true_difference=0.0) for m in METHODS}
    print(
        f"\nnon-inferiority power at true difference 0, margin {margin}, SD {SD}, n={N}, {n_sims} data sets: "
        f"normal approximation {expected:.4f}; " + ", ".join(f"{m} {r:.4f}" for m, r in rates.items())
    )
    for method in ("randomization", "bootstrap", "t"):  # tests of the mean: the approximation's target
        assert abs(rates[method] - expected) <= 0.05
    assert rates["wilcoxon"] >= expected - 0.05  # more efficient than the mean on heavy tails
