"""The pyfunc model logged by log_recommender: raw item ids in and out, typed signature, bad input."""

import mlflow
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

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
def model_uri(fitted, tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(new_sqlite_store(root / "mlruns.db"))
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("m", artifact_location=(root / "a").as_uri()))
    with mlflow.start_run():
        info = log_recommender(fitted, ITEMS, eval_user_ids=np.array(["alice", "bob"]))
    yield info.model_uri
    mlflow.set_tracking_uri(previous)


@pytest.fixture(scope="module")
def string_model(model_uri):
    return mlflow.pyfunc.load_model(model_uri)


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


FRAME = pd.DataFrame({"items": [["tt02", "tt05"], ["tt01"], []], "k": [4, 4, 2]})


def test_the_device_param_picks_where_the_logged_model_scores(string_model):
    params = string_model.metadata.get_params_schema().params
    assert [(p.name, p.default) for p in params] == [("device", "cpu")]
    pd.testing.assert_frame_equal(string_model.predict(FRAME, params={"device": "cpu"}), string_model.predict(FRAME))
    with pytest.raises(Exception, match=r"params\['device'\]: expected a torch device string .*, found 'xla'"):
        string_model.predict(FRAME, params={"device": "xla"})
    if not torch.cuda.is_available():  # the param reaches the device check: this machine has no GPU to give
        with pytest.raises(Exception, match=r"params\['device'\]: expected a device this machine has, found 'cuda'"):
            string_model.predict(FRAME, params={"device": "cuda"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_logged_model_and_the_evaluator_rank_on_a_gpu_as_on_the_host(string_model, model_uri):
    on_gpu, on_host = string_model.predict(FRAME, params={"device": "cuda"}), string_model.predict(FRAME)
    assert on_gpu["items"].tolist() == on_host["items"].tolist()
    np.testing.assert_allclose(np.concatenate(on_gpu["scores"]), np.concatenate(on_host["scores"]), rtol=1e-5)
    assert _evaluated(model_uri, "cuda")[0] == _evaluated(model_uri)[0]


class _ListsWithoutDevice(mlflow.pyfunc.PythonModel):
    """A model from elsewhere: the same three items for everyone, and no inference params."""

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        return pd.DataFrame({"items": [ITEMS[2:5].tolist()] * len(model_input)})


def _evaluated(model, device=None, **data):
    """nDCG@3 by the recsys evaluator of ``model`` (a URI, or None with a ``recommended`` column) over two users."""
    frame = pd.DataFrame({"items": [["tt02"], ["tt01"]], "targets": [["tt03"], ["tt04", "tt06"]], **data})
    config = {"metrics": ["ndcg@3"], "item_ids": ITEMS.tolist(), **({} if device is None else {"device": device})}
    with mlflow.start_run() as run:
        result = mlflow.models.evaluate(
            model,
            data=frame,
            targets="targets",
            model_type="recommender",
            evaluators="recsys",
            evaluator_config=config,
            **({"predictions": "recommended"} if model is None else {}),
        )
    return result.metrics, run.info.run_id


def test_the_recsys_evaluator_scores_on_the_device_it_is_given_and_refuses_what_cannot(model_uri):
    assert _evaluated(model_uri, "cpu")[0] == _evaluated(model_uri)[0]
    refusals = [
        (model_uri, "xla", {}, "expected a torch device string"),
        (None, "cpu", {"recommended": [["tt03"], ["tt04"]]}, "expected a model to score on the device, found static"),
    ]
    with mlflow.start_run():
        other = mlflow.pyfunc.log_model(name="other", python_model=_ListsWithoutDevice()).model_uri
    refusals.append((other, "cpu", {}, "expected a model whose signature takes the inference param 'device'"))
    as_function = lambda frame: _ListsWithoutDevice().predict(None, frame)  # noqa: E731 - a model MLflow wraps as is
    refusals.append((as_function, "cpu", {}, "expected a model whose signature takes the inference param 'device'"))
    assert _evaluated(other)[0]["ndcg_at_3"] >= 0  # scored as it is without a device
    for model, device, data, message in refusals:
        runs_before = len(mlflow.search_runs(search_all_experiments=True))
        with pytest.raises(Exception, match=rf"evaluator_config\['device'\]: {message}"):
            _evaluated(model, device, **data)
        failed = mlflow.search_runs(search_all_experiments=True, order_by=["attributes.start_time DESC"]).iloc[0]
        assert len(mlflow.search_runs(search_all_experiments=True)) == runs_before + 1
        assert not any(c.startswith("metrics.ndcg") and pd.notna(failed[c]) for c in failed.index)
