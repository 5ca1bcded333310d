"""Reading and scoring other frameworks' recommendation lists (no MLflow): hand-computed values, refusals."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mlflow_recsys.evaluation import FoldInRankedWarning
from mlflow_recsys.interchange._recommendations import read_recommendations, score_recommendations

ITEMS = np.array([10, 20, 30, 40, 50], dtype=np.int64)


def _matrix(rows):
    m = sp.lil_matrix((len(rows), len(ITEMS)), dtype=np.float32)
    for r, items in enumerate(rows):
        for item in items:
            m[r, int(np.flatnonzero(ITEMS == item)[0])] = 1
    return sp.csr_matrix(m)


# user 1: history {10}, targets {20, 40}; user 2: history {50}, targets {30}
SPLIT = {
    "item_ids": ITEMS,
    "test_eval_user_ids": np.array([1, 2], dtype=np.int64),
    "test_source_matrix": _matrix([[10], [50]]),
    "test_target_matrix": _matrix([[20, 40], [30]]),
}
METRICS = ["ndcg@3", "recall@3"]


def _dcg(hits):
    return sum(h / np.log2(r + 2) for r, h in enumerate(hits))


def _score(frame, **kw):
    return score_recommendations(
        read_recommendations(frame, **{k: v for k, v in kw.items() if k.endswith("col")}),
        SPLIT,
        metrics=METRICS,
        **{k: v for k, v in kw.items() if not k.endswith("col")},
    )


LISTS = pd.DataFrame({"user": [1, 1, 1, 2, 2, 2], "item": [40, 30, 20, 20, 30, 10], "rank": [1, 2, 3, 1, 2, 3]})


def test_ndcg_and_recall_of_ranked_lists_match_hand_computed_values():
    scored = _score(LISTS)
    frame = scored.result.to_frame()
    # user 1: hits at ranks 1 and 3 of 2 targets; user 2: hit at rank 2 of 1 target
    np.testing.assert_allclose(frame["ndcg@3"], [_dcg([1, 0, 1]) / _dcg([1, 1]), _dcg([0, 1]) / _dcg([1])])
    np.testing.assert_allclose(frame["recall@3"], [1.0, 1.0])
    assert scored.counts == {"n_history_items_removed": 0, "n_missing_users": 0, "n_short_lists": 0}


def test_score_only_input_is_ranked_by_score_descending():
    scores = LISTS.assign(score=-LISTS["rank"] * 1.5).drop(columns="rank")
    pd.testing.assert_frame_equal(_score(scores).result.to_frame(), _score(LISTS).result.to_frame())


def test_history_items_in_a_list_are_removed_and_counted():
    lists = pd.DataFrame({"user": [1, 1, 1, 2], "item": [10, 30, 20, 30], "rank": [1, 2, 3, 1]})
    with pytest.warns(FoldInRankedWarning, match="recommendations: 1 fold-in"):
        scored = _score(lists)
    assert scored.counts["n_history_items_removed"] == 1
    # 10 taken out: user 1's list becomes [30, 20], a hit at rank 2; it is shorter than 3 (and so is user 2's)
    np.testing.assert_allclose(scored.result.to_frame()["ndcg@3"], [_dcg([0, 1]) / _dcg([1, 1]), 1.0])
    assert scored.counts["n_short_lists"] == 2


def test_history_items_are_refused_under_strict():
    lists = pd.DataFrame({"user": [1, 2], "item": [10, 30], "rank": [1, 1]})
    with pytest.raises(ValueError, match=r"recommendations\['item'\]: expected no fold-in .*'item': 10"):
        _score(lists, history="strict")


def test_missing_users_score_zero_and_are_counted_or_refused():
    lists = LISTS[LISTS["user"] == 1]
    scored = _score(lists)
    assert scored.counts["n_missing_users"] == 1
    assert scored.result.to_frame().iloc[1][METRICS].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"\['user'\]: expected a list for every test user.*'user': 2"):
        _score(lists, missing="strict")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (LISTS.assign(user=[1, 1, 1, 2, 2, 9]), r"\['user'\]: expected test users of the split.*'user': 9"),
        (LISTS.assign(item=[40, 30, 20, 20, 30, 99]), r"\['item'\]: expected items of the split.*'item': 99"),
        (LISTS.assign(item=[40, 40, 20, 20, 30, 10]), r"\['item'\]: expected each \(user, item\) once"),
        (LISTS.assign(rank=[1, 1, 3, 1, 2, 3]), r"\['rank'\]: expected distinct ranks"),
        (LISTS.assign(rank=[1, 2.5, 3, 1, 2, 3]), r"\['rank'\]: expected integers.*2.5"),
        (LISTS.drop(columns="rank").assign(score=[1, np.nan, 0, 1, 2, 3]), r"\['score'\]: expected finite"),
        (LISTS.drop(columns="rank").assign(score=[1, np.inf, 0, 1, 2, 3]), r"\['score'\]: expected finite"),
        (LISTS.iloc[:0], r"recommendations: expected at least one recommended item, found an empty input"),
    ],
)
def test_bad_lists_are_refused_naming_the_column_and_rows(frame, message):
    with pytest.raises(ValueError, match=message):
        _score(frame)


def test_trec_file_and_ranx_run_give_the_frame_s_values(tmp_path):
    from ranx import Run

    trec = tmp_path / "recs.trec"
    scores = {1: {"40": 3.0, "30": 2.0, "20": 1.0}, 2: {"20": 3.0, "30": 2.0, "10": 1.0}}
    # written out of order: trec_eval orders by score, not by line or rank field
    lines = [f"{u} Q0 {d} {9 - i} {s} mine" for u, docs in scores.items() for i, (d, s) in enumerate(docs.items())]
    trec.write_text("\n".join(reversed(lines)) + "\n")
    expected = _score(LISTS).result.to_frame()
    from_trec = score_recommendations(read_recommendations(trec), SPLIT, metrics=METRICS)
    pd.testing.assert_frame_equal(from_trec.result.to_frame(), expected)
    run = Run({str(u): docs for u, docs in scores.items()})
    from_ranx = score_recommendations(read_recommendations(run), SPLIT, metrics=METRICS)
    pd.testing.assert_frame_equal(from_ranx.result.to_frame(), expected)
    assert read_recommendations(trec).kind == "trec" and read_recommendations(run).kind == "ranx"


def test_parquet_and_csv_files_read_in_batches_give_the_frame_s_values(tmp_path):
    LISTS.to_parquet(tmp_path / "r.parquet")
    LISTS.to_csv(tmp_path / "r.csv", index=False)
    expected = _score(LISTS).result.to_frame()
    for name in ("r.parquet", "r.csv"):
        recs = read_recommendations(tmp_path / name)
        pd.testing.assert_frame_equal(score_recommendations(recs, SPLIT, metrics=METRICS).result.to_frame(), expected)


def test_a_split_with_several_draws_needs_a_draw_column():
    split = dict(SPLIT, test_eval_user_ids=np.array([1, 2, 1, 2]))
    split["test_source_matrix"] = sp.vstack([SPLIT["test_source_matrix"]] * 2).tocsr()
    split["test_target_matrix"] = sp.vstack([SPLIT["test_target_matrix"]] * 2).tocsr()
    with pytest.raises(ValueError, match=r"\['draw'\]: expected a draw column .* 2 draws"):
        score_recommendations(read_recommendations(LISTS), split, metrics=METRICS)
    both = pd.concat([LISTS.assign(draw=0), LISTS.assign(draw=1)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = score_recommendations(read_recommendations(both), split, metrics=METRICS).result.to_frame()
    assert len(frame) == 4


def _evaluated(tmp_path, recommended) -> float:
    """nDCG@3 of ``recommended`` (one list per SPLIT user) through MLflow's evaluate, without a model."""
    import mlflow

    from conftest import sqlite_store

    data = pd.DataFrame(
        {"items": [[10], [50]], "targets": [[20, 40], [30]], "recommended": recommended, "sample_id": [1, 2]}
    )
    with sqlite_store(tmp_path), mlflow.start_run():
        result = mlflow.models.evaluate(
            data=data,
            targets="targets",
            predictions="recommended",
            model_type="recommender",
            evaluators="recsys",
            evaluator_config={"metrics": ["ndcg@3"], "item_ids": ITEMS.tolist()},
        )
    return result.metrics["ndcg_at_3"]


def test_recsys_evaluator_scores_static_predictions_without_a_model(tmp_path):
    expected = np.mean([_dcg([1, 0, 1]) / _dcg([1, 1]), _dcg([0, 1]) / _dcg([1])])
    assert _evaluated(tmp_path, [[40, 30, 20], [20, 30, 10]]) == pytest.approx(expected)


def test_a_file_past_the_row_limit_is_refused_naming_it(tmp_path, monkeypatch):
    from mlflow_recsys.interchange import _recommendations as recommendations

    LISTS.to_parquet(tmp_path / "r.parquet")
    monkeypatch.setattr(recommendations, "MAX_ROWS", 5)  # six rows, limit five: the same check as at 100 million
    with pytest.raises(ValueError, match=r"r.parquet: expected at most 5 rows \(MAX_ROWS\)"):
        read_recommendations(tmp_path / "r.parquet")


# A split whose ids are text: "025" and "25" are two users, "007" and "7" two items.
TEXT_ITEMS = np.array(["007", "7", "a"])
TEXT_SPLIT = {
    "item_ids": TEXT_ITEMS,
    "test_eval_user_ids": np.array(["025", "25"]),
    "test_source_matrix": sp.csr_matrix(np.array([[0, 0, 1], [0, 0, 1]], dtype=np.float32)),
    "test_target_matrix": sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 0]], dtype=np.float32)),
}


def test_a_csv_file_keeps_text_ids_as_written(tmp_path):
    """'025' is user 025, not 25, and '007' item 007, not 7: a CSV's id columns are read as text and matched to
    the split's ids as the split holds them; Parquet gives the same values."""
    lists = pd.DataFrame({"user": ["025", "025", "25", "25"], "item": ["007", "7", "7", "007"], "rank": [1, 2, 1, 2]})
    lists.to_csv(tmp_path / "r.csv", index=False)
    lists.to_parquet(tmp_path / "r.parquet")
    from_csv = score_recommendations(read_recommendations(tmp_path / "r.csv"), TEXT_SPLIT, metrics=["ndcg@1"])
    from_parquet = score_recommendations(read_recommendations(tmp_path / "r.parquet"), TEXT_SPLIT, metrics=["ndcg@1"])
    # each user's first item is its own target: nDCG@1 = 1 for both
    assert from_csv.result.per_user["ndcg@1"].tolist() == [1.0, 1.0]
    pd.testing.assert_frame_equal(from_csv.result.to_frame(), from_parquet.result.to_frame())
    pd.DataFrame({"user": ["025"], "item": ["007"], "rank": [1]}).to_csv(tmp_path / "one.csv", index=False)
    one = score_recommendations(read_recommendations(tmp_path / "one.csv"), TEXT_SPLIT, metrics=["ndcg@1"])
    assert one.result.per_user["ndcg@1"].tolist() == [1.0, 0.0] and one.counts["n_missing_users"] == 1


def _written(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "options", "message"),
    [
        ("r.trec", "1 Q0 40 1 3.0 run x\n", {}, r"expected six whitespace-separated fields .*found 7"),
        ("r.trec", "1 Q0 40 1 nan run\n", {}, r"\['score'\]: expected finite numbers"),
        ("r.trec", "1 Q0 40 1 3.0\n", {}, r"expected six whitespace-separated fields .*found 5"),
        (
            "r.csv",
            "uid,iid,pos\n1,40,1\n",
            {"user_col": "uidx", "item_col": "iid", "rank_col": "pos"},
            r"\['uidx'\]: expected this column, found columns \['uid', 'iid', 'pos'\]",
        ),
        ("r.csv", "user,item,item\n1,40,1\n", {}, r"expected distinct column names, found \['item'\] more than once"),
        ("r.csv", "user,item,rank\n1,40,0\n", {}, r"\['rank'\]: expected integers >= 1, found 1 other"),
        ("r.csv", "user,item,rank\n1,40,-3\n", {}, r"\['rank'\]: expected integers >= 1"),
        ("r.csv", "user,item,rank\n1,40,1\n,30,2\n", {}, r"\['user'\]: expected an id on every row, found 1 empty"),
        (
            "r.csv",
            "user,item,rank\n1,40,1\n",
            {"user_col": "item", "item_col": "item"},
            r"user_col, item_col, rank_col, score_col: expected a different column for each",
        ),
    ],
)
def test_a_malformed_file_is_refused_naming_what_is_wrong(tmp_path, name, text, options, message):
    with pytest.raises(ValueError, match=message):
        score_recommendations(read_recommendations(_written(tmp_path, name, text), **options), SPLIT, metrics=METRICS)


def test_trec_ranks_from_zero_are_read_as_trec_eval_reads_them(tmp_path):
    trec = _written(tmp_path, "r.trec", "1 Q0 40 0 3.0 run\n1 Q0 30 1 2.0 run\n2 Q0 30 0 1.0 run\n")
    lists = pd.DataFrame({"user": [1, 1, 2], "item": [40, 30, 30], "rank": [1, 2, 1]})
    pd.testing.assert_frame_equal(
        score_recommendations(read_recommendations(trec), SPLIT, metrics=METRICS).result.to_frame(),
        _score(lists).result.to_frame(),
    )


@pytest.mark.parametrize("name", ["r.parquet", "r.csv", "r.trec"])
def test_every_file_format_past_the_row_limit_is_refused_naming_it(tmp_path, monkeypatch, name):
    from mlflow_recsys.interchange import _recommendations as recommendations

    LISTS.to_parquet(tmp_path / "r.parquet")
    LISTS.to_csv(tmp_path / "r.csv", index=False)
    _written(tmp_path, "r.trec", "".join(f"{r.user} Q0 {r.item} {r.rank} 1.0 run\n" for r in LISTS.itertuples()))
    monkeypatch.setattr(recommendations, "MAX_ROWS", 5)  # six rows, limit five: the same check as at the real limit
    with pytest.raises(ValueError, match=rf"{name}: expected at most 5 rows \(MAX_ROWS\)"):
        read_recommendations(tmp_path / name)


def test_a_folder_or_a_file_of_another_format_is_refused_in_one_readable_line(tmp_path):
    with pytest.raises(ValueError, match=r"recommendations: expected a file of lists, found 'the folder "):
        read_recommendations(tmp_path)
    LISTS.to_parquet(tmp_path / "r.parquet")
    with pytest.raises(ValueError, match=r"expected a readable csv file") as refused:
        read_recommendations(tmp_path / "r.parquet", format="csv")
    assert str(refused.value).isascii() and str(refused.value).isprintable()


def test_the_evaluator_takes_history_items_out_before_the_cutoff_as_the_import_does(tmp_path):
    """A list that leads with the user's own history is scored on the items behind it, by both paths."""
    recommended = [[10, 40, 30, 20], [50, 20, 30, 10]]  # each leads with a fold-in item
    evaluated = _evaluated(tmp_path, recommended)
    # behind the history item: user 1 [40, 30, 20] hits at 1 and 3; user 2 [20, 30, 10] hits at 2
    assert evaluated == pytest.approx(np.mean([_dcg([1, 0, 1]) / _dcg([1, 1]), _dcg([0, 1]) / _dcg([1])]))
    lists = pd.DataFrame(
        {"user": [1] * 4 + [2] * 4, "item": [i for row in recommended for i in row], "rank": [1, 2, 3, 4] * 2}
    )
    with pytest.warns(FoldInRankedWarning):
        imported = score_recommendations(read_recommendations(lists), SPLIT, metrics=["ndcg@3"])
    assert imported.result.metrics["ndcg@3"] == pytest.approx(evaluated)


def test_a_refusal_shows_the_rows_as_the_input_wrote_them(tmp_path):
    """Ranks as ranks and scores as scores, not the reader's internal order."""
    with pytest.raises(ValueError, match=r"'user': 9, 'item': 10, 'rank': 3\.0\}\]$"):
        _score(LISTS.assign(user=[1, 1, 1, 2, 2, 9]))
    scored = LISTS.drop(columns="rank").assign(score=[0.5, 0.4, 0.3, 0.9, 0.8, 0.7], user=[1, 1, 1, 2, 2, 9])
    with pytest.raises(ValueError, match=r"'user': 9, 'item': 10, 'score': 0\.7\}\]$"):
        _score(scored)
