"""Item-side metrics of each list (ARP, APLT, novelty) and the training popularity they read, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.evaluation import EvaluationResult, evaluate_rankings, evaluate_recommender
from mlflow_recsys.metrics import (
    APLT,
    ARP,
    NDCG,
    ItemPopularity,
    Novelty,
    higher_is_better,
    metric_from_key,
    parse_metric_keys,
)
from mlflow_recsys.stats import compare_models


def _popularity():
    # 5 training users, 6 items; item 5 was never seen in training.
    x_train = sp.csr_matrix(
        np.array(
            [
                [1, 1, 0, 0, 0, 0],
                [1, 1, 1, 0, 0, 0],
                [1, 0, 0, 1, 0, 0],
                [1, 1, 0, 0, 1, 0],
                [0, 1, 0, 0, 0, 0],
            ],
            dtype=np.float32,
        )
    )
    return ItemPopularity.from_interactions(x_train, head_share=0.3)


def test_popularity_counts_training_users_and_splits_head_from_tail():
    pop = _popularity()
    assert pop.counts.tolist() == [4, 4, 1, 1, 1, 0]
    assert pop.n_users == 5 and pop.n_items == 6
    # ceil(0.3 * 6) = 2 head items: items 0 and 1 (4 users each); the other four are the tail.
    assert np.flatnonzero(pop.long_tail).tolist() == [2, 3, 4, 5]


def test_arp_aplt_and_novelty_by_hand():
    pop = _popularity()
    lists = np.array([[0, 2, 5], [1, 3, -1], [-1, -1, -1]])
    arp = ARP([2, 3]).from_lists(lists, pop)
    # row 0: top 2 = items 0, 2 -> (4 + 1) / 2; top 3 adds item 5 (0 users) -> 5 / 3
    # row 1: items 1, 3 -> (4 + 1) / 2 at both cutoffs (the padding is no item); row 2: no item -> no mean, NaN
    np.testing.assert_allclose(arp["arp@2"], [2.5, 2.5, np.nan], rtol=1e-15)
    np.testing.assert_allclose(arp["arp@3"], [5 / 3, 2.5, np.nan], rtol=1e-15)
    aplt = APLT(3).from_lists(lists, pop)["aplt@3"]
    np.testing.assert_allclose(aplt, [2 / 3, 1 / 2, np.nan], rtol=1e-15)
    novelty = Novelty(3).from_lists(lists, pop)["novelty@3"]
    # -log2(4/5) for items 0 and 1, -log2(1/5) for items 2 and 3, and item 5 (unseen) counts as seen once: -log2(1/5)
    seen_four, seen_once = -math.log2(4 / 5), -math.log2(1 / 5)
    np.testing.assert_allclose(
        novelty, [(seen_four + 2 * seen_once) / 3, (seen_four + seen_once) / 2, np.nan], rtol=1e-14
    )


@pytest.mark.parametrize("cls", [ARP, APLT, Novelty])
def test_item_metrics_stay_within_their_range(cls):
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 50, 40)
    pop = ItemPopularity(counts, n_users=60)
    lists = np.argsort(rng.random((300, 40)), axis=1)[:, :10]
    lists[rng.random((300, 10)) < 0.1] = -1
    lists[0] = -1  # a list with no item: NaN, outside every range
    values = cls(10).from_lists(lists, pop)[f"{cls.name}@10"]
    assert np.isnan(values[0])
    values = values[1:]
    low, high = cls.value_range
    assert values.min() >= low and values.max() <= high
    # an upper end any list can reach: the most popular count, every item in the tail, log2 U bits
    reach = {"arp": counts.max(), "aplt": 1.0, "novelty": np.log2(60)}[cls.name]
    assert values.max() <= reach + 1e-12


def test_item_metrics_parse_from_keys_and_define_themselves():
    assert metric_from_key("arp@10") == ARP(10)
    assert parse_metric_keys(["novelty@5", "aplt@5", "ndcg@5"]) == [Novelty(5), APLT(5), NDCG(5)]
    assert "Abdollahpouri" in ARP(10).definitions["arp@10"]
    assert "Zhou" in Novelty(10).definitions["novelty@10"]
    with pytest.raises(TypeError, match="arp@10: an item-side metric reads the ranked items"):
        ARP(10).from_hits(np.zeros((1, 10), dtype=bool), np.ones(1))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"counts": np.array([1.5, 2.0]), "n_users": 3}, "counts: expected a non-empty 1-D array of integer counts"),
        ({"counts": np.array([1, -1]), "n_users": 3}, "counts: expected counts >= 0, found -1 for item 1"),
        ({"counts": np.array([1, 2]), "n_users": 0}, "n_users: expected a positive int, found 0"),
        ({"counts": np.array([1, 4]), "n_users": 3}, "n_users: expected at least the largest count 4, found 3"),
        ({"counts": np.array([1, 2]), "n_users": 3, "head_share": 1.0}, r"head_share: expected a share .* found 1.0"),
    ],
)
def test_popularity_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ItemPopularity(**kwargs)


def test_from_lists_checks_the_lists_against_the_catalogue():
    pop = _popularity()
    with pytest.raises(ValueError, match=r"rankings: expected item indices in \[0, 6\)"):
        ARP(1).from_lists(np.array([[6]]), pop)
    with pytest.raises(TypeError, match="popularity: expected an ItemPopularity, found ndarray"):
        ARP(1).from_lists(np.array([[0]]), pop.counts)


class _FixedLists:
    """A model whose lists are given: enough for evaluate_recommender."""

    def __init__(self, lists, n_items):
        self.lists, self.n_items = lists, n_items

    def recommend(self, source_rows, k):
        rows = source_rows.shape[0]
        start = self._start
        self._start += rows
        return self.lists[start : start + rows, :k], np.zeros((rows, k))

    _start = 0


def test_evaluation_scores_item_metrics_from_the_lists_it_scored():
    pop = _popularity()
    source = sp.csr_matrix(np.array([[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]], dtype=np.float32))
    targets = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0]], dtype=np.float32))
    lists = np.array([[2, 0, 4], [1, 3, 5], [0, 3, 1]])  # row 0 lists its fold-in item 2, row 2 its fold-in item 0
    metrics = ["ndcg@2", "arp@2", "aplt@2"]
    with pytest.warns(UserWarning, match=r"2 fold-in item\(s\)"):
        result = evaluate_recommender(
            _FixedLists(lists, 6), source=source, targets=targets, metrics=metrics, item_popularity=pop, batch_size=2
        )
    # The model is asked for 2 items; a fold-in item taken out leaves padding behind the rest.
    np.testing.assert_array_equal(result.rankings, np.array([[0, -1], [1, 3], [3, -1]], dtype=np.int32))
    assert result.rankings.dtype == np.int32 and result.n_items == 6
    np.testing.assert_allclose(result.per_user["arp@2"], [4.0, (4 + 1) / 2, 1.0])
    np.testing.assert_allclose(result.per_user["aplt@2"], [0.0, 1 / 2, 1.0])
    with pytest.warns(UserWarning, match=r"2 fold-in item\(s\)"):
        again = evaluate_rankings(lists[:, :2], targets=targets, source=source, metrics=metrics, item_popularity=pop)
    for key in metrics:
        np.testing.assert_array_equal(again.per_user[key], result.per_user[key])
    np.testing.assert_array_equal(again.rankings, result.rankings)


def test_evaluation_refuses_item_metrics_without_the_popularity_of_this_catalogue():
    targets = sp.csr_matrix(np.eye(3, dtype=np.float32))
    lists = np.array([[0, 1], [1, 2], [2, 0]])
    with pytest.raises(ValueError, match="item_popularity: expected the training data's ItemPopularity for .* arp@2"):
        evaluate_rankings(lists, targets=targets, metrics=["ndcg@2", "arp@2"])
    with pytest.raises(ValueError, match="item_popularity: expected 3 items like targets, found 6"):
        evaluate_rankings(lists, targets=targets, metrics=["arp@2"], item_popularity=_popularity())
    with pytest.raises(ValueError, match="item_popularity: expected an ItemPopularity, found dict"):
        evaluate_rankings(lists, targets=targets, metrics=["arp@2"], item_popularity={})


@pytest.mark.parametrize("seed", range(3))
def test_arp_and_aplt_equal_recboles_where_the_conventions_meet(recbole_metrics_module, seed):
    """RecBole's AveragePopularity and TailPercentage, user by user, on full lists (RecBole has no padding) over a
    catalogue every item of which was seen in training with a distinct count (RecBole leaves unseen items out of the
    tail and breaks ties the other way) and 50 items (so 0.8 of them is a whole number: its tail_ratio = 1 - 0.2)."""
    rng = np.random.default_rng(seed)
    n_items, k = 50, int(rng.integers(1, 20))
    counts = rng.permutation(np.arange(1, n_items + 1)) * 3  # distinct, all seen
    pop = ItemPopularity(counts, n_users=int(counts.max()) + 5)
    lists = np.argsort(rng.random((40, n_items)), axis=1)[:, :k]
    ours_arp, ours_aplt = ARP(k).from_lists(lists, pop)[f"arp@{k}"], APLT(k).from_lists(lists, pop)[f"aplt@{k}"]
    item_count = dict(enumerate(counts.tolist()))
    average_popularity = recbole_metrics_module.AveragePopularity
    theirs_arp = average_popularity.metric_info(None, average_popularity.get_pop(None, lists, item_count))[:, k - 1]
    tail_percentage = recbole_metrics_module.TailPercentage
    settings = type("Config", (), {"tail": 0.8})()  # get_tail reads only self.tail
    theirs_aplt = tail_percentage.metric_info(None, tail_percentage.get_tail(settings, lists, item_count))[:, k - 1]
    np.testing.assert_allclose(ours_arp, theirs_arp, rtol=1e-12)
    np.testing.assert_allclose(ours_aplt, theirs_aplt, rtol=1e-12)


def test_a_significant_difference_on_an_item_side_metric_reads_higher_or_lower_not_better_or_worse():
    assert higher_is_better("ndcg@10") is True and higher_is_better("revenue@5") is True
    assert higher_is_better("arp@10") is None and higher_is_better("novelty@3") is None
    rng = np.random.default_rng(0)
    base = {"arp@10": rng.uniform(50, 100, 200), "ndcg@10": rng.uniform(0, 0.5, 200)}
    cand = {"arp@10": base["arp@10"] - 20, "ndcg@10": base["ndcg@10"] + 0.2}
    results = {
        name: EvaluationResult.from_per_user(values, sample_ids=np.arange(200), targets_fingerprint="f" * 64)
        for name, values in (("A", base), ("B", cand))
    }
    report = compare_models(results, metrics=["ndcg@10", "arp@10"], reference="A", n_resamples=999)
    directions = {c.metric: c.direction for c in report.comparisons}
    assert directions == {"ndcg@10": "better", "arp@10": "lower"}
    assert "lower for the candidate (this metric has no better side)" in report.results_text("arp@10", "B")
    # A higher score on a metric with no better side is neither an improvement nor a win, in every sentence.
    higher = compare_models(
        {"A": results["B"], "B": results["A"]}, metrics=["ndcg@10", "arp@10"], reference="A", n_resamples=999
    )
    arp, ndcg = higher.results_text("arp@10", "B"), higher.results_text("ndcg@10", "B")
    assert "B scored 20.0000 higher than A on arp@10" in arp and "higher for 200 users, lower for 0" in arp
    assert "improved" not in arp and "won" not in arp
    assert "worse" in higher.to_frame().set_index("metric").loc["ndcg@10", "direction"]
    assert "B scored 0.2000 lower than A on ndcg@10" in ndcg and "won on 0 users, lost on 200" in ndcg
    for text in (str(higher), higher.to_markdown()):
        assert "improved arp@10" not in text and "improved arp\\@10" not in text


def test_an_evaluation_refuses_a_list_with_no_item_for_the_item_side_metrics():
    targets = sp.csr_matrix(np.eye(6, dtype=np.float32)[:3])
    lists = np.array([[0, 1], [-1, -1], [2, 3]])  # the second user got no recommendation
    with pytest.raises(ValueError, match=r"rankings: expected an item in every list for .* arp@2, found 1 list"):
        evaluate_rankings(lists, targets=targets, metrics=["ndcg@2", "arp@2"], item_popularity=_popularity())
    result = evaluate_rankings(lists, targets=targets, metrics=["ndcg@2"])  # accuracy alone scores it a miss
    assert result.per_user["ndcg@2"][1] == 0.0
