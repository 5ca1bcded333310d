import math

import numpy as np
import pandas as pd
import pytest

from mlflow_recsys.data._split import user_split


def random_frame(n_users=100, n_items=40, seed=0, str_ids=False):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        k = int(rng.integers(5, 16))
        for i in rng.choice(n_items, size=k, replace=False):
            rows.append((u, int(i)))
    df = pd.DataFrame(rows, columns=["user", "item"])
    if str_ids:
        df["user"] = "u" + df["user"].astype(str)
        df["item"] = "i" + df["item"].astype(str)
    df["value"] = 1.0
    df["timestamp"] = 0
    return df


def user_items(df):
    return {u: set(g["item"]) for u, g in df.groupby("user")}


def row_items(matrix, r, item_ids):
    return set(item_ids[matrix.indices[matrix.indptr[r] : matrix.indptr[r + 1]]].tolist())


def test_user_split_fractions_and_disjoint_users():
    df = random_frame(n_users=100)
    s = user_split(df, seed=1, test_frac=0.2, val_frac=0.1)
    train, test, val = set(s.train_user_ids), set(s.test.eval_user_ids), set(s.val.eval_user_ids)
    assert s.test.n_users_dropped == 0 and s.val.n_users_dropped == 0
    assert (len(train), len(test), len(val)) == (70, 20, 10)
    assert not (train & test) and not (train & val) and not (test & val)
    assert train | test | val == set(range(100))


def test_training_matrix_holds_exactly_the_training_users_items():
    df = random_frame()
    s = user_split(df, seed=3)
    truth = user_items(df)
    assert s.x_train.dtype == np.float32 and s.x_train.has_sorted_indices
    assert set(np.unique(s.x_train.data)) == {1.0}
    for r, u in enumerate(s.train_user_ids):
        assert row_items(s.x_train, r, s.item_ids) == truth[u]
    catalogue = set().union(*(truth[u] for u in s.train_user_ids))
    assert set(s.item_ids.tolist()) == catalogue


def test_every_held_out_row_has_a_target_and_fold_in_and_targets_are_disjoint():
    s = user_split(random_frame(), seed=5)
    for held in (s.test, s.val):
        src, tgt = held.source, held.target
        assert (np.diff(tgt.indptr) >= 1).all()
        assert (np.diff(src.indptr) >= 1).all()
        assert src.multiply(tgt).nnz == 0


def test_held_out_rows_are_the_users_items_seen_in_training():
    # Item 1000+u belongs to user u only, so a held-out user always loses it.
    df = random_frame(n_users=60)
    extra = pd.DataFrame({"user": range(60), "item": [1000 + u for u in range(60)], "value": 1.0, "timestamp": 0})
    df = pd.concat([df, extra], ignore_index=True)
    s = user_split(df, seed=2)
    truth = user_items(df)
    catalogue = set(s.item_ids.tolist())
    assert catalogue == set().union(*(truth[u] for u in s.train_user_ids))
    for held in (s.test, s.val):
        for r, u in enumerate(held.eval_user_ids):
            seen = row_items(held.source, r, s.item_ids) | row_items(held.target, r, s.item_ids)
            assert seen == truth[u] & catalogue


def test_target_count_is_rounded_fraction_of_the_users_catalogue_items():
    df = random_frame(n_users=80, n_items=200)  # wide catalogue: few items lost
    s = user_split(df, seed=7, eval_holdout_frac=0.25)
    truth = user_items(df)
    catalogue = set(s.item_ids.tolist())
    for r, u in enumerate(s.test.eval_user_ids):
        n = len(truth[u] & catalogue)
        expected = min(max(math.floor(0.25 * n + 0.5), 1), n - 1)
        assert s.test.target.indptr[r + 1] - s.test.target.indptr[r] == expected


def test_eval_draws_stack_blocks_of_the_same_users_with_fresh_draws():
    df = random_frame()
    s = user_split(df, seed=11, eval_draws=3)
    one = user_split(df, seed=11, eval_draws=1)
    ids = s.test.eval_user_ids
    n = len(one.test.eval_user_ids)
    assert len(ids) == 3 * n
    assert (ids[:n] == ids[n : 2 * n]).all() and (ids[:n] == ids[2 * n :]).all()
    assert np.array_equal(np.sort(np.unique(ids)), np.sort(one.test.eval_user_ids))
    full = s.test.source + s.test.target
    for d in (1, 2):
        block = slice(d * n, (d + 1) * n)
        # Same items per user in every draw, split differently.
        assert (full[block] != full[:n]).nnz == 0
    assert (s.test.target[:n] != s.test.target[n : 2 * n]).nnz > 0
    assert (s.test.target[n : 2 * n] != s.test.target[2 * n :]).nnz > 0


def test_held_out_user_left_with_one_known_item_is_dropped_and_counted():
    # User 99 has one shared item and four items nobody else has.
    df = random_frame(n_users=99, n_items=30)
    lonely = pd.DataFrame({"user": 99, "item": [0, 501, 502, 503, 504], "value": 1.0, "timestamp": 0})
    df = pd.concat([df, lonely], ignore_index=True)
    held_out_seen = 0
    for seed in range(20):
        s = user_split(df, seed=seed)
        if 99 in set(s.train_user_ids):
            assert s.test.n_users_dropped + s.val.n_users_dropped == 0
            continue
        held_out_seen += 1
        assert 99 not in set(s.test.eval_user_ids) and 99 not in set(s.val.eval_user_ids)
        assert s.test.n_users_dropped + s.val.n_users_dropped == 1
    assert held_out_seen > 0


def test_same_seed_same_split_and_other_seed_other_split():
    df = random_frame()
    a, b, c = (user_split(df, seed=x) for x in (4, 4, 5))
    assert np.array_equal(a.train_user_ids, b.train_user_ids)
    assert (a.test.target != b.test.target).nnz == 0
    assert not np.array_equal(a.train_user_ids, c.train_user_ids)


def test_string_ids_are_kept_as_strings():
    s = user_split(random_frame(str_ids=True), seed=0)
    assert s.train_user_ids.dtype.kind == "U" and s.item_ids.dtype.kind == "U"
    assert s.test.eval_user_ids.dtype.kind == "U"


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"test_frac": 1.2}, "test_frac"),
        ({"test_frac": 0.6, "val_frac": 0.5}, "test_frac \\+ val_frac"),
        ({"eval_holdout_frac": 0.0}, "eval_holdout_frac"),
        ({"eval_draws": 0}, "eval_draws"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_split_arguments_are_named(kwargs, name):
    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(ValueError, match=name):
        user_split(random_frame(n_users=20), **kwargs)


def test_duplicate_pairs_are_rejected():
    df = random_frame(n_users=20)
    with pytest.raises(ValueError, match="duplicates"):
        user_split(pd.concat([df, df.iloc[:1]]), seed=0)
