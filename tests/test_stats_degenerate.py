"""Degenerate per-user differences: ties on every user, constant shifts, very few users.

Expected values are worked out by hand (or by scipy) in each test; the property
tests at the end check the invariants on arrays that hypothesis draws.
"""

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_oracles import bootstrap_means_reference, draw_indices
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._plots import _error_lengths, forest_plot, seed_spread_plot
from mlflow_recsys.stats import ComparisonWarning, FewNonzeroUnitsWarning, compare_models, compare_pair, seed_spread
from mlflow_recsys.stats._inference import null_p_value as _p_value
from mlflow_recsys.stats._resampling import (
    block_seeds,
    bootstrap_means,
    centred_means,
    exact_sign_flip_means,
    sign_flip_means,
)
from mlflow_recsys.stats._settings import ALTERNATIVES, INTERVAL_METHODS, TEST_METHODS
from simulated import result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def expected_interval(alternative, low, high):
    return {"two-sided": (low, high), "greater": (low, math.inf), "less": (-math.inf, high)}[alternative]


def assert_png(path):
    data = path.read_bytes()
    assert len(data) > len(PNG_SIGNATURE) and data.startswith(PNG_SIGNATURE)


# -- every user tied ------------------------------------------------------------------


@pytest.mark.parametrize("test_method", TEST_METHODS)
@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_models_tied_on_every_user_give_zero_difference_zero_interval_and_p_one(test_method, alternative):
    # Six users, both models 0.5: every difference is 0, so every sign flip and every resample is 0 and ties the
    # observed 0. By hand: difference 0, interval [0, 0], p = 1 whatever the test or the side.
    same = result(np.full(6, 0.5))
    with pytest.warns(FewNonzeroUnitsWarning, match="only 0 of 6 users differ"):
        c = compare_pair(same, result(np.full(6, 0.5)), metric="m", test_method=test_method, alternative=alternative)
    assert (c.difference, c.n_nonzero, c.tie_rate) == (0.0, 0, 1.0)
    assert (c.ci_low, c.ci_high) == expected_interval(alternative, 0.0, 0.0)
    assert c.p_value == 1.0 and c.adjusted_p_value == 1.0
    assert c.direction == "inconclusive" and not c.significant
    assert c.bootstrap_standard_error == 0.0 and not c.bootstrap_distribution.any()
    if test_method == "randomization":
        # Zero differences are dropped before enumerating: 2**0 = 1 pattern, whose mean is 0.
        assert c.test_method == "randomization-exact"
        np.testing.assert_array_equal(c.null_distribution, [0.0])


def test_exact_enumeration_of_no_nonzero_difference_is_the_single_empty_pattern():
    null = exact_sign_flip_means(np.zeros(6))
    assert null.shape == (1,) and null[0] == 0.0
    # The same holds below the exact limit for any number of tied units.
    assert exact_sign_flip_means(np.zeros(500)).tolist() == [0.0]


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_monte_carlo_p_of_all_zero_differences_is_one(alternative):
    # compare_models enumerates a column with no non-zero unit exactly (2**0 <= B), so this drives the Monte Carlo
    # branch directly: every sign flip of zeros is 0, all B replicates tie, p = (1 + B) / (B + 1) = 1.
    null = sign_flip_means(np.zeros((6, 1)), 99, np.random.SeedSequence(0))[:, 0]
    assert null.shape == (99,) and not null.any()
    assert _p_value(null, 0.0, alternative, 0.0, monte_carlo=True) == 1.0


def test_a_tied_metric_leaves_the_other_metrics_of_the_call_unchanged():
    rng = np.random.default_rng(4)
    n = 200
    base = {"ndcg@100": rng.random(n), "hit_rate@100": np.ones(n)}
    cand = {"ndcg@100": base["ndcg@100"] + rng.normal(0.02, 0.1, n), "hit_rate@100": np.ones(n)}
    results = {"A": result(base), "B": result(cand)}
    settings_ = dict(reference="A", correction=None, n_resamples=999)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        both = compare_models(results, metrics=["ndcg@100", "hit_rate@100"], **settings_)
    alone = compare_models(results, metrics=["ndcg@100"], **settings_)

    tied = both.get("hit_rate@100", "B")
    assert (tied.difference, tied.ci_low, tied.ci_high, tied.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert tied.test_method == "randomization-exact"
    with_tied, without = both.get("ndcg@100", "B"), alone.get("ndcg@100", "B")
    assert without.test_method == "randomization"  # Monte Carlo: 2**200 patterns
    # Every column but the size of the family, which counts the tied metric's hypothesis too.
    assert (with_tied.family_size, without.family_size) == (2, 1)
    pd.testing.assert_frame_equal(
        with_tied.to_frame().drop(columns="family_size"), without.to_frame().drop(columns="family_size")
    )
    for name in ("unit_differences", "null_distribution", "bootstrap_distribution"):
        np.testing.assert_array_equal(getattr(with_tied, name), getattr(without, name))


# -- every user shifted by the same amount ----------------------------------------------


@pytest.mark.parametrize("shift", [0.1, 1 / 3, 0.7, -0.2])
@pytest.mark.parametrize("n", [6, 100, 1001])
def test_constant_difference_gives_the_point_interval_at_that_difference(shift, n):
    base = np.full(n, 0.25)
    d = (0.25 + shift) - 0.25  # the one difference every user has, as float64 computes it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        c = compare_pair(result(base), result(base + shift), metric="m", n_resamples=999)
    assert c.difference == d
    assert c.ci_low == c.difference == c.ci_high
    assert (c.bootstrap_distribution == d).all() and c.bootstrap_standard_error == 0.0
    # Only the all-plus and all-minus sign patterns reach |mean| = |d|: exactly 2 / 2**6 for six users; for more
    # users no random pattern of 999 does (chance 2 / 2**100 each), so p is the Monte Carlo floor 1 / 1000.
    if n == 6:
        assert c.test_method == "randomization-exact" and c.p_value == 2 / 2**6
        scipy_p = scipy.stats.permutation_test(
            (np.full(n, d),), np.mean, permutation_type="samples", n_resamples=np.inf
        ).pvalue
        assert c.p_value == pytest.approx(scipy_p, abs=1e-12)
    else:
        assert c.test_method == "randomization" and c.p_value == 1 / 1000
    assert c.direction == ("better" if shift > 0 else "worse")


@pytest.mark.parametrize("shift", [0.1, 1 / 3, -0.7])
def test_bootstrap_replicates_of_a_constant_column_are_that_constant(shift):
    for n in (2, 5, 64, 130, 3001):
        d = np.column_stack([np.full(n, shift), np.full(n, 0.1), np.zeros(n)])
        ss = np.random.SeedSequence(n)
        boot = bootstrap_means(d, 300, ss)
        assert (boot == d[0]).all()
        assert (centred_means(d) == d[0]).all()
        indices = draw_indices(block_seeds(ss, 300), n, 300)
        assert (bootstrap_means_reference(d, indices) == d[0]).all()


def test_integer_differences_keep_exact_bootstrap_means():
    # Hit-rate differences are -1, 0 or 1: the bootstrap mean of a draw is (integer sum) / n, exactly.
    rng = np.random.default_rng(1)
    d = rng.integers(-1, 2, size=(37, 1)).astype(np.float64)
    ss = np.random.SeedSequence(2)
    indices = draw_indices(block_seeds(ss, 500), 37, 500)
    centre = np.sort(d[:, 0])[18]  # the lower median, which bootstrap_means sums from
    exact = centre + (d[indices, 0] - centre).sum(axis=1) / 37  # integer sums: no rounding before the division
    np.testing.assert_array_equal(bootstrap_means(d, 500, ss)[:, 0], exact)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_constant_shift_of_varying_values_keeps_the_estimate_inside_its_interval(alternative):
    # base + 0.1 - base differs from 0.1 by a few ulps per user: the rounding that used to push an end past the
    # estimate by ~1e-17.
    for n, shift in [(100, 0.1), (100, 1 / 3), (13, 0.7), (1001, 1 / 3), (2500, 0.1)]:
        base = np.random.default_rng(n).random(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ComparisonWarning)
            c = compare_pair(result(base), result(base + shift), metric="m", n_resamples=999, alternative=alternative)
        assert c.ci_low <= c.difference <= c.ci_high
        assert c.difference == pytest.approx(shift, abs=1e-15)


def test_error_bars_are_never_negative():
    d = np.array([0.1, 0.1, 0.2])
    low = np.array([np.nextafter(0.1, 1.0), -np.inf, 0.15])  # one end an ulp past its estimate, one open end
    high = np.array([0.1, 0.3, np.inf])
    lengths = _error_lengths(d, low, high)
    np.testing.assert_array_equal(lengths[0], [0.0, 0.0, 0.2 - 0.15])
    np.testing.assert_array_equal(lengths[1], [0.0, 0.3 - 0.1, 0.0])


def test_forest_plot_renders_constant_and_tied_differences(tmp_path):
    n = 100
    base = np.full(n, 0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        report = compare_models(
            {"A": result({"m": base, "t": base}), "B": result({"m": base + 0.1, "t": base})},
            metrics=["m", "t"],
            reference="A",
            n_resamples=999,
        )
    for c in report.comparisons:
        assert c.ci_low == c.difference == c.ci_high
    forest_plot(report, tmp_path / "forest.png")
    assert_png(tmp_path / "forest.png")
    # An interval an ulp on the wrong side, as rounding produced before, still renders.
    c = report.comparisons[0]
    skewed = dataclasses.replace(report, comparisons=(dataclasses.replace(c, ci_low=np.nextafter(c.difference, 1)),))
    forest_plot(skewed, tmp_path / "skewed.png")
    assert_png(tmp_path / "skewed.png")


def test_seed_spread_of_constant_differences_has_point_intervals_and_renders(tmp_path):
    n = 50
    base = np.full(n, 0.25)
    seeds = {s: result(base + shift) for s, shift in zip((1, 2, 3, 4, 5), (0.1, 1 / 3, 0.7, 0.2, 0.3), strict=True)}
    spread = seed_spread(result(base), seeds, metrics="m", n_resamples=999)
    per_seed = spread.per_seed_frame()
    expected = [(0.25 + s) - 0.25 for s in (0.1, 1 / 3, 0.7, 0.2, 0.3)]
    assert per_seed["difference"].tolist() == expected
    assert (per_seed["ci_low"] == per_seed["difference"]).all() and (
        per_seed["ci_high"] == per_seed["difference"]
    ).all()
    assert (per_seed["bootstrap_standard_error"] == 0.0).all()
    seed_spread_plot(per_seed, tmp_path / "seeds.png")
    assert_png(tmp_path / "seeds.png")
    skewed = per_seed.assign(ci_high=np.nextafter(per_seed["difference"].to_numpy(), 0.0), comparison="B vs A")
    seed_spread_plot(skewed, tmp_path / "skewed.png")
    assert_png(tmp_path / "skewed.png")


# -- properties over drawn per-user arrays ----------------------------------------------------

unit_values = st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False)


@st.composite
def per_user_pairs(draw):
    """(baseline, candidate) per-user arrays of one of the degenerate shapes the issue lists."""
    kind = draw(st.sampled_from(["equal", "shift", "few", "binary", "large"]))
    if kind == "large":
        # A few thousand users: drawn from a seed, since hypothesis lists of that length are slow to generate.
        n = draw(st.integers(2000, 4000))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if draw(st.booleans()):
            base = rng.integers(0, 2, n).astype(np.float64)
            return base, np.where(rng.random(n) < 0.9, base, 1 - base)
        base = rng.random(n)
        return base, base + draw(st.sampled_from([0.0, 0.1, 1 / 3, -0.25]))
    n = draw(st.integers(1, 3)) if kind == "few" else draw(st.integers(1, 40))
    if kind == "binary":
        values = st.sampled_from([0.0, 1.0])
        base = np.array(draw(st.lists(values, min_size=n, max_size=n)))
        return base, np.array(draw(st.lists(values, min_size=n, max_size=n)))
    base = np.array(draw(st.lists(unit_values, min_size=n, max_size=n)))
    if kind == "equal":
        return base, base.copy()
    if kind == "shift":
        return base, base + draw(st.floats(-1.0, 1.0, allow_nan=False))
    return base, np.array(draw(st.lists(unit_values, min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=per_user_pairs(),
    test_method=st.sampled_from(TEST_METHODS),
    alternative=st.sampled_from(ALTERNATIVES),
    interval_method=st.sampled_from(INTERVAL_METHODS),
)
def test_any_per_user_arrays_give_valid_numbers_or_the_documented_error(
    pair, test_method, alternative, interval_method
):
    base, cand = pair
    b = 99
    call = dict(
        metric="m", n_resamples=b, test_method=test_method, alternative=alternative, interval_method=interval_method
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)  # few users and B = 99 warn by design
        if len(base) < 2:
            with pytest.raises(ValueError, match=r"results: expected at least 2 distinct users .* found 1 "):
                compare_pair(result(base), result(cand), **call)
            return
        c = compare_pair(result(base), result(cand), **call)
        again = compare_pair(result(base), result(cand), **call)

    d = cand - base
    assert c.difference == pytest.approx(d.mean(), abs=1e-12)
    assert c.ci_low <= c.difference <= c.ci_high
    assert c.n_nonzero == int(np.count_nonzero(d))
    assert (c.wins, c.ties, c.losses) == (int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum()))
    assert c.interval_method in INTERVAL_METHODS and (interval_method == "bca" or c.interval_method == "percentile")
    if c.test_method in ("randomization", "bootstrap"):
        assert 1 / (b + 1) <= c.p_value <= 1
    elif c.test_method == "randomization-exact":
        assert 0 < c.p_value <= 1
        assert c.null_distribution.shape == (2**c.n_nonzero,)
        assert (c.p_value * 2**c.n_nonzero).is_integer()
    else:
        assert 0 <= c.p_value <= 1
    if c.n_nonzero == 0:
        assert (c.difference, c.p_value, c.direction) == (0.0, 1.0, "inconclusive")
        assert (c.ci_low, c.ci_high) == expected_interval(alternative, 0.0, 0.0)
    # Same inputs and seed: identical numbers.
    pd.testing.assert_frame_equal(c.to_frame(), again.to_frame())
    np.testing.assert_array_equal(c.bootstrap_distribution, again.bootstrap_distribution)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(
    value=unit_values,
    n=st.integers(2, 3000),
    shift=st.floats(-1.0, 1.0, allow_nan=False),
    alternative=st.sampled_from(ALTERNATIVES),
    interval_method=st.sampled_from(INTERVAL_METHODS),
)
def test_all_equal_differences_give_a_point_interval(value, n, shift, alternative, interval_method):
    # Every user has the same values, so the same difference: a constant column, whatever its value.
    base = np.full(n, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        c = compare_pair(
            result(base),
            result(base + shift),
            metric="m",
            n_resamples=99,
            alternative=alternative,
            interval_method=interval_method,
        )
    d = (value + shift) - value
    assert c.interval_method == interval_method  # a point interval is its own BCa interval
    assert c.difference == d
    assert (c.bootstrap_distribution == d).all()
    assert (c.ci_low, c.ci_high) == expected_interval(alternative, d, d)


def test_resampling_settings_past_their_bounds_are_refused_before_any_work():
    from mlflow_recsys.stats._comparison import MAX_REPLICATE_BYTES
    from mlflow_recsys.stats._settings import MAX_RESAMPLES

    results = {
        name: EvaluationResult.from_per_user({f"m{j}@1": np.full(6, 0.5) for j in range(4)}, targets_fingerprint="x")
        for name in ("A", "B", "C")
    }
    with pytest.raises(ValueError, match=r"n_resamples: expected an integer in \[1, 1,000,000\], found 1000001"):
        compare_models(results, metrics="m0@1", n_resamples=MAX_RESAMPLES + 1)
    # 3 pairs x 4 metrics x 1,000,000 resamples x 16 bytes = 0.18 GiB: within the bound.
    assert 16 * 12 * MAX_RESAMPLES <= MAX_REPLICATE_BYTES
    from mlflow_recsys.stats._comparison import check_replicate_memory

    check_replicate_memory(MAX_RESAMPLES, 12)
    with pytest.raises(ValueError, match=r"1,000,000 resamples for each of 300 hypotheses would keep 4\.5 GiB"):
        check_replicate_memory(MAX_RESAMPLES, 300)
