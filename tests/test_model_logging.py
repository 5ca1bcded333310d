"""The pyfunc model logged by log_recommender: raw item ids in and out, typed signature, bad input."""

import mlflow
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from conftest import new_sqlite_store
from mlflow_recsys.models import EASE, EASEConfig, UnknownItemsWarning
from mlflow_recsys.tracking._model_logging import log_recommender

ITEMS = np.array(["tt01", "tt02", "tt03", "tt04", "tt05", "tt06"])


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    x = sp.csr_matrix((rng.random((40, len(ITEMS))) < 0.4).astype(np.float32))
    return EASE(EASEConfig(l2=2.0)).fit(x)


@pytest.fixture(scope="module")
def string_model(fitted, tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(new_sqlite_store(root / "mlruns.db"))
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("m", artifact_location=(root / "a").as_uri()))
    with mlflow.start_run():
        info = log_recommender(fitted, ITEMS, eval_user_ids=np.array(["alice", "bob"]))
    yield mlflow.pyfunc.load_model(info.model_uri)
    mlflow.set_tracking_uri(previous)


def test_string_ids_map_to_the_same_lists_as_the_raw_model(fitted, string_model):
    schema = string_model.metadata.get_input_schema().input_dict()
    assert schema["items"].type.dtype.name == "string" and schema["user"].type.name == "string"
    out = string_model.predict(pd.DataFrame({"user": ["alice", "bob"], "items": [["tt02", "tt05"], []], "k": [3, 3]}))
    source = sp.csr_matrix(([1.0, 1.0], ([0, 0], [1, 4])), shape=(2, len(ITEMS)))
    top, scores = fitted.recommend(source, 3)
    assert out["items"].tolist() == [ITEMS[t].tolist() for t in top]
    np.testing.assert_array_equal(np.array(out["scores"].tolist()), scores.astype(float))
    assert out["user"].tolist() == ["alice", "bob"] and out["unknown_items"].tolist() == [[], []]


def test_unknown_ids_are_reported_not_dropped_silently(string_model):
    with pytest.warns(UnknownItemsWarning, match="1 item id.s. in 1 row.s. are not in the model's catalogue of 6"):
        out = string_model.predict(pd.DataFrame({"items": [["tt01", "nope"]], "k": [2]}))
    assert out["unknown_items"].tolist() == [["nope"]] and "tt01" not in out["items"][0]


@pytest.mark.parametrize(
    "item_ids, message",
    [
        (ITEMS[:5], "expected 6 ids .one per model column., found 5"),
        (np.array(["a", "a", "b", "c", "d", "e"]), "expected distinct ids, found duplicates"),
        (np.arange(6.0), "expected integer or string ids, found dtype float64"),
        (ITEMS.reshape(2, 3), "expected a 1-d array of ids, found shape .2, 3."),
    ],
)
def test_bad_item_ids_are_refused_before_anything_is_logged(fitted, item_ids, message):
    with pytest.raises(ValueError, match=f"item_ids: {message}"):
        log_recommender(fitted, item_ids)


def test_each_row_gets_its_own_k_capped_at_the_catalogue(string_model):
    out = string_model.predict(pd.DataFrame({"items": [["tt01"], ["tt02"], []], "k": [2, 4, 10**12]}))
    assert [len(r) for r in out["items"]] == [2, 4, len(ITEMS)]
    with pytest.raises(Exception, match="expected k >= 1 in every row, found 0"):
        string_model.predict(pd.DataFrame({"items": [["tt01"]], "k": [0]}))
