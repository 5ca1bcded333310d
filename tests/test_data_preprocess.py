import pandas as pd
import pytest

from mlflow_recsys.data._preprocess import binarise, kcore_prune, preprocess_interactions


def frame(rows):
    return pd.DataFrame(rows, columns=["user", "item", "value", "timestamp"])


def pairs(df):
    return sorted(zip(df["user"].tolist(), df["item"].tolist(), strict=True))


def test_binarise_keeps_ratings_at_or_above_threshold_as_ones():
    df = frame([(1, 10, 3.0, 5), (1, 11, 4.0, 6), (2, 10, 5.0, 7), (2, 12, 3.9, 8)])
    out = binarise(df, min_rating=4)
    assert pairs(out) == [(1, 11), (2, 10)]
    assert out["value"].tolist() == [1.0, 1.0]


def test_binarise_collapses_duplicate_pairs_keeping_earliest_timestamp():
    df = frame([(1, 10, 5.0, 30), (1, 10, 4.0, 20), (1, 10, 2.0, 10), (2, 10, 5.0, 1)])
    out = binarise(df, min_rating=4)
    assert pairs(out) == [(1, 10), (2, 10)]
    # The 2-star rating at t=10 is not a positive, so the earliest positive is t=20.
    assert out.loc[out["user"] == 1, "timestamp"].item() == 20


def test_binarise_none_threshold_keeps_every_rating():
    df = frame([(1, 10, 1.0, 1), (1, 11, 2.0, 2)])
    assert len(binarise(df, min_rating=None)) == 2


def test_binarise_rejects_text_threshold():
    with pytest.raises(ValueError, match="min_rating"):
        binarise(frame([(1, 10, 1.0, 1)]), min_rating="4")


def test_kcore_prune_repeats_until_no_user_or_item_is_below_threshold():
    # Thresholds 2/2. Pass 1 drops D (1 item). That leaves item 3 with one user,
    # so pass 2 drops C-3; then C has one item and pass 3 drops C-2. Pass 4 is
    # stable. A single pass would have kept C-2 and C-3.
    df = frame(
        [
            ("A", 1, 1.0, 0),
            ("A", 2, 1.0, 0),
            ("B", 1, 1.0, 0),
            ("B", 2, 1.0, 0),
            ("C", 2, 1.0, 0),
            ("C", 3, 1.0, 0),
            ("D", 3, 1.0, 0),
        ]
    )
    out, report = kcore_prune(df, min_user_interactions=2, min_item_interactions=2)
    assert pairs(out) == [("A", 1), ("A", 2), ("B", 1), ("B", 2)]
    assert report.iterations == 4
    assert (report.n_users_before, report.n_users_after) == (4, 2)
    assert (report.n_items_before, report.n_items_after) == (3, 2)
    assert (report.n_interactions_before, report.n_interactions_after) == (7, 4)


def test_kcore_prune_can_empty_the_frame():
    df = frame([(1, 1, 1.0, 0), (2, 2, 1.0, 0)])
    out, _ = kcore_prune(df, min_user_interactions=2)
    assert len(out) == 0


@pytest.mark.parametrize("bad", [0, 2.5, True])
def test_kcore_prune_rejects_threshold_that_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match="min_user_interactions"):
        kcore_prune(frame([(1, 1, 1.0, 0)]), min_user_interactions=bad)


def test_missing_column_is_named():
    with pytest.raises(ValueError, match=r"missing \['value'\]"):
        binarise(pd.DataFrame({"user": [1], "item": [1], "timestamp": [5]}))


def test_binarise_without_timestamps_keeps_the_first_row_of_a_pair():
    frame = pd.DataFrame({"user": [2, 1, 1], "item": [5, 3, 3], "value": [4.0, 5.0, 4.0]})
    out = binarise(frame, min_rating=4)
    assert list(out.columns) == ["user", "item", "value"]
    assert out[["user", "item"]].values.tolist() == [[1, 3], [2, 5]]


def test_preprocess_counts_the_rows_each_step_removed():
    frame = pd.DataFrame(
        {
            "user": [1, 1, 1, 1, 2, 2, 2, 3],
            "item": [1, 1, 2, 3, 1, 2, 3, 1],
            "value": [5.0, 4.0, 4.0, 2.0, 5.0, 5.0, 4.0, 5.0],
            "timestamp": [3, 1, 2, 4, 1, 2, 3, 1],
        }
    )
    out = preprocess_interactions(frame, min_rating=4, min_user_interactions=2)
    by_hand = kcore_prune(binarise(frame, min_rating=4), min_user_interactions=2)[0]
    pd.testing.assert_frame_equal(out.frame, by_hand)
    assert [(s.step, s.rows_in, s.rows_out) for s in out.steps] == [
        ("min_rating", 8, 7),  # the 2.0
        ("duplicates", 7, 6),  # user 1's second row of item 1
        ("kcore", 6, 5),  # user 3, with one item
    ]
    assert out.steps[0].describe() == "min_rating >= 4 removed 1 of 8 rows (12%)"
    assert preprocess_interactions(frame, min_rating=None, min_user_interactions=1).steps[0].removed == 0
