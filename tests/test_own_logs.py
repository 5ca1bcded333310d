"""A user's own interaction log: column mapping, implicit feedback, header-only files, from the API and the CLI."""

from __future__ import annotations

import json
import re

import mlflow
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

import mlflow_recsys as mr
from conftest import sqlite_store
from mlflow_recsys.cli import cli
from mlflow_recsys.data import from_interactions, load_interactions, read_interactions_file

#: A log whose columns have names of their own.
_MAPPED = {"user": "uid", "item": "sku", "value": "stars"}


def _log(n: int = 3000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 150, n),
            "sku": rng.integers(0, 90, n),
            "rating": rng.integers(1, 6, n).astype(float),
            "ts": rng.integers(10**9, 10**9 + 10**6, n),
        }
    )


def test_implicit_feedback_gives_every_row_the_value_one():
    log = _log(50)
    frame = from_interactions(log, user="uid", item="sku", value=None, timestamp="ts")
    assert list(frame.columns) == ["user", "item", "value", "timestamp"]
    assert (frame["value"] == 1.0).all() and len(frame) == 50
    np.testing.assert_array_equal(frame["user"], log["uid"])
    np.testing.assert_array_equal(frame["timestamp"], log["ts"])


def test_a_header_only_file_and_an_empty_frame_are_refused_as_having_no_rows(tmp_path):
    (tmp_path / "header.csv").write_text("user,item,rating,timestamp\n")
    with pytest.raises(ValueError, match=r"header.csv: expected interactions below the header, found no rows"):
        read_interactions_file(tmp_path / "header.csv", value="rating")
    pd.DataFrame({"user": [], "item": [], "value": []}).to_parquet(tmp_path / "empty.parquet")
    with pytest.raises(ValueError, match="found no rows"):
        read_interactions_file(tmp_path / "empty.parquet")
    with pytest.raises(ValueError, match="frame: expected at least one interaction, found no rows"):
        from_interactions(pd.DataFrame({"user": [], "item": [], "value": []}))


@pytest.mark.parametrize(
    "text, columns, message",
    [
        # pandas would read a repeated header name as "user" and "user.1" and pick the first silently.
        ("user,user,item,value\n1,2,3,4\n", {}, "user: expected one column named 'user', found 2 columns"),
        ("user,user,item,value\n1,2,3,4\n", {"user": "user.1"}, "user: expected a column 'user.1' in the"),
        ("user,item,value\n1,2,inf\n2,3,4\n", {}, "expected finite numbers in 'value', found 1 infinite value"),
        ("user,item,value,timestamp\n1,2,4,-inf\n", {}, "expected finite numbers in 'timestamp', found 1 infinite"),
        # A row longer than the header: pandas would take its leading fields as the index and shift the rest.
        ("user,item,value\n1,2,3,4\n", {}, "expected comma-separated rows of the header's fields"),
        ("user,item,value\n1,2,3\n1,2,3,4\n", {}, "expected comma-separated rows of the header's fields"),
        ("", {}, "expected a header line and interactions, found an empty file"),
        ("  \n\n", {}, "expected a header line and interactions, found an empty file"),
        # Past the years 1 to 9999, or through float64 past 2**53, a timestamp would wrap or lose its order.
        ("user,item,value,timestamp\n1,2,4,1e20\n", {}, "expected Unix seconds in [-62,135,596,800, 253,402,300,"),
        ("user,item,value,timestamp\n1,2,4,9223372036854775000\n", {}, "1 value(s) outside, such as 92233720368"),
        ("user,item,value,n\n1,2,3\n", {"user": "x" * 140_000}, "user: expected a column 'xxxx"),
        # A mapped column is named as the log names it, not by its role.
        ("uid,sku,stars\n1,2,\n2,3,4\n", _MAPPED, "log.csv: frame: expected no missing values in 'stars', found 1"),
        ("uid,sku,stars\n1,,4\n", _MAPPED, "expected no missing values in 'sku', found 1"),
        ("uid,sku,stars\n1,2,inf\n", _MAPPED, "expected finite numbers in 'stars', found 1 infinite"),
        ("uid,sku,stars,when\n1,2,4,soon\n", _MAPPED | {"timestamp": "when"}, "ISO 8601 dates in 'when', found"),
        ("uid,sku,stars,when\n1,2,4,1e20\n", _MAPPED | {"timestamp": "when"}, "(years 1 to 9999) in 'when', found 1"),
    ],
)
def test_malformed_logs_are_refused_naming_the_column_or_the_rows(tmp_path, text, columns, message):
    (tmp_path / "log.csv").write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        read_interactions_file(tmp_path / "log.csv", **columns)


def test_ids_and_timestamps_keep_every_distinction_the_file_makes(tmp_path):
    # "-0" is not the integer 0 as written, so the ids stay text; a far date keeps its order; a header longer than
    # the csv module's field limit is still a header.
    long = "t" * 140_000
    text = f"user,item,value,{long}\n0,1,4,9999-12-31T00:00:00\n-0,1,4,2020-01-01T00:00:00+02:00\n"
    (tmp_path / "log.csv").write_text("\n" + text)  # a blank first line, skipped as pandas skips it
    frame = read_interactions_file(tmp_path / "log.csv", timestamp=long)
    assert frame["user"].tolist() == ["0", "-0"]
    assert frame["timestamp"].tolist() == [253_402_214_400, 1_577_829_600]
    # Nanoseconds past pandas' 2262 limit: the fraction is below the second taken, so it is dropped.
    late = pd.DataFrame({"user": [1], "item": [2], "value": [4.0], "timestamp": ["9999-12-31T23:59:59.999999999"]})
    assert from_interactions(late)["timestamp"].tolist() == [253_402_300_799]


def test_a_parquet_file_naming_a_column_twice_or_broken_is_refused_with_its_path(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = [pa.array([1]), pa.array([2]), pa.array([3]), pa.array([4.0])]
    pq.write_table(pa.Table.from_arrays(arrays, names=["user", "user", "item", "value"]), tmp_path / "twice.parquet")
    with pytest.raises(ValueError, match=r"twice.parquet: expected each column named once, found \['user'\] more"):
        read_interactions_file(tmp_path / "twice.parquet")
    (tmp_path / "broken.parquet").write_text("nope")
    with pytest.raises(ValueError, match=r"broken.parquet: expected a Parquet file"):
        read_interactions_file(tmp_path / "broken.parquet")


def test_an_implicit_log_may_use_any_column_name():
    frame = pd.DataFrame({"__implicit_value__": [1, 2, 3], "item": [4, 5, 6]})
    read = from_interactions(frame, user="__implicit_value__", value=None)
    assert read.to_dict("list") == {"user": [1, 2, 3], "item": [4, 5, 6], "value": [1.0, 1.0, 1.0]}


def test_a_frame_with_a_repeated_column_name_is_refused_and_other_repeats_are_left_alone():
    frame = pd.DataFrame([[1, 2, 3, 4.0]], columns=["user", "user", "item", "value"])
    with pytest.raises(ValueError, match=r"^user: expected one column named 'user', found 2 columns of that name$"):
        from_interactions(frame)
    # A repeated name among the columns not read is no ambiguity.
    frame = pd.DataFrame([[1, "a", 3, "b"]], columns=["user", "note", "item", "note"])
    assert from_interactions(frame, value=None).to_dict("list") == {"user": [1], "item": [3], "value": [1.0]}


def test_a_missing_column_of_an_implicit_log_lists_only_the_logs_own_columns():
    with pytest.raises(ValueError) as refused:
        from_interactions(_log(10), user="nope", item="sku", value=None)
    assert str(refused.value) == (
        "user: expected a column 'nope' in the interactions, found columns "
        + str(["uid", "sku", "rating", "ts"])
        + "; the log has a column 'uid': use --user-col uid on the command line "
        "(in Python columns={'user': 'uid'}, or user='uid' for from_interactions)"
    )


def test_one_column_for_two_roles_is_refused():
    with pytest.raises(ValueError, match=r"user/item: expected a column of its own for each, found \['uid'\]"):
        from_interactions(_log(10), user="uid", item="uid", value="rating")


def test_mapped_columns_give_the_same_split_as_a_renamed_file(tmp_path):
    log = _log()
    log.to_csv(tmp_path / "mine.csv", index=False)
    log.rename(columns={"uid": "user", "sku": "item", "rating": "value", "ts": "timestamp"}).to_csv(
        tmp_path / "renamed.csv", index=False
    )
    mapped = mr.build_recsys_checkpoint(
        tmp_path / "mine.csv",
        checkpoint_path=tmp_path / "a.zip",
        split_mode="time_split",
        min_user_interactions=2,
        columns={"user": "uid", "item": "sku", "value": "rating", "timestamp": "ts"},
    )
    plain = mr.build_recsys_checkpoint(
        tmp_path / "renamed.csv", checkpoint_path=tmp_path / "b.zip", split_mode="time_split", min_user_interactions=2
    )
    a, b = mr.load_recsys_split(mapped), mr.load_recsys_split(plain)
    assert (a["x_train"] != b["x_train"]).nnz == 0 and a["x_train"].nnz > 0
    np.testing.assert_array_equal(a["item_ids"], b["item_ids"])
    assert a["manifest"]["dataset"]["columns"] == {"user": "uid", "item": "sku", "value": "rating", "timestamp": "ts"}
    assert a["manifest"]["counts"] == b["manifest"]["counts"]


@pytest.mark.parametrize(
    "columns, min_rating, message",
    [
        (
            {"value": None},
            4.0,
            r"min_rating: expected None for a log without ratings \(columns value=None\), found 4.0",
        ),
        (
            {"rating": "x"},
            None,
            r"columns: expected keys among \['user', 'item', 'value', 'timestamp'\], found \['rating'\]",
        ),
        ({"user": None}, None, r"columns: expected a column name for 'user', found None"),
        ({"user": "nope"}, None, r"user: expected a column 'nope' in the interactions, found columns"),
    ],
)
def test_bad_column_mappings_are_refused_before_anything_is_written(tmp_path, columns, min_rating, message):
    _log(100).rename(columns={"uid": "user", "sku": "item", "rating": "value"}).to_csv(
        tmp_path / "log.csv", index=False
    )
    with pytest.raises(ValueError, match=message):
        mr.build_recsys_checkpoint(
            tmp_path / "log.csv", checkpoint_path=tmp_path / "out.zip", min_rating=min_rating, columns=columns
        )
    assert not (tmp_path / "out.zip").exists()


def test_columns_do_not_apply_to_a_registered_dataset(tmp_path):
    with pytest.raises(ValueError, match="^columns: .*, found the registered"):
        mr.build_recsys_checkpoint("movielens-100k", checkpoint_path=tmp_path / "x.zip", columns={"user": "u"})
    with pytest.raises(ValueError, match="dataset: expected one of"):
        mr.build_recsys_checkpoint("no-such-set", checkpoint_path=tmp_path / "x.zip", columns={"user": "u"})


def test_the_cli_splits_an_implicit_log_with_its_own_column_names(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    log = _log().drop(columns="rating")
    log.to_csv(tmp_path / "views.csv", index=False)
    (tmp_path / "header.csv").write_text("uid,sku,ts\n")
    (tmp_path / "store").mkdir()
    with sqlite_store(tmp_path / "store") as experiment_id:
        args = [
            "split",
            "--dataset",
            str(tmp_path / "views.csv"),
            "--user-col",
            "uid",
            "--item-col",
            "sku",
            "--value-col",
            "none",
            "--timestamp-col",
            "ts",
            "--split-mode",
            "time_split",
            "--min-user-interactions",
            "2",
            "--eval-holdout-frac",
            "",
        ]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
        run = MlflowClient().get_run(res.output.split("split run ")[1].split(":")[0])
        assert json.loads(run.data.params["columns"]) == {
            "item": "sku",
            "timestamp": "ts",
            "user": "uid",
            "value": None,
        }
        assert run.data.params["min_rating"] == "None"  # auto: none for implicit feedback
        # A log with ratings keeps the threshold of 4 under auto; an explicit threshold on implicit data is refused.
        res = CliRunner().invoke(cli, [*args, "--min-rating", "3"])
        assert res.exit_code == 1 and "min_rating: expected None for a log without ratings" in res.output
        n_runs = len(MlflowClient().search_runs([experiment_id]))
        assert n_runs == 1
        res = CliRunner().invoke(
            cli,
            [
                "split",
                "--dataset",
                str(tmp_path / "header.csv"),
                "--user-col",
                "uid",
                "--item-col",
                "sku",
                "--value-col",
                "none",
                "--timestamp-col",
                "ts",
            ],
        )
        assert res.exit_code == 1 and "expected interactions below the header, found no rows" in res.output
        assert len(MlflowClient().search_runs([experiment_id])) == n_runs  # nothing logged


def _share(removed: int, rows: int) -> str:
    share = 100 * removed / rows
    return "<1" if 0 < share < 1 else f"{share:.0f}"


def test_a_log_refused_for_its_value_column_names_the_option_and_the_split_counts_each_step(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    # A real log: MovieLens-100k's first 20,557 rows with the rating under its own name, and 40 ratings repeated.
    ml = load_interactions("movielens-100k").head(20_557).rename(columns={"value": "rating"})
    repeats = ml[ml["rating"] >= 4].head(40).assign(timestamp=lambda f: f["timestamp"] + 1)
    log = pd.concat([ml, repeats], ignore_index=True)
    log.to_csv(tmp_path / "own.csv", index=False)
    # The counts of each step, computed here with pandas alone.
    rated = log[log["rating"] >= 4]
    pairs = rated.drop_duplicates(["user", "item"])
    core = pairs
    while True:
        keep = core.groupby("user")["item"].transform("size") >= 5
        if keep.all():
            break
        core = core[keep]
    expected = [
        ("min_rating", "min_rating >= 4", len(log), len(rated)),
        ("duplicates", "one row per (user, item)", len(rated), len(pairs)),
        ("kcore", "the (5, 1)-core (min_user_interactions, min_item_interactions)", len(pairs), len(core)),
    ]
    assert len(log) > len(rated) and len(rated) - len(pairs) == 40 and len(pairs) > len(core)  # each step removes rows
    (tmp_path / "store").mkdir()
    with sqlite_store(tmp_path / "store") as experiment_id:
        refused = CliRunner().invoke(cli, ["split", "--dataset", str(tmp_path / "own.csv")])
        assert refused.exit_code == 1
        assert "value: expected a column 'value' in the interactions" in refused.output
        assert "the log has a column 'rating': use --value-col rating" in refused.output
        assert "columns={'value': 'rating'}" in refused.output
        assert not MlflowClient().search_runs([experiment_id])
        res = CliRunner().invoke(cli, ["split", "--dataset", str(tmp_path / "own.csv"), "--value-col", "rating"])
        assert res.exit_code == 0, res.output
        for _, rule, rows_in, rows_out in expected:
            removed = rows_in - rows_out
            line = f"  {rule} removed {removed:,} of {rows_in:,} rows ({_share(removed, rows_in)}%)"
            assert line in res.output.splitlines()
        run = MlflowClient().get_run(res.output.split("split run ")[1].split(":")[0])
        for step, _, rows_in, rows_out in expected:
            assert run.data.metrics[f"n_removed_{step}"] == rows_in - rows_out
        manifest = mr.load_recsys_split(
            mlflow.artifacts.download_artifacts(f"runs:/{run.info.run_id}/checkpoint.zip", dst_path=str(tmp_path))
        )["manifest"]
        steps = [(s["step"], s["rule"], s["rows_in"], s["rows_out"]) for s in manifest["preprocessing"]]
        assert steps == expected
        assert manifest["counts"]["n_interactions"] == len(core)
