"""leave_one_out and time_split, each checked against a plain-Python statement of the protocol."""

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlflow_recsys.data import SPLIT_MODES, build_recsys_checkpoint, load_recsys_split
from mlflow_recsys.data._checkpoint import split_arrays, split_digest
from mlflow_recsys.data._split import MIN_EVAL_INTERACTIONS, leave_one_out, time_split, user_split


def timed_frame(n_users=60, n_items=30, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        k = int(rng.integers(1, 12))
        for i in rng.choice(n_items, size=k, replace=False):
            rows.append((u, int(i), 1.0, int(rng.integers(0, 50))))  # small range: many ties
    return pd.DataFrame(rows, columns=["user", "item", "value", "timestamp"])


def rows_as_sets(matrix, item_ids):
    return [
        set(item_ids[matrix.indices[matrix.indptr[r] : matrix.indptr[r + 1]]].tolist()) for r in range(matrix.shape[0])
    ]


def test_leave_one_out_holds_out_each_users_latest_items():
    df = timed_frame()
    s = leave_one_out(df, seed=4)
    catalogue = set(s.item_ids.tolist())
    by_user = {u: g for u, g in df.groupby("user")}
    test_src, test_tgt = rows_as_sets(s.test.source, s.item_ids), rows_as_sets(s.test.target, s.item_ids)
    val_src, val_tgt = rows_as_sets(s.val.source, s.item_ids), rows_as_sets(s.val.target, s.item_ids)
    for r, u in enumerate(s.test.eval_user_ids):
        g = by_user[u]
        (last,) = test_tgt[r]
        # The target carries the user's latest time; everything else is fold-in (within the catalogue).
        assert g.loc[g["item"] == last, "timestamp"].item() == g["timestamp"].max()
        assert test_src[r] == (set(g["item"]) - {last}) & catalogue
    for r, u in enumerate(s.val.eval_user_ids):
        g = by_user[u]
        (second,) = val_tgt[r]
        test_row = list(s.test.eval_user_ids).index(u) if u in set(s.test.eval_user_ids) else None
        held = {second} | (test_tgt[test_row] if test_row is not None else set())
        assert val_src[r] == (set(g["item"]) - held) & catalogue
        assert g.loc[g["item"] == second, "timestamp"].item() <= g["timestamp"].max()
    counts = df.groupby("user").size()
    evaluated = set(counts[counts >= 3].index)
    assert set(s.test.eval_user_ids) <= evaluated
    assert len(s.test.eval_user_ids) + s.test.n_users_dropped == len(evaluated)
    # Training never sees an evaluated user's two held-out items.
    train = dict(zip(s.train_user_ids, rows_as_sets(s.x_train, s.item_ids), strict=True))
    for r, u in enumerate(s.test.eval_user_ids):
        assert not train.get(u, set()) & test_tgt[r]


def test_leave_one_out_is_deterministic_and_breaks_ties_by_seed():
    df = pd.DataFrame({"user": [1] * 6, "item": [1, 2, 3, 4, 5, 6], "value": 1.0, "timestamp": [0, 0, 0, 0, 9, 9]})
    tied = pd.DataFrame({"user": [2] * 6, "item": [1, 2, 3, 4, 5, 6], "value": 1.0, "timestamp": 0})
    # Users with two interactions train but are not evaluated; they put every item in the catalogue.
    short = pd.DataFrame({"user": [3, 3, 4, 4, 5, 5], "item": [1, 2, 3, 4, 5, 6], "value": 1.0, "timestamp": 0})
    df = pd.concat([df, tied, short], ignore_index=True)
    picks = set()
    for seed in range(12):
        a, b = leave_one_out(df, seed=seed), leave_one_out(df, seed=seed)
        assert (a.test.target != b.test.target).nnz == 0 and (a.val.target != b.val.target).nnz == 0
        first = rows_as_sets(a.test.target, a.item_ids)[0] | rows_as_sets(a.val.target, a.item_ids)[0]
        assert first == {5, 6}  # user 1's two latest items, in either order
        picks.add(frozenset(rows_as_sets(a.test.target, a.item_ids)[1]))
    assert len(picks) > 1  # user 2 has no order in time: the seed chooses


def test_leave_one_out_without_timestamps_draws_at_random():
    df = timed_frame().drop(columns="timestamp")
    s = leave_one_out(df, seed=0)
    assert all(len(t) == 1 for t in rows_as_sets(s.test.target, s.item_ids))


def test_time_split_cuts_at_the_quantile_and_predicts_the_future_from_the_past():
    df = timed_frame(n_users=80)
    s = time_split(df, test_frac=0.2, val_frac=0.1)
    stamps = np.sort(df["timestamp"].to_numpy())
    n = len(stamps)
    n_test, n_val = int(np.floor(0.2 * n + 0.5)), int(np.floor(0.1 * n + 0.5))
    val_cut, test_cut = s.cut_timestamps
    assert test_cut == stamps[n - n_test] and val_cut == stamps[n - n_test - n_val]
    catalogue = set(df.loc[df["timestamp"] < val_cut, "item"])
    assert set(s.item_ids.tolist()) == catalogue
    for held, lo, hi, before in ((s.test, test_cut, np.inf, test_cut), (s.val, val_cut, test_cut, val_cut)):
        src, tgt = rows_as_sets(held.source, s.item_ids), rows_as_sets(held.target, s.item_ids)
        for r, u in enumerate(held.eval_user_ids):
            g = df[df["user"] == u]
            assert tgt[r] == set(g.loc[(g["timestamp"] >= lo) & (g["timestamp"] < hi), "item"]) & catalogue
            assert src[r] == set(g.loc[g["timestamp"] < before, "item"]) & catalogue
            assert src[r] and tgt[r]
        later = set(df.loc[(df["timestamp"] >= lo) & (df["timestamp"] < hi), "user"])
        assert len(held.eval_user_ids) + held.n_users_dropped == len(later)


def test_time_split_refuses_data_without_times():
    with pytest.raises(ValueError, match="time_split needs a timestamp column"):
        time_split(timed_frame().drop(columns="timestamp"))


@pytest.mark.parametrize("mode", ["user_split", "leave_one_out", "time_split"])
def test_each_mode_builds_a_byte_identical_checkpoint_whose_counts_match_its_arrays(tmp_path, mode):
    df = timed_frame(n_users=120, seed=2)
    kw = dict(split_mode=mode, seed=7, min_rating=None, min_user_interactions=2)
    a = build_recsys_checkpoint(df, checkpoint_path=tmp_path / "a.zip", **kw)
    b = build_recsys_checkpoint(df.sample(frac=1.0, random_state=1), checkpoint_path=tmp_path / "b.zip", **kw)
    assert a.read_bytes() == b.read_bytes()  # row order of the input does not matter
    d = load_recsys_split(a)
    c, p = d["manifest"]["counts"], d["manifest"]["parameters"]
    assert p["split_mode"] == mode
    for group in ("test", "val"):
        assert c[f"n_{group}_rows"] == d[f"{group}_source_matrix"].shape[0] == len(d[f"{group}_eval_user_ids"])
        assert c[f"n_{group}_target_interactions"] == d[f"{group}_target_matrix"].nnz
        assert (d[f"{group}_source_matrix"].multiply(d[f"{group}_target_matrix"])).nnz == 0
    assert c["n_train_interactions"] == d["x_train"].nnz and c["n_items"] == len(d["item_ids"])
    if mode == "time_split":
        assert c["test_cut_timestamp"] >= c["val_cut_timestamp"] and p["eval_holdout_frac"] is None
    if mode == "leave_one_out":
        assert p["test_frac"] is None and (np.diff(d["test_target_matrix"].indptr) == 1).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(split_mode="leave_one_out", test_frac=0.3), "test_frac: does not apply to split_mode='leave_one_out'"),
        (dict(split_mode="time_split", eval_holdout_frac=0.5), "eval_holdout_frac: does not apply"),
        (dict(split_mode="time_split", eval_draws=5), "eval_draws: expected 1 for split_mode='time_split'"),
        (dict(split_mode="random"), "split_mode: expected one of"),
    ],
)
def test_parameters_that_do_not_apply_to_the_mode_are_refused(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_recsys_checkpoint(timed_frame(), checkpoint_path=tmp_path / "x.zip", **kwargs)
    assert not (tmp_path / "x.zip").exists()


def test_eval_draws_five_gives_five_times_the_rows_with_repeated_ids(tmp_path):
    df = timed_frame(n_users=150, seed=5)
    one = load_recsys_split(build_recsys_checkpoint(df, checkpoint_path=tmp_path / "1.zip", min_rating=None))
    five = load_recsys_split(
        build_recsys_checkpoint(df, checkpoint_path=tmp_path / "5.zip", min_rating=None, eval_draws=5)
    )
    n = len(one["test_eval_user_ids"])
    assert five["test_source_matrix"].shape[0] == 5 * n == len(five["test_eval_user_ids"])
    np.testing.assert_array_equal(five["test_eval_user_ids"], np.tile(one["test_eval_user_ids"], 5))
    # Each draw splits the same catalogue items of a user; the draws differ somewhere.
    whole = (five["test_source_matrix"] + five["test_target_matrix"]).toarray()
    assert all((whole[k * n : (k + 1) * n] == whole[:n]).all() for k in range(5))
    assert any(
        (five["test_target_matrix"][k * n : (k + 1) * n] != five["test_target_matrix"][:n]).nnz for k in range(1, 5)
    )


_SPLITS = {
    "user_split": lambda frame, seed: user_split(frame, seed=seed, test_frac=0.3, val_frac=0.2),
    "leave_one_out": lambda frame, seed: leave_one_out(frame, seed=seed),
    "time_split": lambda frame, seed: time_split(frame, test_frac=0.3, val_frac=0.2),
}


@pytest.mark.parametrize("mode", SPLIT_MODES)
def test_a_refusal_states_the_rule_its_split_enforces(tmp_path, mode):
    minimum = MIN_EVAL_INTERACTIONS[mode]
    split_function = {"user_split": user_split, "leave_one_out": leave_one_out, "time_split": time_split}[mode]
    # The docstring states the one declared rule ...
    stated = {int(n) for n in re.findall(r"at least (\d+) interactions", " ".join(split_function.__doc__.split()))}
    assert stated == {minimum}
    # ... the split evaluates users at the minimum and drops them one below it ...
    at_minimum = pd.DataFrame(
        {"user": np.repeat(np.arange(40), minimum), "item": np.arange(40 * minimum) % 7, "value": 1.0}
    ).assign(timestamp=lambda f: f.groupby("user").cumcount() * 100 + f["user"])
    below = at_minimum.groupby("user").head(minimum - 1).reset_index(drop=True)
    assert _SPLITS[mode](at_minimum, 0).test.source.shape[0] > 0
    assert _SPLITS[mode](below, 0).test.source.shape[0] == 0
    # ... and the refusal of a split without test rows states that same rule.
    with pytest.raises(ValueError) as refusal:
        build_recsys_checkpoint(
            below, checkpoint_path=tmp_path / "x.zip", split_mode=mode, min_rating=None, min_user_interactions=1
        )
    assert f"each evaluated user needs {minimum} interactions or more" in str(refusal.value)
    assert f"needs {minimum - 1} interactions" not in str(refusal.value)
    assert not (tmp_path / "x.zip").exists()


def test_leave_one_out_refusal_with_every_user_at_two_interactions_names_three(tmp_path):
    # The case: every user at exactly 2 interactions.
    frame = pd.DataFrame({"user": np.repeat(np.arange(30), 2), "item": np.tile([0, 1], 30), "value": 1.0})
    with pytest.raises(ValueError, match=r"^leave_one_out: the split has no test rows") as refusal:
        build_recsys_checkpoint(
            frame,
            checkpoint_path=tmp_path / "x.zip",
            split_mode="leave_one_out",
            min_rating=None,
            min_user_interactions=1,
        )
    assert "each evaluated user needs 3 interactions or more (one fold-in, one validation and one test target)" in (
        str(refusal.value)
    )


@st.composite
def _interactions(draw):
    n_users = draw(st.integers(3, 12))
    pairs = draw(
        st.lists(st.tuples(st.integers(0, n_users - 1), st.integers(0, 8)), min_size=6, max_size=60, unique=True)
    )
    stamps = draw(st.lists(st.integers(0, 3), min_size=len(pairs), max_size=len(pairs)))  # many ties
    frame = pd.DataFrame(pairs, columns=["user", "item"]).assign(value=1.0, timestamp=stamps)
    if draw(st.booleans()):
        frame = frame.assign(user="u" + frame["user"].astype(str), item="i" + frame["item"].astype(str))
    return frame


def _outcome(mode, frame, seed):
    """Everything a split gives (its arrays' digest, drop counts and cuts), or the refusal it gives."""
    try:
        s = _SPLITS[mode](frame, seed)
    except ValueError as exc:
        return ("refused", str(exc))
    return (split_digest(split_arrays(s)), s.test.n_users_dropped, s.val.n_users_dropped, s.cut_timestamps)


@pytest.mark.parametrize("mode", SPLIT_MODES)
@settings(max_examples=60, deadline=None)
@given(frame=_interactions(), seed=st.integers(0, 2**32), order_seed=st.integers(0, 2**32))
def test_a_split_depends_on_the_rows_not_their_order(mode, frame, seed, order_seed):
    shuffled = frame.sample(frac=1.0, random_state=order_seed % 2**32).reset_index(drop=True)
    assert _outcome(mode, shuffled, seed) == _outcome(mode, frame, seed)


def test_leave_one_out_gives_tied_users_the_same_targets_in_any_row_order():
    # The case: users whose interactions tie in time, the frame given in another row order.
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {"user": np.repeat(np.arange(50), 6), "item": np.tile(np.arange(6), 50), "value": 1.0, "timestamp": 0}
    )
    for seed in range(10):
        shuffled = frame.iloc[rng.permutation(len(frame))]
        a, b = leave_one_out(frame, seed=seed), leave_one_out(shuffled, seed=seed)
        assert (a.test.target != b.test.target).nnz == 0 and (a.val.target != b.val.target).nnz == 0
        assert split_digest(split_arrays(a)) == split_digest(split_arrays(b))
