"""export_split: a split as files with the dataset's own ids, which rebuild the split exactly."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import trained_copy
from mlflow_recsys import export_split
from mlflow_recsys._catalogue import ItemCatalogue
from mlflow_recsys.cli import cli
from mlflow_recsys.data import build_recsys_checkpoint, load_interactions, load_recsys_split
from mlflow_recsys.interchange import export_split_files
from mlflow_recsys.interchange._split_export import FILES


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    one = build_recsys_checkpoint(dataset="movielens-100k", checkpoint_path=root / "one.zip", seed=42)
    two = build_recsys_checkpoint(dataset="movielens-100k", checkpoint_path=root / "two.zip", seed=42, eval_draws=2)
    return {"one": one, "two": two}


def _rebuilt(frame: pd.DataFrame, row_ids: np.ndarray, item_ids: np.ndarray, draws: int):
    """The matrix the exported (user, item[, draw]) rows stand for, rows in the split's order."""
    n_users = len(row_ids) // draws
    position = pd.Index(row_ids[:n_users]).get_indexer(frame["user"])
    rows = position + (frame["draw"].to_numpy() * n_users if "draw" in frame.columns else 0)
    matrix, unknown = ItemCatalogue(item_ids).matrix_from_pairs(rows, frame["item"].to_numpy(), len(row_ids))
    assert not unknown.any() and (position >= 0).all()
    return matrix


@pytest.mark.parametrize("name, draws", [("one", 1), ("two", 2)])
def test_the_exported_files_rebuild_every_matrix_of_the_split(checkpoints, tmp_path, name, draws):
    split = load_recsys_split(checkpoints[name])
    out = export_split(checkpoints[name], tmp_path / "out")
    items = pd.read_parquet(out / "items.parquet")["item"].to_numpy()
    np.testing.assert_array_equal(items, split["item_ids"])
    for stem, (matrix_key, ids_key) in FILES.items():
        frame = pd.read_parquet(out / f"{stem}.parquet")
        evaluation = stem != "train"
        assert ("draw" in frame.columns) == (evaluation and draws > 1), stem
        rebuilt = _rebuilt(frame, split[ids_key], items, draws if evaluation else 1)
        assert rebuilt.shape == split[matrix_key].shape
        assert (rebuilt != (split[matrix_key] != 0)).nnz == 0, stem
        assert len(frame) == split[matrix_key].nnz


def test_ids_are_the_datasets_own_and_split_json_counts_the_files(checkpoints, tmp_path):
    out = export_split(checkpoints["one"], tmp_path / "out")
    raw = load_interactions("movielens-100k")
    liked = set(zip(raw.loc[raw["value"] >= 4, "user"], raw.loc[raw["value"] >= 4, "item"], strict=True))
    for stem in ("train", "test_fold_in", "test_targets"):
        frame = pd.read_parquet(out / f"{stem}.parquet")
        assert frame["user"].dtype == np.int64 and frame["item"].dtype == np.int64
        assert set(zip(frame["user"], frame["item"], strict=True)) <= liked  # MovieLens ids of ratings >= 4
    meta = json.loads((out / "split.json").read_text())
    split = load_recsys_split(checkpoints["one"])
    assert meta["format"] == "mlflow-recsys-split-export" and meta["split_digest"] == split["split_digest"]
    assert meta["dataset"] == "movielens-100k" and meta["seed"] == 42
    for file, entry in meta["files"].items():
        frame = pd.read_parquet(out / file)
        assert entry["rows"] == len(frame) and list(entry["columns"]) == list(frame.columns)
    assert meta["files"]["test_targets.parquet"]["users"] == len(np.unique(split["test_eval_user_ids"])) == 188


def test_csv_holds_what_parquet_holds(checkpoints, tmp_path):
    parquet = export_split(checkpoints["two"], tmp_path / "p")
    csv = export_split(checkpoints["two"], tmp_path / "c", format="csv")
    for stem in (*FILES, "items"):
        pd.testing.assert_frame_equal(pd.read_csv(csv / f"{stem}.csv"), pd.read_parquet(parquet / f"{stem}.parquet"))
    assert sorted(p.name for p in csv.iterdir()) == sorted([f"{s}.csv" for s in (*FILES, "items")] + ["split.json"])


def test_the_cli_exports_a_split_runs_artifact(trained_store, tmp_path):
    with trained_copy(trained_store, tmp_path, "export") as trained:
        split_run = trained["split"]
        result = CliRunner().invoke(
            cli, ["export-split", "--checkpoint", f"runs:/{split_run}/checkpoint.zip", "--out", str(tmp_path / "x")]
        )
        manifest = CliRunner().invoke(
            cli, ["export-split", "--checkpoint", f"runs:/{split_run}/manifest.json", "--out", str(tmp_path / "y")]
        )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"exported the split to {tmp_path / 'x'}"
    assert "  test_targets.parquet" in result.output.splitlines()
    # another artifact of the run is named by its URI, not by the temporary copy that was read
    assert manifest.exit_code == 1 and not (tmp_path / "y").exists()
    assert f"checkpoint: expected a checkpoint zip at 'runs:/{split_run}/manifest.json', found another file" in (
        manifest.output
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"format": "xlsx"}, "format: expected one of"),
        ({"out": "held"}, r"out: expected a new or empty folder, found '.*held' \(a folder that holds something\)"),
        ({"out": "held/keep.txt"}, r"out: expected a new or empty folder, found '.*keep.txt' \(a file\)"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(checkpoints, tmp_path, kwargs, message):
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "keep.txt").write_text("mine")
    out = tmp_path / kwargs.pop("out", "new")
    with pytest.raises(ValueError, match=message):
        export_split(checkpoints["one"], out, **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["held"]
    assert [p.name for p in (tmp_path / "held").iterdir()] == ["keep.txt"]


def test_a_missing_checkpoint_or_a_dict_that_is_no_split_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        export_split(tmp_path / "nothing.zip", tmp_path / "out")
    with pytest.raises(ValueError, match=r"split: expected a split as load_recsys_split returns it"):
        export_split_files({"item_ids": []}, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
