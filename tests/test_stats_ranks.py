"""Ranks over datasets: Friedman against scipy, the post-hoc tests against scikit-posthocs, the floors by exact
enumeration, and the diagram's groups against every maximal clique found by brute force."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import scikit_posthocs
import scipy.stats

from mlflow_recsys.stats import RANK_COLUMNS, datasets_needed, p_value_floor, rank_across_datasets


def _scores(seed, n_datasets, n_models, spread=0.5):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(n_datasets, n_models)) + spread * np.arange(n_models)
    return pd.DataFrame(values, index=[f"d{i}" for i in range(n_datasets)], columns=[f"M{j}" for j in range(n_models)])


CASES = [(seed, n, k) for seed, (n, k) in enumerate([(5, 3), (8, 4), (10, 5), (15, 6), (12, 3), (20, 4)])]


def _matrix(analysis, column):
    frame = analysis.to_frame()
    out = {}
    for row in frame.itertuples():
        out[row.model, row.other] = out[row.other, row.model] = getattr(row, column)
    return out


@pytest.mark.parametrize(("seed", "n", "k"), CASES)
def test_ranks_and_friedman_agree_with_scipy(seed, n, k):
    scores = _scores(seed, n, k)
    analysis = rank_across_datasets(scores)
    expected = scipy.stats.rankdata(-scores.to_numpy(), axis=1).mean(axis=0)
    ranks = dict(zip(analysis.models, analysis.average_ranks, strict=True))
    assert [ranks[m] for m in scores.columns] == pytest.approx(expected, abs=1e-12)
    assert list(analysis.average_ranks) == sorted(analysis.average_ranks)  # best first
    statistic, p = scipy.stats.friedmanchisquare(*scores.to_numpy().T)
    assert (analysis.friedman_statistic, analysis.friedman_p_value) == pytest.approx((statistic, p), rel=1e-12)


@pytest.mark.parametrize(("seed", "n", "k"), CASES)
def test_nemenyi_p_values_agree_with_scikit_posthocs(seed, n, k):
    scores = _scores(seed, n, k)
    ours = _matrix(rank_across_datasets(scores, posthoc="nemenyi"), "adjusted_p_value")
    theirs = scikit_posthocs.posthoc_nemenyi_friedman(scores.to_numpy())
    for i, j in itertools.combinations(range(k), 2):
        assert ours[f"M{i}", f"M{j}"] == pytest.approx(theirs.iloc[i, j], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("seed", "n", "k"), CASES)
def test_wilcoxon_holm_p_values_agree_with_scikit_posthocs(seed, n, k):
    scores = _scores(seed, n, k)
    analysis = rank_across_datasets(scores)
    long = scores.melt(var_name="model", value_name="score")
    theirs = scikit_posthocs.posthoc_wilcoxon(long, val_col="score", group_col="model", p_adjust="holm")
    raw = scikit_posthocs.posthoc_wilcoxon(long, val_col="score", group_col="model")
    ours, ours_raw = _matrix(analysis, "adjusted_p_value"), _matrix(analysis, "p_value")
    for a, b in itertools.combinations(scores.columns, 2):
        assert ours[a, b] == pytest.approx(theirs.loc[a, b], rel=1e-12)
        assert ours_raw[a, b] == pytest.approx(raw.loc[a, b], rel=1e-12)


def test_the_wilcoxon_floor_is_the_exact_tests_smallest_p_value_by_enumeration():
    for n in range(2, 11):
        # Every sign pattern of the ranks 1..n: the two-sided p-value of the most extreme one.
        sums = [
            sum(r for r, s in zip(range(1, n + 1), signs, strict=True) if s)
            for signs in itertools.product((0, 1), repeat=n)
        ]
        top = max(sums)
        smallest = 2 * sum(s >= top for s in sums) / 2**n
        assert p_value_floor(2, n) == pytest.approx(smallest, rel=1e-12)
        assert p_value_floor(4, n) == pytest.approx(min(1.0, 6 * smallest), rel=1e-12)  # Holm's first step, 6 pairs


def test_five_datasets_never_make_two_models_differ_and_six_may():
    a = np.array([0.30, 0.31, 0.25, 0.40, 0.35, 0.28])
    five = rank_across_datasets({"A": dict(enumerate(a[:5])), "B": dict(enumerate(a[:5] - 0.1))})
    assert five.p_values[0] == pytest.approx(0.0625) and not five.significant[0] and not five.conclusive
    assert five.p_value_floor == pytest.approx(0.0625) and five.datasets_needed == 6
    six = rank_across_datasets({"A": dict(enumerate(a)), "B": dict(enumerate(a - 0.1))})
    assert six.p_values[0] == pytest.approx(0.03125) and six.significant[0] and six.conclusive


def test_datasets_needed_is_the_first_count_whose_floor_reaches_alpha():
    for k, posthoc in itertools.product((2, 3, 4, 6, 10), ("wilcoxon-holm", "nemenyi")):
        needed = datasets_needed(k, posthoc, 0.05)
        assert p_value_floor(k, needed, posthoc) <= 0.05
        assert needed == 2 or p_value_floor(k, needed - 1, posthoc) > 0.05
    # By the closed form: 2 m / 2^N <= alpha.
    assert [datasets_needed(k) for k in (2, 4, 10)] == [math.ceil(1 + math.log2(m / 0.05)) for m in (1, 6, 45)]


def test_tied_differences_do_not_take_the_p_value_below_the_exact_floor():
    # Five equal differences: scipy's normal approximation gives about 0.043; no exact test goes below 2 / 2^5.
    scores = {"A": dict(enumerate([0.5, 0.6, 0.7, 0.8, 0.9])), "B": dict(enumerate([0.4, 0.5, 0.6, 0.7, 0.8]))}
    approx = scipy.stats.wilcoxon([0.1] * 5, method="approx", correction=False).pvalue
    assert approx < 0.0625
    analysis = rank_across_datasets(scores)
    assert analysis.p_values[0] == pytest.approx(0.0625) and not analysis.significant[0]


def test_no_pair_is_significant_when_the_friedman_test_does_not_reject():
    # A is above B by a hair on every one of 12 datasets; C, D, E are noise, so the omnibus test does not reject.
    rng = np.random.default_rng(0)
    a = rng.normal(size=12)
    b = a - rng.uniform(0.01, 0.02, 12)
    scores = pd.DataFrame(np.column_stack([a, b, rng.normal(size=(12, 3))]), columns=list("ABCDE"))
    analysis = rank_across_datasets(scores)
    assert analysis.friedman_p_value > 0.05 and not analysis.friedman_rejects
    assert analysis.adjusted_p_values.min() <= 0.05  # the pair alone would pass
    assert not analysis.significant.any()


def _maximal_cliques(models, differs):
    cliques = [
        set(c)
        for size in range(2, len(models) + 1)
        for c in itertools.combinations(models, size)
        if not any(frozenset(p) in differs for p in itertools.combinations(c, 2))
    ]
    return [c for c in cliques if not any(c < other for other in cliques)]


@pytest.mark.parametrize(("seed", "n", "k"), [(0, 20, 6), (1, 30, 8), (3, 25, 7), (4, 40, 10)])
def test_nemenyi_groups_are_the_maximal_cliques_of_models_that_do_not_differ(seed, n, k):
    analysis = rank_across_datasets(_scores(seed, n, k, spread=0.3), posthoc="nemenyi")
    assert analysis.significant.any()
    differs = {frozenset(p) for p, s in zip(analysis.pairs, analysis.significant, strict=True) if s}
    assert sorted(map(sorted, map(set, analysis.groups))) == sorted(
        map(sorted, _maximal_cliques(analysis.models, differs))
    )
    # ... and in ranks, a group spans less than the critical difference.
    rank = dict(zip(analysis.models, analysis.average_ranks, strict=True))
    assert all(rank[g[-1]] - rank[g[0]] < analysis.critical_difference for g in analysis.groups)


def test_the_critical_difference_is_demsars():
    # Demšar (2006), table 5(a): q_0.05 = 2.569 for 4 models; CD = q sqrt(k (k + 1) / (6 N)).
    analysis = rank_across_datasets(_scores(0, 14, 4), posthoc="nemenyi")
    assert analysis.critical_difference == pytest.approx(2.569 * math.sqrt(4 * 5 / (6 * 14)), abs=2e-3)


def test_the_frame_has_one_row_per_pair_best_first():
    analysis = rank_across_datasets(_scores(1, 8, 4))
    frame = analysis.to_frame()
    assert tuple(frame.columns) == RANK_COLUMNS and len(frame) == 6
    assert (frame["rank"] <= frame["other_rank"]).all()


@pytest.mark.parametrize(
    ("scores", "kwargs", "message"),
    [
        ({"A": {"d": 1.0, "e": 2.0}}, {}, "scores: expected at least 2 models and 2 datasets, found 1 and 2"),
        ({"A": {"d": 1.0}, "B": {"d": 2.0}}, {}, "found 2 and 1"),
        ({"A": {"d": 1.0, "e": 2.0}, "B": {"d": 2.0}}, {}, r"a finite score of every model on every dataset.*B on e"),
        ({"A": {"d": 1.0, "e": float("inf")}, "B": {"d": 2.0, "e": 1.0}}, {}, "A on e"),
        ({"A": {"d": "x", "e": 1.0}, "B": {"d": 2.0, "e": 1.0}}, {}, "scores: expected numbers"),
        ([1, 2], {}, "scores: expected a frame"),
        ({"A": {"d": 1.0, "e": 2.0}, "B": {"d": 2.0, "e": 1.0}}, {"posthoc": "tukey"}, "posthoc: expected"),
        ({"A": {"d": 1.0, "e": 2.0}, "B": {"d": 2.0, "e": 1.0}}, {"alpha": 0}, "alpha: expected"),
    ],
)
def test_bad_input_names_the_argument(scores, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rank_across_datasets(scores, **kwargs)


def test_a_model_named_twice_is_refused():
    frame = pd.DataFrame([[1.0, 2.0], [2.0, 1.0]], columns=["A", "A"])
    with pytest.raises(ValueError, match=r"scores: expected each of the models once, found \['A'\]"):
        rank_across_datasets(frame)


@pytest.mark.parametrize(("seed", "n", "k"), [(0, 20, 6), (1, 30, 8), (3, 25, 7)])
def test_wilcoxon_groups_are_the_maximal_runs_in_rank_order_of_models_that_do_not_differ(seed, n, k):
    analysis = rank_across_datasets(_scores(seed, n, k, spread=0.3))
    assert analysis.significant.any()
    differs = {frozenset(p) for p, s in zip(analysis.pairs, analysis.significant, strict=True) if s}
    models = analysis.models
    runs = [
        models[i : j + 1]
        for i, j in itertools.combinations(range(k), 2)
        if not any(frozenset(p) in differs for p in itertools.combinations(models[i : j + 1], 2))
    ]
    maximal = [r for r in runs if not any(set(r) < set(o) for o in runs)]
    assert sorted(analysis.groups) == sorted(maximal)
