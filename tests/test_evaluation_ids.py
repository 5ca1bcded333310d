"""evaluate_by_ids and ItemCatalogue: frames of ids give what evaluate_recommender gives on the index matrices."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mlflow_recsys._catalogue import ItemCatalogue
from mlflow_recsys._evaluation_by_ids import evaluate_by_ids
from mlflow_recsys.data import binarise, kcore_prune, load_interactions, user_split
from mlflow_recsys.evaluation import evaluate_recommender
from mlflow_recsys.models import EASE, EASEConfig, UnknownItemsWarning

METRICS = ["ndcg@10", "recall@5", "mrr@10"]
N_ITEMS = 30
ITEMS = np.array([f"tt{j:03d}" for j in range(N_ITEMS)])


class CountingModel:
    """A fitted model that counts its recommend() calls, to show refusals come before any scoring."""

    def __init__(self, model):
        self.model, self.n_items, self.calls = model, model.n_items, 0

    def recommend(self, source_rows, k):
        self.calls += 1
        return self.model.recommend(source_rows, k)


@pytest.fixture(scope="module")
def ease():
    rng = np.random.default_rng(11)
    return EASE(EASEConfig(l2=3.0)).fit(sp.csr_matrix((rng.random((200, N_ITEMS)) < 0.25).astype(np.float32)))


@pytest.fixture(scope="module")
def held_out():
    """40 held-out users: fold-in and targets disjoint, every user with at least one of each."""
    rng = np.random.default_rng(12)
    dense = rng.random((40, N_ITEMS)) < 0.3
    dense[:, 0] = True  # at least one item per user
    is_target = dense & (rng.random(dense.shape) < 0.3)
    is_target[:, 0] = True
    source = sp.csr_matrix((dense & ~is_target).astype(np.float32))
    return source, sp.csr_matrix(is_target.astype(np.float32))


def long_frame(matrix, user_ids, item_ids, *, user_col="user", item_col="item"):
    coo = sp.coo_matrix(matrix)
    return pd.DataFrame({user_col: np.asarray(user_ids)[coo.row], item_col: np.asarray(item_ids)[coo.col]})


def shuffled(frame, seed):
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def assert_same_result(got, expected):
    assert got.metrics == expected.metrics
    np.testing.assert_array_equal(got.sample_ids, expected.sample_ids)
    assert list(got.per_user) == list(expected.per_user)
    for key in expected.per_user:
        np.testing.assert_array_equal(got.per_user[key], expected.per_user[key])
    assert got.targets_fingerprint == expected.targets_fingerprint
    assert got.definitions == expected.definitions


def test_shuffled_frames_of_string_ids_give_the_index_result_in_sorted_user_order(ease, held_out):
    source, targets = held_out
    rng = np.random.default_rng(0)
    names = np.array([f"user-{v}" for v in rng.choice(10_000, size=source.shape[0], replace=False)])
    histories = shuffled(long_frame(source, names, ITEMS), 1)
    wanted = shuffled(long_frame(targets, names, ITEMS), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing unusual here, so nothing to warn about
        got = evaluate_by_ids(ease, histories, wanted, item_ids=ITEMS, metrics=METRICS, batch_size=7)
    order = np.argsort(names)
    expected = evaluate_recommender(
        ease, source=source[order], targets=targets[order], metrics=METRICS, sample_ids=names[order]
    )
    assert got.sample_ids.tolist() == sorted(names.tolist())
    assert_same_result(got, expected)
    # The order of rows in the frames is not part of the result, nor is the fingerprint.
    again = evaluate_by_ids(ease, shuffled(histories, 3), shuffled(wanted, 4), item_ids=ITEMS, metrics=METRICS)
    assert_same_result(again, expected)


def test_integer_ids_in_other_columns_and_repeated_rows_count_once(ease, held_out):
    source, targets = held_out
    users = np.arange(100, 100 + source.shape[0]) * 3
    items = np.arange(N_ITEMS) * 10 + 7
    histories = long_frame(source, users, items, user_col="uid", item_col="iid").assign(rating=5.0)
    wanted = long_frame(targets, users, items, user_col="uid", item_col="iid")
    doubled_h = shuffled(pd.concat([histories, histories.iloc[::3]]), 5)
    doubled_t = shuffled(pd.concat([wanted, wanted.iloc[::2]]), 6)
    got = evaluate_by_ids(ease, doubled_h, doubled_t, item_ids=items, metrics=METRICS, user_col="uid", item_col="iid")
    assert got.sample_ids.dtype == np.int64
    assert_same_result(
        got, evaluate_recommender(ease, source=source, targets=targets, metrics=METRICS, sample_ids=users)
    )


def test_unknown_history_items_are_left_out_and_counted(ease, held_out):
    source, targets = held_out
    names = np.array([f"u{i:02d}" for i in range(source.shape[0])])
    histories = long_frame(source, names, ITEMS)
    strangers = pd.DataFrame({"user": ["u03", "u03", "u07", "nobody"], "item": ["x1", "x2", "x1", "x9"]})
    with pytest.warns(UnknownItemsWarning, match=r"histories: 3 row\(s\) of evaluated users .*such as \['x1', 'x2'\]"):
        got = evaluate_by_ids(
            ease,
            shuffled(pd.concat([histories, strangers]), 7),
            long_frame(targets, names, ITEMS),
            item_ids=ITEMS,
            metrics=METRICS,
        )
    # "nobody" has a history but no target: not evaluated, and its unknown item is not counted.
    assert_same_result(
        got, evaluate_recommender(ease, source=source, targets=targets, metrics=METRICS, sample_ids=names)
    )


def test_users_without_history_are_evaluated_from_an_empty_history_and_counted(ease, held_out):
    source, targets = held_out
    names = np.array([f"u{i:02d}" for i in range(source.shape[0])])
    cold = np.zeros(source.shape[0], dtype=bool)
    cold[[2, 9, 30]] = True
    histories = long_frame(source[~cold], names[~cold], ITEMS)
    # u09 has only an item the model does not know: cold as well.
    histories = pd.concat([histories, pd.DataFrame({"user": ["u09"], "item": ["new-item"]})])
    with pytest.warns(UserWarning) as caught:
        got = evaluate_by_ids(ease, histories, long_frame(targets, names, ITEMS), item_ids=ITEMS, metrics=METRICS)
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("3 of 40 evaluated users have no history item in item_ids") for m in messages)
    empty = sp.diags((~cold).astype(np.float32)) @ source
    assert_same_result(
        got, evaluate_recommender(ease, source=empty, targets=targets, metrics=METRICS, sample_ids=names)
    )


def test_a_target_already_in_the_history_is_kept_as_a_certain_miss(ease):
    histories = pd.DataFrame({"user": [1, 1, 2], "item": ITEMS[[0, 1, 2]]})
    wanted = pd.DataFrame({"user": [1, 2, 2], "item": ITEMS[[1, 3, 4]]})
    with pytest.warns(UserWarning, match=r"targets: 1 target\(s\) are also in their user's history"):
        got = evaluate_by_ids(ease, histories, wanted, item_ids=ITEMS, metrics=["recall@30"])
    # Of user 1's one target (its own history item) nothing can be found.
    assert got.per_user["recall@30"].tolist() == [0.0, 1.0]


def test_history_frame_may_be_empty_and_then_every_user_is_cold(ease):
    wanted = pd.DataFrame({"user": ["b", "a", "a"], "item": ITEMS[[3, 0, 5]]})
    with pytest.warns(UserWarning, match="2 of 2 evaluated users have no history item"):
        got = evaluate_by_ids(ease, pd.DataFrame({"user": [], "item": []}), wanted, item_ids=ITEMS, metrics=METRICS)
    direct = evaluate_recommender(
        ease,
        source=sp.csr_matrix((2, N_ITEMS), dtype=np.float32),
        targets=sp.csr_matrix(([1.0] * 3, ([0, 0, 1], [0, 5, 3])), shape=(2, N_ITEMS)),
        metrics=METRICS,
        sample_ids=np.array(["a", "b"]),
    )
    assert_same_result(got, direct)


def test_unknown_target_items_are_refused_before_the_model_is_called(ease):
    model = CountingModel(ease)
    histories = pd.DataFrame({"user": [1, 2], "item": ITEMS[[0, 1]]})
    wanted = pd.DataFrame({"user": [1, 2, 2, 2], "item": [ITEMS[2], "gone", "gone", "lost"]})
    with pytest.raises(
        ValueError,
        match=r"targets: expected item ids from item_ids, found 3 row\(s\) with other ids "
        r"\(such as \['gone', 'lost'\]\)",
    ):
        evaluate_by_ids(model, histories, wanted, item_ids=ITEMS, metrics=METRICS)
    assert model.calls == 0


GOOD_H = pd.DataFrame({"user": [1, 2], "item": ["tt000", "tt001"]})
GOOD_T = pd.DataFrame({"user": [1, 2], "item": ["tt002", "tt003"]})


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(histories=GOOD_H.to_dict()),
            "histories: expected a pandas DataFrame with columns 'user' and 'item', found dict",
        ),
        (
            dict(targets=GOOD_T.rename(columns={"item": "movie"})),
            r"targets: expected columns 'user' and 'item' .one row per user and item., "
            r"found columns \['user', 'movie'\]",
        ),
        (dict(targets=GOOD_T.iloc[:0]), "targets: expected at least one row"),
        (
            dict(targets=GOOD_T.assign(user=[1.0, np.nan])),
            r"targets\['user'\]: expected an id in every row, found 1 "
            "missing",
        ),
        (
            dict(targets=GOOD_T.assign(user=[1.5, 2.0])),
            r"targets\['user'\]: expected integer or string ids, "
            "found dtype float64",
        ),
        (
            dict(histories=GOOD_H.assign(user=np.array([1, "a"], dtype=object))),
            r"histories\['user'\]: expected integer or string ids, "
            r"found mixed-integer values of types \['int', 'str'\]",
        ),
        (
            dict(histories=GOOD_H.assign(user=["1", "2"])),
            r"histories\['user'\]: expected integer user ids like targets\['user'\], found string ids",
        ),
        (
            dict(targets=GOOD_T.assign(item=[2, 3])),
            r"targets\['item'\]: expected string item ids like item_ids, found integer ids",
        ),
        (
            dict(item_ids=ITEMS[:-1]),
            f"item_ids: expected {N_ITEMS} ids .one per column of the model., found {N_ITEMS - 1}",
        ),
        (
            dict(item_ids=np.r_[ITEMS[:-1], ITEMS[:1]]),
            "item_ids: expected distinct ids, found 1 repeated, such as 'tt000'",
        ),
        (dict(item_ids=ITEMS.reshape(2, -1)), r"item_ids: expected a 1-d array of ids, found shape \(2, 15\)"),
        (dict(metrics=["ndcg@10", 3]), "metrics: expected metric objects or keys like .ndcg@100., found int"),
        (dict(metrics=[]), "metrics: expected at least one metric, found none"),
        (dict(batch_size=0), "batch_size: expected an integer >= 1, found 0"),
        (dict(item_col="user"), "item_col: expected a column other than user_col, found 'user' for both"),
    ],
)
def test_bad_input_is_refused_naming_the_argument_before_any_scoring(ease, change, message):
    model = CountingModel(ease)
    arguments = dict(histories=GOOD_H, targets=GOOD_T, item_ids=ITEMS, metrics=METRICS) | change
    with pytest.raises(ValueError, match=message):
        evaluate_by_ids(model, arguments.pop("histories"), arguments.pop("targets"), **arguments)
    assert model.calls == 0


@pytest.fixture(scope="module")
def movielens():
    frame, _ = kcore_prune(binarise(load_interactions("movielens-100k"), 4.0), 5)
    split = user_split(frame, seed=42)
    return frame, split, EASE(EASEConfig(l2=200.0)).fit(split.x_train)


def test_movielens_interaction_log_reproduces_the_split_evaluation_and_its_fingerprint(movielens):
    frame, split, model = movielens
    test = split.test
    wanted = long_frame(test.target, test.eval_user_ids, split.item_ids)
    # The raw log of the test users less their targets: it still holds items outside the training
    # catalogue, which the split removed, and the training users' rows, which are not evaluated.
    log = frame[["user", "item", "timestamp"]]
    is_target = log.set_index(["user", "item"]).index.isin(wanted.set_index(["user", "item"]).index)
    histories = shuffled(log[~is_target], 9)
    n_outside = int(
        (log[~is_target]["user"].isin(test.eval_user_ids) & ~log[~is_target]["item"].isin(split.item_ids)).sum()
    )
    assert n_outside > 0
    with pytest.warns(UnknownItemsWarning, match=rf"histories: {n_outside} row\(s\) of evaluated users"):
        got = evaluate_by_ids(
            model, histories, shuffled(wanted, 10), item_ids=split.item_ids, metrics=["ndcg@100", "recall@20"]
        )
    direct = evaluate_recommender(
        model, source=test.source, targets=test.target, metrics=["ndcg@100", "recall@20"], sample_ids=test.eval_user_ids
    )
    assert got.n_samples == 188
    assert_same_result(got, direct)


def test_catalogue_maps_ids_by_value_and_reports_what_it_does_not_hold():
    catalogue = ItemCatalogue(np.array([50, 7, 12]))
    assert catalogue.kind == "integer" and len(catalogue) == 3
    assert catalogue.indices([7, np.int32(12), np.int64(50), "7", 8]).tolist() == [1, 2, 0, -1, -1]
    lists = [[12, 12, 99], None, [], np.array([50]), float("nan"), [np.int64(98)]]
    matrix, unknown = catalogue.matrix_from_lists(lists)
    assert matrix.shape == (6, 3) and matrix.has_canonical_format and matrix.dtype == np.float32
    assert matrix.toarray().tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert unknown == [[99], [], [], [], [], [98]] and type(unknown[5][0]) is int
    strings = ItemCatalogue(pd.Series(["b", "a"], dtype=object))
    assert strings.kind == "string" and strings.indices(np.array(["a", "c"])).tolist() == [1, -1]
    with pytest.raises(ValueError, match="item_ids: expected at least one item id, found none"):
        ItemCatalogue([])
    with pytest.raises(ValueError, match="catalogue: expected integer or string ids, found dtype bool"):
        ItemCatalogue(np.array([True, False]), name="catalogue")


def test_the_mlflow_evaluator_maps_lists_of_ids_through_the_same_catalogue():
    from mlflow_recsys.tracking._evaluator import _catalogue, _rankings

    inferred = _catalogue(None, [pd.Series([[30, 10], None]), np.array([[20]], dtype=object), pd.Series([[10, 40]])])
    assert inferred.item_ids.tolist() == [10, 20, 30, 40]
    # at least k wide and never cut: fold-in items come out before the cutoff
    assert _rankings(inferred, pd.Series([[40, 10, 30], [20], []]), 2).tolist() == [[3, 0, 2], [1, -1, -1], [-1] * 3]
    assert _rankings(inferred, pd.Series([[40], [20]]), 2).tolist() == [[3, -1], [1, -1]]
    with pytest.raises(
        ValueError,
        match=r"model output 'items': expected item ids from evaluator_config\['item_ids'\], "
        r"found unknown ids \[99\]",
    ):
        _rankings(inferred, pd.Series([[10, 99]]), 1)
    with pytest.raises(ValueError, match="data: expected integer or string ids, found .*; pass evaluator_config"):
        _catalogue(None, [pd.Series([[1, "a"]])])
