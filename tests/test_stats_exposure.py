"""Catalogue coverage and the Gini index of exposure, and their paired comparison (``compare_exposure``).

Values are checked against hand arithmetic, against the mean-absolute-difference definition of the Gini index, and
against RecBole 1.2.1's ``GiniIndex`` and ``ItemCoverage`` (``recbole.evaluator.metrics``). RecBole is installed with
``--no-deps``; importing its evaluator needs ``colorlog`` and ``texttable`` (small, pure Python, in the test extra) and
``torch.utils.tensorboard``, which imports the ``tensorboard`` package (with grpcio and a compiled data server: not
small). The two metrics never touch TensorBoard, so when it is missing the import is made with a stand-in module for
``torch.utils.tensorboard``, in place for the import only. Cornac (also in the test extra) has neither metric.

RecBole's conventions differ in two ways that the cross-check steps around: its ``data.num_items`` counts the padding
id 0 of its datasets, so its coverage and Gini divide by one more item than the catalogue (here ``n_items`` is passed
to its functions directly); and its Gini divides by ``n_users * k`` slots, so padding would count as an item (here the
cross-checked lists are full).

The kernels' logic is held to two NumPy references: one on the kernel's own draws (replayed with
``tests/kernel_oracles.py``), exact, and one drawing its own users with ``numpy.random.Generator``, by distribution.
"""

import itertools
import warnings

import numba
import numpy as np
import pandas as pd
import pytest

from kernel_oracles import draw_indices, draw_signs
from mlflow_recsys.stats import (
    EXPOSURE_COLUMNS,
    FewNonzeroUnitsWarning,
    LowResamplesWarning,
    catalogue_coverage,
    compare_exposure,
    gini_index,
)
from mlflow_recsys.stats import _exposure_kernels as kernels
from mlflow_recsys.stats._exposure import _compare_exposure_iv, _point_iv
from mlflow_recsys.stats._resampling import block_seeds

# Three users, k = 2, five items; user 2's list is one item long.
TINY = np.array([[0, 1], [0, 2], [0, -1]])


def random_lists(rng, n_users, n_items, k, skew=1.0, width=None):
    """(n_users, width or k) lists of distinct items drawn with Zipf-like popularity ``1 / rank**skew``."""
    p = 1.0 / np.arange(1, n_items + 1) ** skew
    p /= p.sum()
    rows = [rng.choice(n_items, k, replace=False, p=p) for _ in range(n_users)]
    out = np.full((n_users, width or k), -1)
    out[:, :k] = rows
    return out


def mad_gini(c):
    """Gini (1912) as the mean absolute difference over twice the mean: sum_ij |c_i - c_j| / (2 n^2 mean(c))."""
    c = np.asarray(c, dtype=np.float64)
    return np.abs(c[:, None] - c[None, :]).sum() / (2 * c.size**2 * c.mean())


def exposure(lists, n_items, weights=None):
    """How many (weighted) lists hold each item."""
    w = np.ones(len(lists)) if weights is None else np.asarray(weights, dtype=np.float64)
    mask = lists >= 0
    return np.bincount(lists[mask], weights=np.broadcast_to(w[:, None], lists.shape)[mask], minlength=n_items)


def values(lists, n_items, weights=None):
    """(coverage, Gini) of weighted lists, the Gini from its mean-absolute-difference definition."""
    c = exposure(lists, n_items, weights)
    return np.count_nonzero(c) / n_items, mad_gini(c)


# --- point values -------------------------------------------------------------------------------------------------


def test_coverage_and_gini_of_tiny_lists_by_hand():
    # Exposures: item 0 in 3 lists, items 1 and 2 in one each, items 3 and 4 in none: c = (3, 1, 1, 0, 0).
    # Coverage: 3 of 5 items = 0.6. Gini: ascending (0, 0, 1, 1, 3), weights 2i - n - 1 = (-4, -2, 0, 2, 4):
    # (0 + 0 + 0 + 2 + 12) / (5 * 5) = 14 / 25 = 0.56.
    assert catalogue_coverage(TINY, n_items=5, k=2) == 0.6
    assert gini_index(TINY, n_items=5, k=2) == pytest.approx(0.56, abs=1e-15)


def test_one_item_in_every_slot_has_gini_one_minus_one_over_n():
    # k = 1: item 0 three times, c = (3, 0, 0, 0, 0): coverage 1/5; Gini (4 * 3) / (5 * 3) = 0.8 = 1 - 1/5.
    assert catalogue_coverage(TINY, n_items=5, k=1) == 0.2
    assert gini_index(TINY, n_items=5, k=1) == pytest.approx(0.8, abs=1e-15)


def test_equal_exposure_has_gini_zero_and_full_coverage():
    lists = np.array([[0, 1], [2, 3], [1, 0], [3, 2]])  # every item twice
    assert gini_index(lists, n_items=4, k=2) == 0.0
    assert catalogue_coverage(lists, n_items=4, k=2) == 1.0


def test_padding_is_no_exposure_and_columns_past_k_are_ignored():
    padded = np.array([[4, 2, -1, -1], [2, -1, -1, -1]])
    assert catalogue_coverage(padded, n_items=10, k=3) == 0.2
    wide = np.array([[4, 2, 7, 9], [2, 5, 1, 0]])
    np.testing.assert_equal(gini_index(wide, n_items=10, k=2), gini_index(wide[:, :2], n_items=10, k=2))
    # Past k nothing is read, so nothing there is held against the lists (but indices must be in range).
    assert catalogue_coverage(np.array([[3, -1, 4, 4]]), n_items=10, k=2) == 0.1


@pytest.mark.parametrize("seed", range(5))
def test_gini_equals_the_mean_absolute_difference_definition(seed):
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(5, 300))
    lists = random_lists(rng, int(rng.integers(1, 200)), n_items, k=min(5, n_items), skew=rng.uniform(0, 2))
    assert gini_index(lists, n_items=n_items, k=5) == pytest.approx(mad_gini(exposure(lists, n_items)), rel=1e-12)


def test_the_kernels_histogram_gini_equals_the_sorted_form_on_random_counts():
    rng = np.random.default_rng(7)
    for trial in range(50):
        counts = rng.integers(0, 40, int(rng.integers(1, 500)))
        counts[rng.random(counts.size) < (1.0 if trial % 10 == 0 else 0.3)] = 0  # every 10th: nothing exposed
        hist = np.zeros(41, dtype=np.int32)
        coverage, gini = kernels.coverage_and_gini(counts.astype(np.int32), hist)
        assert coverage == np.count_nonzero(counts) / counts.size
        if counts.sum() == 0:
            assert np.isnan(gini)
        else:
            assert gini == pytest.approx(mad_gini(counts), rel=1e-12, abs=1e-15)
        assert not hist.any()  # left zeroed for the next replicate


@pytest.fixture(scope="module")
def recbole_metrics(recbole_metrics_module):
    """RecBole 1.2.1's ``GiniIndex`` and ``ItemCoverage`` classes (see the module docstring for the import)."""
    return recbole_metrics_module.GiniIndex, recbole_metrics_module.ItemCoverage


@pytest.mark.parametrize("seed", range(4))
def test_coverage_and_gini_equal_recboles(recbole_metrics, seed):
    gini_class, coverage_class = recbole_metrics
    rng = np.random.default_rng(seed)
    n_items, k = int(rng.integers(20, 400)), int(rng.integers(1, 15))
    lists = random_lists(rng, int(rng.integers(5, 300)), n_items, k=k, skew=rng.uniform(0.3, 1.5))
    # Their methods use no state of the metric object; self is not needed.
    assert catalogue_coverage(lists, n_items=n_items, k=k) == coverage_class.get_coverage(None, lists, n_items)
    theirs = gini_class.get_gini(None, lists, n_items)
    assert gini_index(lists, n_items=n_items, k=k) == pytest.approx(theirs, rel=1e-12)


# --- the kernels against NumPy --------------------------------------------------------------------------------------


def stacked_pair(rng, n_users, n_items, k):
    a = random_lists(rng, n_users, n_items, k, skew=1.0)
    b = random_lists(rng, n_users, n_items, k, skew=0.5)
    b[: n_users // 4] = a[: n_users // 4]  # some users with the same list in both models
    return np.stack([a, b]).astype(np.int32)


@pytest.mark.parametrize("n_users", [1, 7, 64, 130])
def test_bootstrap_kernel_equals_numpy_on_its_own_draws(n_users):
    rng = np.random.default_rng(n_users)
    stacked, n_items, B = stacked_pair(rng, n_users, 40, 6), 40, 150
    band_of = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)  # k = 3 and 6
    seeds = block_seeds(np.random.SeedSequence(11), B)
    out = kernels.bootstrap_exposure(stacked, band_of, n_items, seeds, B)
    for r, idx in enumerate(draw_indices(seeds, n_users, B)):
        weights = np.bincount(idx, minlength=n_users)
        assert weights.sum() == n_users
        for t, k in enumerate((3, 6)):
            for side in (0, 1):
                expected = values(stacked[side, :, :k], n_items, weights)
                np.testing.assert_allclose(out[r, t, side], expected, rtol=1e-12)


@pytest.mark.parametrize("n_users", [1, 7, 64, 130])
def test_swap_kernel_equals_numpy_on_its_own_draws(n_users):
    rng = np.random.default_rng(n_users + 1)
    stacked, n_items, B = stacked_pair(rng, n_users, 40, 6), 40, 150
    band_of = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    seeds = block_seeds(np.random.SeedSequence(12), B)
    users = np.arange(n_users, dtype=np.int64)
    out = kernels.swap_exposure(stacked, band_of, n_items, users, seeds, B)
    for r, keep in enumerate(draw_signs(seeds, n_users, B)):  # a sign of -1 (False) exchanges the user's lists
        a = np.where(keep[:, None], stacked[0], stacked[1])
        b = np.where(keep[:, None], stacked[1], stacked[0])
        for t, k in enumerate((3, 6)):
            np.testing.assert_allclose(out[r, t, 0], values(a[:, :k], n_items), rtol=1e-12)
            np.testing.assert_allclose(out[r, t, 1], values(b[:, :k], n_items), rtol=1e-12)


def test_visiting_only_the_differing_users_changes_nothing():
    rng = np.random.default_rng(3)
    stacked, band_of = stacked_pair(rng, 90, 30, 4), np.zeros(4, dtype=np.int64)
    seeds = block_seeds(np.random.SeedSequence(1), 300)
    every = kernels.swap_exposure(stacked, band_of, 30, np.arange(90, dtype=np.int64), seeds, 300)
    differing = np.flatnonzero((np.sort(stacked[0], 1) != np.sort(stacked[1], 1)).any(1)).astype(np.int64)
    np.testing.assert_array_equal(kernels.swap_exposure(stacked, band_of, 30, differing, seeds, 300), every)


def test_the_observed_arrangement_reproduces_the_point_values_bit_for_bit():
    rng = np.random.default_rng(4)
    stacked = stacked_pair(rng, 300, 500, 10)
    out = kernels.swap_exposure_exact(stacked, np.zeros(10, dtype=np.int64), 500, np.arange(3, dtype=np.int64))
    for side in (0, 1):
        assert out[0, 0, side, 0] == catalogue_coverage(stacked[side], n_items=500, k=10)
        assert out[0, 0, side, 1] == gini_index(stacked[side], n_items=500, k=10)


def numpy_bootstrap_sd(a, b, n_items, n_resamples, seed):
    """The paired bootstrap written plainly: B draws of n users from numpy's Generator; SD of the differences."""
    rng = np.random.default_rng(seed)
    n = a.shape[0]
    diffs = []
    for _ in range(n_resamples):
        weights = np.bincount(rng.integers(0, n, n), minlength=n)
        diffs.append(np.subtract(values(b, n_items, weights), values(a, n_items, weights)))
    return np.std(diffs, axis=0, ddof=1)


def test_bootstrap_spread_agrees_with_a_numpy_loop():
    rng = np.random.default_rng(5)
    a = random_lists(rng, 400, 300, 5, skew=1.0)
    b = random_lists(rng, 400, 300, 5, skew=0.6)
    result = compare_exposure({"a": a, "b": b}, n_items=300, metrics=["coverage@5", "gini@5"], n_resamples=2000)
    ours = [float(np.std(r.bootstrap_distribution, ddof=1)) for r in result.comparisons]
    np.testing.assert_allclose(ours, numpy_bootstrap_sd(a, b, 300, 2000, seed=9), rtol=0.1)


def test_bootstrap_coverage_of_one_item_per_user_is_the_share_of_distinct_draws():
    # User u recommends item u only, so a replicate's coverage is the share of distinct users drawn, whose
    # expectation is 1 - (1 - 1/n)**n: the multiplicities are those of n draws with replacement.
    n, B = 500, 4000
    own = np.stack([np.arange(n)[:, None]] * 2).astype(np.int32)
    seeds = block_seeds(np.random.SeedSequence(2), B)
    shares = kernels.bootstrap_exposure(own, np.zeros(1, np.int64), n, seeds, B)[:, 0, 0, 0]
    assert shares.mean() == pytest.approx(1 - (1 - 1 / n) ** n, abs=4 * shares.std() / np.sqrt(B))


# --- the randomization test -----------------------------------------------------------------------------------------


def brute_force_p(a, b, n_items, k, stat, alternative="two-sided"):
    """Share of all 2**n exchanges of the users' lists whose difference is at least as extreme as the observed one."""
    observed = values(b[:, :k], n_items)[stat] - values(a[:, :k], n_items)[stat]
    nulls = []
    for swap in itertools.product((False, True), repeat=a.shape[0]):
        s = np.array(swap)[:, None]
        x, y = np.where(s, b, a), np.where(s, a, b)
        nulls.append(values(y[:, :k], n_items)[stat] - values(x[:, :k], n_items)[stat])
    nulls = np.array(nulls)
    tol = 1e-12
    if alternative == "greater":
        return np.mean(nulls >= observed - tol)
    return np.mean(np.abs(nulls) >= abs(observed) - tol)


def test_exact_p_value_equals_the_enumeration_of_all_exchanges():
    rng = np.random.default_rng(6)
    a = random_lists(rng, 6, 8, 2, skew=1.5)
    b = random_lists(rng, 6, 8, 2, skew=0.0)
    result = compare_exposure({"a": a, "b": b}, n_items=8, metrics=["coverage@2", "gini@2"], n_resamples=9999)
    for stat, row in enumerate(result.comparisons):
        n_differing = int(row.n_differing)
        assert row.test_method == "randomization-exact (swap lists)"
        assert row.null_distribution.shape == (2**n_differing,)
        assert row.null_distribution[0] == row.difference  # pattern 0 is the observed arrangement
        assert row.p_value == pytest.approx(brute_force_p(a, b, 8, 2, stat), abs=1e-12)


def test_monte_carlo_p_value_is_within_its_error_of_the_enumeration():
    rng = np.random.default_rng(9)
    a = random_lists(rng, 12, 10, 3, skew=1.5)
    b = random_lists(rng, 12, 10, 3, skew=1.2)
    B = 3000  # below 2**12 = 4096 exchanges: drawn, not enumerated
    result = compare_exposure({"a": a, "b": b}, n_items=10, metrics=["coverage@3", "gini@3"], n_resamples=B)
    for stat, row in enumerate(result.comparisons):
        assert row.n_differing == 12 and row.test_method == "randomization (swap lists)"
        exact = brute_force_p(a, b, 10, 3, stat)
        assert 0.02 < exact < 0.98  # a p-value the test can miss either way
        assert abs(row.p_value - exact) < 4 * np.sqrt(exact * (1 - exact) / B) + 1 / B


def test_one_sided_p_values_and_intervals():
    rng = np.random.default_rng(9)
    a = random_lists(rng, 500, 400, 5, skew=1.2)
    b = random_lists(rng, 500, 400, 5, skew=0.4)  # spreads exposure: more coverage, lower Gini
    kw = {"n_items": 400, "metrics": ["coverage@5", "gini@5"], "n_resamples": 999}
    greater = compare_exposure({"a": a, "b": b}, alternative="greater", **kw)
    less = compare_exposure({"a": a, "b": b}, alternative="less", **kw)
    assert greater.get("coverage@5", "b").p_value == pytest.approx(1 / 1000)
    assert less.get("gini@5", "b").p_value == pytest.approx(1 / 1000)
    assert less.get("coverage@5", "b").p_value > 0.9
    assert greater.get("coverage@5", "b").ci_high == np.inf and less.get("gini@5", "b").ci_low == -np.inf


# --- the result ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_models():
    rng = np.random.default_rng(10)
    return {
        "pop": random_lists(rng, 300, 200, 10, skew=1.3, width=12),
        "ease": random_lists(rng, 300, 200, 10, skew=0.8, width=12),
        "elsa": random_lists(rng, 300, 200, 10, skew=0.6, width=12),
    }


def test_frame_has_one_row_per_candidate_and_metric(three_models):
    result = compare_exposure(three_models, n_items=200, n_resamples=499 + 500)
    frame = result.to_frame()
    assert list(frame.columns) == list(EXPOSURE_COLUMNS)
    assert list(zip(frame.candidate, frame.metric, strict=True)) == [
        ("ease", "coverage@10"), ("ease", "gini@10"), ("elsa", "coverage@10"), ("elsa", "gini@10"),
    ]  # fmt: skip
    assert (frame.baseline == "pop").all() and (frame.n_units == 300).all()
    assert (frame.ci_low <= frame.difference).all() and (frame.difference <= frame.ci_high).all()
    row = result.get("gini@10", "elsa")
    assert row.difference == row.candidate_value - row.baseline_value
    assert row.candidate_value == gini_index(three_models["elsa"], n_items=200, k=10)
    with pytest.raises(KeyError, match="no row for metric 'gini@5'"):
        result.get("gini@5", "elsa")


def test_same_seed_same_frame_and_another_seed_another_interval(three_models):
    kw = {"n_items": 200, "n_resamples": 999}
    first = compare_exposure(three_models, random_state=1, **kw).to_frame()
    pd.testing.assert_frame_equal(first, compare_exposure(three_models, random_state=1, **kw).to_frame())
    other = compare_exposure(three_models, random_state=2, **kw).to_frame()
    assert (first.ci_low != other.ci_low).any()
    np.testing.assert_array_equal(first.difference, other.difference)


def test_the_number_of_threads_does_not_change_the_results(three_models):
    kw = {"n_items": 200, "n_resamples": 999, "metrics": ["coverage@10", "gini@10", "gini@12"]}
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = compare_exposure(three_models, **kw)
    finally:
        numba.set_num_threads(before)
    many = compare_exposure(three_models, **kw)
    pd.testing.assert_frame_equal(one.to_frame(), many.to_frame())
    for x, y in zip(one.comparisons, many.comparisons, strict=True):
        np.testing.assert_array_equal(x.bootstrap_distribution, y.bootstrap_distribution)
        np.testing.assert_array_equal(x.null_distribution, y.null_distribution)


def test_a_pairs_numbers_depend_neither_on_other_pairs_nor_on_other_metrics(three_models):
    kw = {"n_items": 200, "n_resamples": 999}
    all_three = compare_exposure(three_models, metrics=["gini@12", "coverage@10"], **kw)
    pair = {k: three_models[k] for k in ("pop", "elsa")}
    alone = compare_exposure(pair, metrics="coverage@10", **kw)
    x, y = all_three.get("coverage@10", "elsa"), alone.get("coverage@10", "elsa")
    np.testing.assert_array_equal(x.bootstrap_distribution, y.bootstrap_distribution)
    np.testing.assert_array_equal(x.null_distribution, y.null_distribution)
    assert x.p_value == y.p_value and (x.ci_low, x.ci_high) == (y.ci_low, y.ci_high)


def test_exchanging_baseline_and_candidate_negates_the_difference_and_flips_the_interval(three_models):
    kw = {"n_items": 200, "n_resamples": 999}
    forward = compare_exposure(three_models, reference="pop", **kw).get("gini@10", "ease")
    backward = compare_exposure(three_models, reference="ease", **kw).get("gini@10", "pop")
    assert backward.difference == -forward.difference
    np.testing.assert_array_equal(backward.bootstrap_distribution, -forward.bootstrap_distribution)
    assert backward.ci_low == pytest.approx(-forward.ci_high, rel=1e-12)
    assert backward.ci_high == pytest.approx(-forward.ci_low, rel=1e-12)
    assert backward.p_value == forward.p_value


def test_identical_lists_differ_by_zero_with_p_one():
    lists = random_lists(np.random.default_rng(11), 200, 100, 10)
    shuffled = lists[:, ::-1]  # the same sets in another order: the same exposure
    result = compare_exposure({"a": lists, "b": shuffled}, n_items=100, n_resamples=999)
    for row in result.comparisons:
        assert row.difference == 0.0 and row.p_value == 1.0 and row.n_differing == 0
        assert row.ci_low == 0.0 and row.ci_high == 0.0 and row.bootstrap_standard_error == 0.0
        assert row.test_method == "randomization-exact (swap lists)"


def test_few_resamples_warn():
    with pytest.warns(LowResamplesWarning, match="n_resamples=99 is below 999"):
        compare_exposure({"a": TINY, "b": TINY[::-1]}, n_items=5, metrics="coverage@2", n_resamples=99)


# --- bad input ------------------------------------------------------------------------------------------------------

GOOD = np.array([[0, 1, 2], [3, 4, -1]])


@pytest.mark.parametrize(
    ("lists", "changes", "error", "message"),
    [
        ([GOOD, GOOD], {}, TypeError, r"lists: expected a mapping of model name .*, found list"),
        ({"a": GOOD}, {}, ValueError, r"lists: expected at least 2 models, found \['a'\]"),
        (
            {"a": GOOD, "b": GOOD.astype(float)},
            {},
            TypeError,
            r"lists\['b'\]: expected an integer .*found dtype float64",
        ),
        ({"a": GOOD, "b": GOOD > 0}, {}, TypeError, r"lists\['b'\]: expected an integer .*found dtype bool"),
        ({"a": GOOD, "b": GOOD[0]}, {}, ValueError, r"lists\['b'\]: expected a 2-D array .*found shape \(3,\)"),
        ({"a": GOOD, "b": GOOD[:0]}, {}, ValueError, r"lists\['b'\]: expected at least one row .*found shape \(0, 3\)"),
        ({"a": GOOD, "b": GOOD[:, :1]}, {}, ValueError, r"lists\['b'\]: expected at least 2 columns .*found 1"),
        (
            {"a": GOOD, "b": GOOD + 3},
            {},
            ValueError,
            r"lists\['b'\]: expected item indices in \[-1, 6\) .*found 6 in row 1",
        ),
        ({"a": GOOD - 2, "b": GOOD}, {}, ValueError, r"lists\['a'\]: expected item indices .*found -2 in row 0"),
        (
            {"a": GOOD, "b": [[0, 1, 2], [5, 5, 1]]},
            {},
            ValueError,
            r"lists\['b'\]: expected distinct items .*found item 5 twice in row 1",
        ),
        (
            {"a": GOOD, "b": GOOD[:1]},
            {},
            ValueError,
            r"lists\['b'\]: expected 2 rows \(users\), as lists\['a'\], found 1",
        ),
        (
            {"a": GOOD, "b": np.full((2, 3), -1)},
            {},
            ValueError,
            r"lists\['b'\]: expected at least one item in the first 2 columns \(gini@2\), found only",
        ),
        ({"a": GOOD, "": GOOD}, {}, ValueError, r"lists\[''\] \(the model name\): expected a non-empty name"),
        ({"a": GOOD, "b": GOOD}, {"n_items": 0}, ValueError, r"n_items: expected an integer in \[1, .*found 0"),
        (
            {"a": GOOD, "b": GOOD},
            {"metrics": ["ndcg@10"]},
            ValueError,
            r"metrics: expected keys 'coverage@<k>' or 'gini@<k>'.*\['ndcg@10'\]",
        ),
        ({"a": GOOD, "b": GOOD}, {"metrics": ["gini@0"]}, ValueError, r"metrics: expected keys .*\['gini@0'\]"),
        ({"a": GOOD, "b": GOOD}, {"metrics": []}, ValueError, r"metrics: expected at least one metric key"),
        ({"a": GOOD, "b": GOOD}, {"reference": "c"}, ValueError, r"reference: expected one of \('a', 'b'\), found 'c'"),
        ({"a": GOOD, "b": GOOD}, {"n_resamples": 0}, ValueError, r"n_resamples: expected an integer in \[1, .*found 0"),
        (
            {"a": GOOD, "b": GOOD},
            {"confidence_level": 1.0},
            ValueError,
            r"confidence_level: expected a number strictly between 0 and 1, found 1.0",
        ),
        (
            {"a": GOOD, "b": GOOD},
            {"alternative": "bigger"},
            ValueError,
            r"alternative: expected one of .*found 'bigger'",
        ),
        ({"a": GOOD, "b": GOOD}, {"random_state": -1}, ValueError, r"random_state: expected an integer >= 0, found -1"),
    ],
)
def test_compare_exposure_names_the_bad_argument(lists, changes, error, message):
    kw = {"n_items": 6, "metrics": ["coverage@2", "gini@2"], "reference": None} | changes
    options = {"n_resamples": 999, "confidence_level": 0.95, "alternative": "two-sided", "random_state": 0}
    options |= {k: kw.pop(k) for k in list(kw) if k in options}
    with pytest.raises(error, match=message):
        _compare_exposure_iv(lists, kw["n_items"], kw["metrics"], kw["reference"], **options)
    with pytest.raises(error, match=message):  # and through the public function, before any work
        compare_exposure(lists, **kw, **options)


@pytest.mark.parametrize(
    ("lists", "n_items", "k", "error", "message"),
    [
        (GOOD.astype(np.float32), 6, 2, TypeError, r"lists: expected an integer .*found dtype float32"),
        (GOOD, 6, 4, ValueError, r"lists: expected at least 4 columns .*found 3"),
        (GOOD, 6, 0, ValueError, r"k: expected an integer >= 1, found 0"),
        (GOOD, 6, 2.0, ValueError, r"k: expected an integer >= 1, found 2.0"),
        (GOOD, 4, 2, ValueError, r"lists: expected item indices in \[-1, 4\) .*found 4 in row 1"),
        (GOOD, True, 2, ValueError, r"n_items: expected an integer in \[1, .*found True"),
    ],
)
def test_point_functions_name_the_bad_argument(lists, n_items, k, error, message):
    with pytest.raises(error, match=message):
        _point_iv(lists, n_items, k)
    for metric in (catalogue_coverage, gini_index):
        with pytest.raises(error, match=message):
            metric(lists, n_items=n_items, k=k)


def test_gini_of_no_exposure_is_refused():
    with pytest.raises(ValueError, match=r"lists: expected at least one item .*found only padding"):
        gini_index(np.full((3, 2), -1), n_items=5, k=2)
    assert catalogue_coverage(np.full((3, 2), -1), n_items=5, k=2) == 0.0


def test_any_integer_dtype_is_accepted():
    for dtype in (np.int8, np.uint16, np.int64):
        assert catalogue_coverage(np.array([[0, 1], [2, 3]], dtype=dtype), n_items=5, k=2) == 0.8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)  # few users, and said so: not the dtype's doing
        compare_exposure(
            {"a": GOOD[:, :2].astype(np.uint8), "b": GOOD[::-1, :2]}, n_items=6, n_resamples=999, metrics="gini@2"
        )


def test_few_differing_users_are_warned_of_and_no_end_passes_the_metric_s_range():
    rng = np.random.default_rng(4)
    a = random_lists(rng, 6, 40, 3, skew=1.0)
    b = a.copy()
    b[:2] = random_lists(rng, 2, 40, 3, skew=0.2)  # two users' lists differ
    with pytest.warns(FewNonzeroUnitsWarning, match=r"fewer than 30 users' lists differ from a's for b \(2\)"):
        result = compare_exposure({"a": a, "b": b}, n_items=40, metrics=("coverage@3",), n_resamples=999)
    row = result.comparisons[0]
    assert -1.0 <= row.ci_low <= row.difference <= row.ci_high <= 1.0
    empty = np.full_like(a, -1)
    empty[0, 0] = 0  # a model that exposes a single item against one that exposes many
    with pytest.warns(FewNonzeroUnitsWarning):
        wide = compare_exposure({"a": empty, "b": b}, n_items=40, metrics=("coverage@3",), n_resamples=999)
    assert wide.comparisons[0].ci_high <= 1.0


def test_padding_anywhere_is_no_exposure():
    front = np.array([[-1, 0, 2], [0, 1, 2]])
    assert catalogue_coverage(front, n_items=6, k=3) == 3 / 6  # items 0, 1, 2
    # exposures 2, 1, 2, 0, 0, 0: the (2i - n - 1) form by hand, ascending 0, 0, 0, 1, 2, 2 over n = 6
    expected = sum((2 * i - 7) * c for i, c in enumerate([0, 0, 0, 1, 2, 2], start=1)) / (6 * 5)
    assert gini_index(front, n_items=6, k=3) == pytest.approx(expected, rel=1e-15)
