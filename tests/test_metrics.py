"""Ranking metrics against hand-computed values and an independent per-row loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.metrics import (
    MAP,
    METRIC_CLASSES,
    MRR,
    NDCG,
    CalibratedRecall,
    HitRate,
    Precision,
    Recall,
    hit_matrix,
    metric_from_key,
    parse_metric_keys,
)

ALL_CLASSES = [Recall, CalibratedRecall, NDCG, MRR, MAP, Precision, HitRate]


def targets_from_sets(sets: list[set[int]], n_items: int) -> sp.csr_matrix:
    rows = [r for r, items in enumerate(sets) for _ in items]
    cols = [c for items in sets for c in sorted(items)]
    data = np.ones(len(cols), dtype=np.float32)
    return sp.csr_matrix((data, (rows, cols)), shape=(len(sets), n_items), dtype=np.float32)


def compute_all(rankings, targets, k) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for cls in ALL_CLASSES:
        out.update(cls(k).compute(np.asarray(rankings, dtype=np.int64), targets))
    return out


# --- hand-computed cases -------------------------------------------------------


def test_recall_and_calibrated_recall_differ_when_targets_exceed_k():
    # targets {1, 4, 7}; top-2 = [4, 2] -> one hit (item 4)
    targets = targets_from_sets([{1, 4, 7}], 10)
    values = compute_all([[4, 2, 1, 7]], targets, 2)
    assert values["recall@2"][0] == pytest.approx(1 / 3)  # 1 hit / |R|=3
    assert values["calibrated_recall@2"][0] == pytest.approx(1 / 2)  # 1 hit / min(2, 3)


def test_recall_reaches_one_when_all_targets_ranked_within_k():
    # top-4 = [4, 2, 1, 7] holds all of {1, 4, 7}: 3/3 and 3/min(4, 3)
    targets = targets_from_sets([{1, 4, 7}], 10)
    values = compute_all([[4, 2, 1, 7]], targets, 4)
    assert values["recall@4"][0] == pytest.approx(1.0)
    assert values["calibrated_recall@4"][0] == pytest.approx(1.0)


def test_row_without_hit_scores_zero_on_every_metric():
    targets = targets_from_sets([{0, 9}], 10)
    values = compute_all([[1, 2, 3, 4, 5]], targets, [1, 5])
    assert len(values) == 2 * len(ALL_CLASSES)
    for key, v in values.items():
        assert v[0] == 0.0, key


def test_row_without_targets_is_nan_from_compute():
    # the evaluation drops such rows; compute itself marks them undefined
    targets = targets_from_sets([set(), {2}], 10)
    values = compute_all([[0, 1, 2], [2, 0, 1]], targets, 3)
    for key, v in values.items():
        assert np.isnan(v[0]), key
        assert not np.isnan(v[1]), key


def test_ndcg_ideal_dcg_runs_over_min_of_k_and_target_count():
    targets = targets_from_sets([{1, 4, 7}, {3}], 10)
    rankings = [[4, 2, 1, 7], [5, 3, 6, 8]]
    values = NDCG([2, 4]).compute(np.array(rankings), targets)
    # row 0, k=2: DCG = 1/log2(2) = 1; IDCG over min(2,3)=2 ranks = 1 + 1/log2(3)
    assert values["ndcg@2"][0] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # row 0, k=4: hits at ranks 1, 3, 4 -> DCG = 1 + 1/log2(4) + 1/log2(5);
    # IDCG over min(4,3)=3 ranks = 1 + 1/log2(3) + 1/log2(4)
    dcg = 1 + 0.5 + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 0.5
    assert values["ndcg@4"][0] == pytest.approx(dcg / idcg)
    # row 1: one target hit at rank 2 -> 1/log2(3); ideal over min(k,1)=1 rank = 1
    assert values["ndcg@2"][1] == pytest.approx(1 / math.log2(3))
    assert values["ndcg@4"][1] == pytest.approx(1 / math.log2(3))


def test_ndcg_of_perfect_ranking_is_one_even_with_more_targets_than_k():
    targets = targets_from_sets([{1, 2, 3, 4, 5}], 10)
    values = NDCG(3).compute(np.array([[5, 1, 3]]), targets)
    assert values["ndcg@3"][0] == pytest.approx(1.0)


def test_mrr_uses_rank_of_first_hit_within_k():
    targets = targets_from_sets([{3, 8}, {3}, {9}], 10)
    rankings = np.array([[5, 6, 3, 8], [3, 1, 2, 0], [0, 1, 2, 9]])
    values = MRR([3, 4]).compute(rankings, targets)
    # row 0: first hit at rank 3 (the second hit at 4 does not matter)
    assert values["mrr@3"][0] == pytest.approx(1 / 3)
    assert values["mrr@4"][0] == pytest.approx(1 / 3)
    # row 1: hit at rank 1
    assert values["mrr@3"][1] == 1.0
    # row 2: the only hit is at rank 4, outside k=3
    assert values["mrr@3"][2] == 0.0
    assert values["mrr@4"][2] == pytest.approx(1 / 4)


def test_map_averages_precision_at_hit_ranks_over_min_k_and_targets():
    targets = targets_from_sets([{1, 4, 7}, {3}, {0, 1, 2, 3, 4, 5}], 10)
    rankings = np.array([[4, 2, 1, 7], [5, 3, 6, 8], [9, 0, 8, 1]])
    values = MAP([2, 4]).compute(rankings, targets)
    # row 0, k=2: hit at rank 1 -> P@1 = 1; / min(2,3)=2 -> 0.5
    assert values["map@2"][0] == pytest.approx(0.5)
    # row 0, k=4: hits at ranks 1,3,4 -> (1/1 + 2/3 + 3/4) / min(4,3)=3
    assert values["map@4"][0] == pytest.approx((1 + 2 / 3 + 3 / 4) / 3)
    # row 1: hit at rank 2 -> P@2 = 1/2; / min(k,1)=1
    assert values["map@2"][1] == pytest.approx(0.5)
    assert values["map@4"][1] == pytest.approx(0.5)
    # row 2, k=4: hits at ranks 2,4 -> (1/2 + 2/4) / min(4,6)=4
    assert values["map@4"][2] == pytest.approx((0.5 + 0.5) / 4)


def test_precision_divides_by_k_and_hit_rate_is_binary():
    targets = targets_from_sets([{1, 4, 7}, {3}, {0}], 10)
    rankings = np.array([[4, 2, 1, 7, -1], [5, 3, 6, 8, 9], [1, 2, 3, 4, 5]])
    p = Precision([2, 5]).compute(rankings, targets)
    h = HitRate([1, 5]).compute(rankings, targets)
    # row 0: 1 hit in top 2 -> 1/2; 3 hits in top 5 -> 3/5 (padding still counts in k)
    assert p["precision@2"][0] == pytest.approx(1 / 2)
    assert p["precision@5"][0] == pytest.approx(3 / 5)
    # row 1: one hit at rank 2 -> 1/2 and 1/5
    assert p["precision@2"][1] == pytest.approx(1 / 2)
    assert p["precision@5"][1] == pytest.approx(1 / 5)
    np.testing.assert_array_equal(h["hit_rate@1"], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(h["hit_rate@5"], [1.0, 1.0, 0.0])


def test_padding_minus_one_is_never_a_hit():
    # -1 in row 1 must not match item n_items-1 of row 0 (flattened key row*n+item)
    # nor item 0 of its own row
    n_items = 10
    targets = targets_from_sets([{9}, {0, 5}], n_items)
    rankings = np.array([[-1, -1, -1], [-1, 5, -1]])
    hits = hit_matrix(rankings, targets, 3)
    np.testing.assert_array_equal(hits, [[False, False, False], [False, True, False]])
    values = compute_all(rankings, targets, 3)
    assert values["hit_rate@3"][0] == 0.0
    assert values["mrr@3"][1] == pytest.approx(1 / 2)  # first real hit at rank 2
    assert values["recall@3"][1] == pytest.approx(1 / 2)  # 1 of 2 targets


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64, np.uint16])
def test_hit_matrix_is_plain_set_membership_row_by_row(dtype):
    """Each ranked item is looked up in its own row's targets only: checked against Python sets on random lists with
    padding, rows without targets, rows with every item a target, and unsorted duplicate target entries."""
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    n, n_items, k = 300, 40, 12
    sets = [set(rng.choice(n_items, size=int(rng.integers(0, 8)), replace=False).tolist()) for _ in range(n)]
    sets[0], sets[1] = set(), set(range(n_items))
    rows, cols = zip(*[(r, i) for r, items in enumerate(sets) for i in items for _ in range(2)], strict=True)
    order = rng.permutation(len(rows))
    targets = sp.csr_matrix((np.ones(len(rows)), (np.array(rows)[order], np.array(cols)[order])), shape=(n, n_items))
    targets.has_sorted_indices = False
    rankings = np.array([rng.permutation(n_items)[:k] for _ in range(n)])
    if np.issubdtype(dtype, np.signedinteger):
        rankings[rng.random((n, k)) < 0.1] = -1  # padding anywhere, as a short list would have it at the end
    expected = [[int(item) in sets[r] for item in rankings[r]] for r in range(n)]
    np.testing.assert_array_equal(hit_matrix(rankings.astype(dtype), targets, k), expected)
    big = sp.csr_matrix(targets)
    big.indptr, big.indices = big.indptr.astype(np.int64), big.indices.astype(np.int64)
    np.testing.assert_array_equal(hit_matrix(rankings.astype(dtype), big, k), expected)


def test_extra_ranking_columns_beyond_max_k_are_ignored():
    targets = targets_from_sets([{7}], 10)
    values = Recall(2).compute(np.array([[1, 2, 7]]), targets)
    assert values["recall@2"][0] == 0.0


def test_duplicate_stored_target_entries_count_once():
    # an uncanonical CSR with the pair (0, 3) stored twice is still one target
    targets = sp.csr_matrix((np.ones(3, dtype=np.float32), np.array([3, 3, 5]), np.array([0, 3])), shape=(1, 10))
    values = Recall(2).compute(np.array([[3, 1]]), targets)
    assert values["recall@2"][0] == pytest.approx(1 / 2)  # 1 hit / |{3, 5}|


# --- cross-check against a plain loop ----------------------------------------


def reference_values(ranking: list[int], relevant: set[int], k: int) -> dict[str, float]:
    """Straightforward per-row definitions, written independently of the module."""
    top = ranking[:k]
    hit_flags = [item >= 0 and item in relevant for item in top]
    n_hits = sum(hit_flags)
    n_rel = len(relevant)
    cap = min(k, n_rel)
    dcg = sum(1 / math.log2(r + 2) for r, hit in enumerate(hit_flags) if hit)
    idcg = sum(1 / math.log2(r + 2) for r in range(cap))
    first = next((r + 1 for r, hit in enumerate(hit_flags) if hit), None)
    ap = 0.0
    seen = 0
    for r, hit in enumerate(hit_flags, start=1):
        if hit:
            seen += 1
            ap += seen / r
    return {
        f"recall@{k}": n_hits / n_rel,
        f"calibrated_recall@{k}": n_hits / cap,
        f"precision@{k}": n_hits / k,
        f"hit_rate@{k}": 1.0 if n_hits else 0.0,
        f"ndcg@{k}": dcg / idcg,
        f"mrr@{k}": 1 / first if first else 0.0,
        f"map@{k}": ap / cap,
    }


def test_metrics_match_independent_loop_on_random_rankings():
    rng = np.random.default_rng(7)
    n_rows, n_items, width = 60, 30, 12
    ks = [1, 3, 5, 12]
    rankings = np.full((n_rows, width), -1, dtype=np.int64)
    sets: list[set[int]] = []
    for i in range(n_rows):
        length = int(rng.integers(0, width + 1))  # some rows fully padded
        rankings[i, :length] = rng.permutation(n_items)[:length]
        sets.append(set(rng.choice(n_items, size=int(rng.integers(1, 15)), replace=False).tolist()))
    targets = targets_from_sets(sets, n_items)
    values = compute_all(rankings, targets, ks)
    for i in range(n_rows):
        for k in ks:
            expected = reference_values(rankings[i].tolist(), sets[i], k)
            for key, value in expected.items():
                assert values[key][i] == pytest.approx(value, abs=1e-12), (i, key)
    # the random draw must exercise hits and misses, else the check is hollow
    assert 0 < np.mean(values["hit_rate@12"]) < 1


# --- keys, definitions, validation --------------------------------------------


def test_keys_follow_given_cutoffs_and_max_k_is_largest():
    metric = Recall([50, 20, 50])
    assert metric.keys == ["recall@50", "recall@20"]
    assert metric.max_k == 50
    assert NDCG(100).keys == ["ndcg@100"]


def test_definitions_are_one_line_per_key_and_cite_a_year():
    for cls in ALL_CLASSES:
        definitions = cls([5, 10]).definitions
        assert list(definitions) == cls([5, 10]).keys
        for key, text in definitions.items():
            assert text.startswith(key + ": ")
            assert "\n" not in text
            assert any(str(year) in text for year in range(1990, 2030)), text
    ndcg = NDCG(100).definitions["ndcg@100"]
    assert ndcg == (
        "ndcg@100: sum_{r<=100, hit} 1/log2(r+1) / sum_{r<=min(100,|R_u|)} 1/log2(r+1); "
        "binary relevance (Järvelin & Kekäläinen 2002)"
    )
    assert "min(20,|R_u|)" in CalibratedRecall(20).definitions["calibrated_recall@20"]
    assert "/ |R_u|" in Recall(20).definitions["recall@20"]


def test_values_are_float64_with_one_entry_per_row():
    targets = targets_from_sets([{1}, {2}], 5)
    for key, v in compute_all([[1, 2], [1, 2]], targets, 2).items():
        assert v.dtype == np.float64 and v.shape == (2,), key


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "5", [], [5, 0]])
def test_k_must_be_positive_int(bad):
    with pytest.raises(ValueError, match="k"):
        Recall(bad)


def test_rankings_with_too_few_columns_are_rejected():
    targets = targets_from_sets([{1}], 10)
    with pytest.raises(ValueError, match=r"rankings.*at least 5 columns.*found 3"):
        NDCG(5).compute(np.array([[1, 2, 3]]), targets)


def test_rankings_must_be_two_dimensional_integers():
    targets = targets_from_sets([{1}], 10)
    with pytest.raises(ValueError, match="rankings.*2-D"):
        Recall(2).compute(np.array([1, 2]), targets)
    with pytest.raises(ValueError, match="rankings.*integer"):
        Recall(2).compute(np.array([[1.0, 2.0]]), targets)


def test_rankings_with_out_of_range_or_repeated_items_are_rejected():
    targets = targets_from_sets([{1}], 10)
    with pytest.raises(ValueError, match=r"rankings.*\[0, 10\)"):
        Recall(2).compute(np.array([[1, 10]]), targets)
    with pytest.raises(ValueError, match=r"rankings.*\[0, 10\)"):
        Recall(2).compute(np.array([[-2, 1]]), targets)
    with pytest.raises(ValueError, match="rankings.*repeated"):
        Recall(2).compute(np.array([[4, 4]]), targets)


def test_targets_row_count_must_match_rankings():
    targets = targets_from_sets([{1}, {2}], 10)
    with pytest.raises(ValueError, match="targets.*3 rows.*found 2"):
        Recall(1).compute(np.zeros((3, 1), dtype=np.int64), targets)
    with pytest.raises(TypeError, match="targets.*sparse"):
        Recall(1).compute(np.zeros((2, 1), dtype=np.int64), targets.toarray())


def test_metric_from_key_builds_the_named_metric():
    assert metric_from_key("ndcg@100") == NDCG(100)
    assert metric_from_key("calibrated_recall@20") == CalibratedRecall(20)
    assert metric_from_key("hit_rate@5").keys == ["hit_rate@5"]
    assert set(METRIC_CLASSES) == {cls.name for cls in ALL_CLASSES} | {"arp", "aplt", "novelty"}


def test_metric_from_key_unknown_name_lists_known_names():
    with pytest.raises(ValueError) as info:
        metric_from_key("auc@10")
    for name in METRIC_CLASSES:
        assert name in str(info.value)


@pytest.mark.parametrize("bad", ["ndcg", "ndcg@", "ndcg@ten", "@10", "ndcg@10@2", ""])
def test_metric_from_key_malformed_key_shows_expected_form(bad):
    with pytest.raises(ValueError, match="name@k"):
        metric_from_key(bad)


def test_metric_from_key_zero_cutoff_is_rejected():
    with pytest.raises(ValueError, match=r"^the cutoff of 'recall@0': expected an integer in \[1, 10,000\], found 0$"):
        metric_from_key("recall@0")


def test_parse_metric_keys_groups_cutoffs_by_class_in_first_seen_order():
    metrics = parse_metric_keys(["ndcg@100", "recall@20", "ndcg@10", "recall@20"])
    assert metrics == [NDCG([100, 10]), Recall(20)]
    assert metrics[0].keys == ["ndcg@100", "ndcg@10"]


def test_parse_metric_keys_rejects_empty_and_unknown():
    with pytest.raises(ValueError, match="keys"):
        parse_metric_keys([])
    with pytest.raises(ValueError, match="known names"):
        parse_metric_keys(["recall@20", "serendipity@5"])
