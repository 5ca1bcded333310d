"""evaluate_rankings / evaluate_recommender: dropping empty rows, batching, fingerprint."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.evaluation import (
    EvaluationResult,
    FoldInRankedWarning,
    evaluate_rankings,
    evaluate_recommender,
    targets_fingerprint,
)
from mlflow_recsys.metrics import NDCG, Recall


class FixedScoreModel:
    """Scores every row with one fixed item vector; fold-in items excluded.

    Written here (not taken from mlflow_recsys.models) so the evaluation tests
    rely only on the recommend() contract: ties by item index, -1 padding.
    """

    def __init__(self, item_scores):
        self.item_scores = np.asarray(item_scores, dtype=np.float32)
        self.n_items = self.item_scores.shape[0]
        self.calls: list[int] = []

    def recommend(self, source_rows, k):
        self.calls.append(source_rows.shape[0])
        n = source_rows.shape[0]
        indices = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        for i in range(n):
            seen = set(source_rows[i].indices.tolist())
            order = sorted(
                (j for j in range(self.n_items) if j not in seen),
                key=lambda j: (-self.item_scores[j], j),
            )[:k]
            indices[i, : len(order)] = order
            scores[i, : len(order)] = self.item_scores[order]
        return indices, scores


def csr_from_sets(sets, n_items):
    rows = [r for r, items in enumerate(sets) for _ in items]
    cols = [c for items in sets for c in sorted(items)]
    return sp.csr_matrix((np.ones(len(cols), dtype=np.float32), (rows, cols)), shape=(len(sets), n_items))


# item order by score: 1 (.9), 3 (.7), 2 (.5), 4 (.3), 5 (.2), 0 (.1)
SCORES = [0.1, 0.9, 0.5, 0.7, 0.3, 0.2]
SOURCE = csr_from_sets([{1}, {3}, set(), {2, 4}], 6)
TARGETS = csr_from_sets([{3, 4}, set(), {0}, {1}], 6)
IDS = np.array([10, 11, 12, 13], dtype=np.int64)


def test_recommender_values_match_hand_computation_and_drop_empty_rows():
    with pytest.warns(UserWarning, match="1 of 4"):
        result = evaluate_recommender(
            FixedScoreModel(SCORES),
            source=SOURCE,
            targets=TARGETS,
            metrics=["recall@2", "ndcg@2"],
            sample_ids=IDS,
        )
    # user 11 has no targets: gone, with its id
    np.testing.assert_array_equal(result.sample_ids, [10, 12, 13])
    # u10: ranking [3, 2, ...] (1 excluded) -> hit at rank 1 of {3, 4}
    #      recall = 1/2; ndcg = 1 / (1 + 1/log2 3)
    # u12: ranking [1, 3, ...] -> target 0 missed: 0, 0
    # u13: ranking [1, 3, ...] ({2,4} excluded) -> hit at rank 1 of {1}: 1, 1
    ndcg_u10 = 1 / (1 + 1 / math.log2(3))
    np.testing.assert_allclose(result.per_user["recall@2"], [0.5, 0.0, 1.0])
    np.testing.assert_allclose(result.per_user["ndcg@2"], [ndcg_u10, 0.0, 1.0])
    assert result.metrics["recall@2"] == pytest.approx(1.5 / 3)
    assert result.metrics["ndcg@2"] == pytest.approx((ndcg_u10 + 1.0) / 3)
    assert result.metric_keys == ["recall@2", "ndcg@2"]
    assert set(result.definitions) == {"recall@2", "ndcg@2"}


def test_rows_without_targets_are_never_ranked():
    model = FixedScoreModel(SCORES)
    with pytest.warns(UserWarning):
        evaluate_recommender(model, source=SOURCE, targets=TARGETS, metrics=["recall@2"])
    assert sum(model.calls) == 3


def test_no_warning_when_every_row_has_targets():
    targets = csr_from_sets([{3}, {0}, {0}, {1}], 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = evaluate_recommender(FixedScoreModel(SCORES), source=SOURCE, targets=targets, metrics=["recall@2"])
    # default ids are row positions
    np.testing.assert_array_equal(result.sample_ids, [0, 1, 2, 3])


def random_case(seed=3, n_rows=23, n_items=15):
    rng = np.random.default_rng(seed)
    source = sp.csr_matrix((rng.random((n_rows, n_items)) < 0.3).astype(np.float32))
    targets_dense = (rng.random((n_rows, n_items)) < 0.25) & (source.toarray() == 0)
    # every row gets at least one target, except two rows that must be dropped
    targets_dense[np.arange(n_rows), np.argmin(source.toarray(), axis=1)] = True
    targets_dense[[4, 17]] = False
    targets = sp.csr_matrix(targets_dense.astype(np.float32))
    ids = np.arange(100, 100 + n_rows, dtype=np.int64)
    model = FixedScoreModel(rng.random(n_items))
    return model, source, targets, ids


METRICS = ["recall@5", "calibrated_recall@5", "ndcg@3", "ndcg@10", "mrr@10", "map@5", "precision@5", "hit_rate@1"]


@pytest.mark.parametrize("batch_size", [1, 3, 1024])
def test_results_do_not_depend_on_batch_size(batch_size):
    model, source, targets, ids = random_case()
    kwargs = dict(source=source, targets=targets, metrics=METRICS, sample_ids=ids)
    with pytest.warns(UserWarning):
        reference = evaluate_recommender(model, batch_size=len(ids), **kwargs)
    with pytest.warns(UserWarning):
        result = evaluate_recommender(model, batch_size=batch_size, **kwargs)
    np.testing.assert_array_equal(result.sample_ids, reference.sample_ids)
    assert result.metrics == reference.metrics
    for key in METRICS:
        np.testing.assert_array_equal(result.per_user[key], reference.per_user[key])


def test_recommender_agrees_with_evaluating_its_rankings():
    model, source, targets, ids = random_case(seed=5)
    rankings, _ = model.recommend(source, 10)
    with pytest.warns(UserWarning):
        by_model = evaluate_recommender(
            model, source=source, targets=targets, metrics=METRICS, sample_ids=ids, batch_size=4
        )
    with pytest.warns(UserWarning):
        by_rankings = evaluate_rankings(rankings, targets=targets, metrics=METRICS, sample_ids=ids, source=source)
    assert by_model.targets_fingerprint == by_rankings.targets_fingerprint
    np.testing.assert_array_equal(by_model.sample_ids, np.delete(ids, [4, 17]))
    np.testing.assert_array_equal(by_model.sample_ids, by_rankings.sample_ids)
    for key in METRICS:
        np.testing.assert_allclose(by_model.per_user[key], by_rankings.per_user[key])
        # the aggregate is the plain mean of the kept rows
        assert by_model.metrics[key] == pytest.approx(np.mean(by_model.per_user[key]))


def test_per_user_arrays_align_with_sample_ids():
    model, source, targets, ids = random_case(seed=11)
    with pytest.warns(UserWarning):
        result = evaluate_recommender(model, source=source, targets=targets, metrics=["hit_rate@3"], sample_ids=ids)
    rankings, _ = model.recommend(source, 3)
    for uid, value in zip(result.sample_ids, result.per_user["hit_rate@3"], strict=True):
        row = int(uid) - 100
        hit = bool(set(rankings[row].tolist()) & set(targets[row].indices.tolist()))
        assert value == float(hit)
    frame = result.to_frame()
    assert list(frame.columns) == ["sample_id", "hit_rate@3"]
    assert len(frame) == result.n_samples == len(ids) - 2


def test_collect_per_user_false_keeps_aggregates():
    model, source, targets, ids = random_case(seed=2)
    kwargs = dict(source=source, targets=targets, metrics=METRICS, sample_ids=ids)
    with pytest.warns(UserWarning):
        full = evaluate_recommender(model, **kwargs)
    with pytest.warns(UserWarning):
        slim = evaluate_recommender(model, collect_per_user=False, **kwargs)
    assert slim.per_user is None
    assert slim.metrics == full.metrics
    np.testing.assert_array_equal(slim.sample_ids, full.sample_ids)
    assert slim.targets_fingerprint == full.targets_fingerprint


def test_fingerprint_is_of_inputs_as_given_and_changes_with_one_target():
    model, source, targets, ids = random_case(seed=9)
    kwargs = dict(metrics=["recall@5"], sample_ids=ids)
    with pytest.warns(UserWarning):
        before = evaluate_recommender(model, source=source, targets=targets, **kwargs)
    assert before.targets_fingerprint == targets_fingerprint(source, targets, ids)
    changed = targets.tolil()
    row, col = 0, int(np.flatnonzero(source[0].toarray().ravel() == 0)[0])
    changed[row, col] = 0.0 if changed[row, col] else 1.0
    with pytest.warns(UserWarning):
        after = evaluate_recommender(model, source=source, targets=changed.tocsr(), **kwargs)
    assert after.targets_fingerprint != before.targets_fingerprint


def test_metrics_given_as_objects_or_keys_give_the_same_result():
    model, source, targets, ids = random_case(seed=4)
    kwargs = dict(source=source, targets=targets, sample_ids=ids)
    with pytest.warns(UserWarning):
        by_key = evaluate_recommender(model, metrics=["recall@5", "ndcg@3", "ndcg@10"], **kwargs)
    with pytest.warns(UserWarning):
        by_obj = evaluate_recommender(model, metrics=[Recall(5), NDCG([3, 10])], **kwargs)
    assert by_key.metrics == by_obj.metrics
    assert by_key.definitions == by_obj.definitions


def test_repeated_metric_key_is_rejected():
    with pytest.raises(ValueError, match="metrics.*recall@5"):
        evaluate_recommender(
            FixedScoreModel(SCORES),
            source=SOURCE,
            targets=TARGETS,
            metrics=[Recall(5), "recall@5"],
        )


def test_source_and_targets_shape_mismatch_names_the_argument():
    with pytest.raises(ValueError, match="targets"):
        evaluate_recommender(FixedScoreModel(SCORES), source=SOURCE, targets=TARGETS[:3], metrics=["recall@2"])


def test_sample_ids_length_mismatch_names_the_argument():
    with pytest.raises(ValueError, match=r"sample_ids.*\(4,\)"):
        evaluate_recommender(
            FixedScoreModel(SCORES),
            source=SOURCE,
            targets=TARGETS,
            metrics=["recall@2"],
            sample_ids=IDS[:3],
        )
    with pytest.raises(ValueError, match="sample_ids"):
        evaluate_rankings(np.zeros((4, 2), dtype=np.int64), targets=TARGETS, metrics=["recall@2"], sample_ids=IDS[:2])


def test_source_width_must_match_model_items():
    with pytest.raises(ValueError, match="source.*7 columns"):
        evaluate_recommender(FixedScoreModel(SCORES + [0.0]), source=SOURCE, targets=TARGETS, metrics=["recall@2"])


def test_bad_batch_size_is_rejected():
    with pytest.raises(ValueError, match="batch_size"):
        evaluate_recommender(
            FixedScoreModel(SCORES),
            source=SOURCE,
            targets=TARGETS,
            metrics=["recall@2"],
            batch_size=0,
        )


def test_model_returning_wrong_shape_is_reported():
    class ShortModel(FixedScoreModel):
        def recommend(self, source_rows, k):
            indices, scores = super().recommend(source_rows, k)
            return indices[:, : k - 1], scores[:, : k - 1]

    with pytest.raises(ValueError, match="model"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate_recommender(ShortModel(SCORES), source=SOURCE, targets=TARGETS, metrics=["recall@3"])


def test_rankings_rows_must_match_targets_rows():
    with pytest.raises(ValueError, match="targets.*3 rows.*found 4"):
        evaluate_rankings(np.zeros((3, 2), dtype=np.int64), targets=TARGETS, metrics=["recall@2"])
    with pytest.raises(ValueError, match="source"):
        evaluate_rankings(
            np.zeros((4, 2), dtype=np.int64),
            targets=TARGETS,
            metrics=["recall@2"],
            source=SOURCE[:, :5],
        )


def test_rankings_without_source_have_no_fingerprint():
    rankings = np.array([[3, 2], [0, 1], [1, 3], [1, 3]])
    with pytest.warns(UserWarning):
        result = evaluate_rankings(rankings, targets=TARGETS, metrics="hit_rate@2")
    assert result.targets_fingerprint is None
    # rows 0 (3 in {3,4}), 2 (0 missed), 3 (1 in {1}); row 1 dropped
    np.testing.assert_array_equal(result.per_user["hit_rate@2"], [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(result.sample_ids, [0, 2, 3])


def test_all_rows_without_targets_is_an_error():
    empty = sp.csr_matrix((4, 6), dtype=np.float32)
    with pytest.raises(ValueError, match="targets"):
        evaluate_recommender(FixedScoreModel(SCORES), source=SOURCE, targets=empty, metrics=["recall@2"])


def test_result_is_an_evaluation_result():
    with pytest.warns(UserWarning):
        result = evaluate_recommender(
            FixedScoreModel(SCORES), source=SOURCE, targets=TARGETS, metrics=["mrr@3"], sample_ids=IDS
        )
    assert isinstance(result, EvaluationResult)
    assert result.per_user["mrr@3"].dtype == np.float64


def test_popularity_model_evaluates_as_hand_computed():
    models = pytest.importorskip("mlflow_recsys.models")
    # training counts per item: 0 -> 3, 1 -> 1, 2 -> 2, 3 -> 0
    x_train = csr_from_sets([{0, 1, 2}, {0, 2}, {0}], 4)
    model = models.Popularity().fit(x_train)
    source = csr_from_sets([{0}, set()], 4)
    targets = csr_from_sets([{2}, {1}], 4)
    result = evaluate_recommender(model, source=source, targets=targets, metrics=["mrr@2"])
    # row 0: item 0 is fold-in -> ranking [2, 1]: target 2 at rank 1 -> 1
    # row 1: ranking [0, 2]: target 1 not in top 2 -> 0
    np.testing.assert_array_equal(result.per_user["mrr@2"], [1.0, 0.0])


def test_fingerprint_is_the_same_for_object_and_unicode_arrays_of_the_same_ids():
    from mlflow_recsys.evaluation import targets_fingerprint

    m = sp.csr_matrix(np.eye(3, dtype=np.float32))
    as_text = np.array(["u1", "u2", "u3"])
    assert targets_fingerprint(m, m, as_text) == targets_fingerprint(m, m, as_text.astype(object))
    assert targets_fingerprint(m, m, np.arange(3)) == targets_fingerprint(m, m, np.arange(3).astype(np.uint32))
    assert targets_fingerprint(m, m, np.arange(3)) != targets_fingerprint(m, m, np.array(["0", "1", "2"]))


def _ndcg_by_hand(ranked: list[int], relevant: set[int], k: int) -> float:
    dcg = sum(1.0 / math.log2(r + 2) for r, item in enumerate(ranked[:k]) if item in relevant)
    ideal = sum(1.0 / math.log2(r + 2) for r in range(min(k, len(relevant))))
    return dcg / ideal


@pytest.fixture(scope="module")
def movielens_test_rows(tmp_path_factory):
    from mlflow_recsys.data import build_recsys_checkpoint, load_recsys_split

    path = build_recsys_checkpoint("movielens-100k", checkpoint_path=tmp_path_factory.mktemp("ml") / "s.zip")
    return load_recsys_split(path)


def test_rankings_that_leak_the_fold_in_are_scored_without_it(movielens_test_rows):
    split = movielens_test_rows
    source, targets = split["test_source_matrix"], split["test_target_matrix"]
    # A popularity list, the same for every user, that keeps each user's own fold-in items.
    popularity = np.asarray(split["x_train"].sum(axis=0)).ravel()
    ranked = np.argsort(-popularity, kind="stable")[:400]
    rankings = np.tile(ranked, (source.shape[0], 1))
    by_hand, unfiltered, n_leaked, n_lists = [], [], 0, 0
    for r in range(source.shape[0]):
        own = set(source.indices[source.indptr[r] : source.indptr[r + 1]].tolist())
        relevant = set(targets.indices[targets.indptr[r] : targets.indptr[r + 1]].tolist())
        kept = [int(i) for i in ranked if int(i) not in own]
        n_leaked += len(ranked) - len(kept)
        n_lists += len(kept) < len(ranked)
        by_hand.append(_ndcg_by_hand(kept, relevant, 100))
        unfiltered.append(_ndcg_by_hand(ranked.tolist(), relevant, 100))
    with pytest.warns(FoldInRankedWarning, match=rf"^rankings: {n_leaked:,} fold-in item\(s\) in {n_lists:,} of "):
        removed = evaluate_rankings(rankings, targets=targets, metrics="ndcg@100", source=source)
    np.testing.assert_allclose(removed.per_user["ndcg@100"], by_hand, rtol=1e-12)
    assert removed.metrics["ndcg@100"] == pytest.approx(np.mean(by_hand), rel=1e-12)
    # Scored as given (no source), the leaked items are misses and the value falls.
    as_given = evaluate_rankings(rankings, targets=targets, metrics="ndcg@100")
    np.testing.assert_allclose(as_given.per_user["ndcg@100"], unfiltered, rtol=1e-12)
    assert as_given.metrics["ndcg@100"] < removed.metrics["ndcg@100"]
    # The strict setting refuses the lists instead, naming the count.
    with pytest.raises(ValueError, match=rf"^rankings: expected no fold-in item .* found {n_leaked:,} in {n_lists:,}"):
        evaluate_rankings(rankings, targets=targets, metrics="ndcg@100", source=source, fold_in="refuse")
    with pytest.raises(ValueError, match=r"^fold_in: expected one of \('remove', 'refuse'\), found 'drop'"):
        evaluate_rankings(rankings, targets=targets, metrics="ndcg@100", source=source, fold_in="drop")


class _LeakyModel(FixedScoreModel):
    """Ranks by the fixed scores without excluding the fold-in, as a model written elsewhere might."""

    def recommend(self, source_rows, k):
        order = np.argsort(-self.item_scores, kind="stable")[:k]
        return np.tile(order, (source_rows.shape[0], 1)), np.tile(self.item_scores[order], (source_rows.shape[0], 1))


def test_a_recommender_whose_lists_leak_the_fold_in_is_scored_without_it():
    # item order by score: 1, 3, 2, 4, 5, 0; rows 0, 1 and 3 hold fold-in items within the top 4
    source, targets = csr_from_sets([{1}, {3}, set(), {2, 4}], 6), csr_from_sets([{3, 4}, {0}, {0}, {1}], 6)
    with pytest.warns(FoldInRankedWarning, match=r"^rankings: 4 fold-in item\(s\) in 3 of 4 lists"):
        leaky = evaluate_recommender(_LeakyModel(SCORES), source=source, targets=targets, metrics="ndcg@4")
    filtered = [[3, 2, 4, -1], [1, 2, 4, -1], [1, 3, 2, 4], [1, 3, -1, -1]]
    by_hand = [_ndcg_by_hand(row, rel, 4) for row, rel in zip(filtered, [{3, 4}, {0}, {0}, {1}], strict=True)]
    np.testing.assert_allclose(leaky.per_user["ndcg@4"], by_hand, rtol=1e-12)
    with pytest.raises(ValueError, match=r"output is invalid: rankings: expected no fold-in item .*first in row 0"):
        evaluate_recommender(_LeakyModel(SCORES), source=source, targets=targets, metrics="ndcg@4", fold_in="refuse")
