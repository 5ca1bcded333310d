"""rankings.parquet: the scored lists travel with the per-user values, and a damaged file is refused, never trusted."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mlflow_recsys.errors import ArtifactError
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.tracking._artifacts import EVALUATION_FILE, read_evaluation_artifacts, write_evaluation_artifacts
from mlflow_recsys.tracking._rankings_artifact import RANKINGS_FILE

IDS = np.array([7, 3, 9])


def _result(rankings=None, n_items=None):
    ids = IDS
    return EvaluationResult(
        metrics={"ndcg@2": 0.5},
        per_user={"ndcg@2": np.array([1.0, 0.5, 0.0])},
        sample_ids=ids,
        rankings=rankings,
        n_items=n_items,
    )


LISTS = np.array([[4, 0], [1, -1], [2, 3]], dtype=np.int32)


def test_the_lists_round_trip_with_the_per_user_values(tmp_path):
    written = write_evaluation_artifacts(_result(LISTS, 5), tmp_path, split_digest=None)
    assert sorted(p.name for p in written) == sorted(["per_user.parquet", RANKINGS_FILE, EVALUATION_FILE])
    read = read_evaluation_artifacts(tmp_path).result
    np.testing.assert_array_equal(read.rankings, LISTS)
    assert read.rankings.dtype == np.int32 and read.n_items == 5
    assert json.loads((tmp_path / EVALUATION_FILE).read_text())["rankings"] == {"n_items": 5, "depth": 2}


def test_a_result_without_lists_writes_none_and_reads_back_none(tmp_path):
    written = write_evaluation_artifacts(_result(), tmp_path, split_digest=None)
    assert RANKINGS_FILE not in {p.name for p in written} and not (tmp_path / RANKINGS_FILE).exists()
    read = read_evaluation_artifacts(tmp_path).result
    assert read.rankings is None and read.n_items is None


def _damaged(tmp_path, *, lists=None, entry=None, drop=False, ids=None):
    write_evaluation_artifacts(_result(LISTS, 5), tmp_path, split_digest=None)
    if lists is not None:
        ids = IDS[: len(lists)] if ids is None else ids
        pq.write_table(pa.table({"sample_id": ids, "items": lists}), tmp_path / RANKINGS_FILE)
    if entry is not None:
        meta = json.loads((tmp_path / EVALUATION_FILE).read_text())
        meta["rankings"] = entry
        (tmp_path / EVALUATION_FILE).write_text(json.dumps(meta))
    if drop:
        (tmp_path / RANKINGS_FILE).unlink()
    return tmp_path


def _fixed(rows, depth=2):
    flat = pa.array(np.asarray(rows, dtype=np.int32).reshape(-1), type=pa.int32())
    return pa.FixedSizeListArray.from_arrays(flat, depth)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        ({"drop": True}, "expected artifact rankings.parquet, found none"),
        ({"entry": {"n_items": 5}}, "expected 'rankings' to hold 'n_items' and 'depth'"),
        ({"entry": {"n_items": True, "depth": 2}}, "expected 'rankings' to hold"),
        ({"entry": {"n_items": 5, "depth": 3}}, "expected lists of 3 item indices"),
        ({"lists": _fixed([[4, 0], [1, 5], [2, 3]])}, r"expected item indices in \[0, 5\) or -1 padding, found .*5\]"),
        ({"lists": _fixed([[4, 0], [1, -2], [2, 3]])}, r"found values in \[-2, 4\]"),
        ({"lists": _fixed([[4, 4], [1, -1], [2, 3]])}, "expected distinct items within each list"),
        ({"lists": _fixed([[4, 0], [1, -1]])}, "expected 3 rows"),
        ({"lists": pa.array([[4, 0], [1], [2, 3]])}, "expected lists of 2 item indices"),
        ({"lists": _fixed(LISTS[::-1]), "ids": IDS[::-1]}, "expected the users of per_user.parquet in its .*row 0"),
        ({"lists": _fixed(LISTS), "ids": np.array([7, 3, 8])}, "expected the users of per_user.parquet .*row 2"),
    ],
)
def test_a_damaged_rankings_file_is_refused_naming_the_run(tmp_path, damage, match):
    directory = _damaged(tmp_path, **damage)
    with pytest.raises(ArtifactError, match=f"^run abc: .*{match}"):
        read_evaluation_artifacts(directory, origin="run abc")
