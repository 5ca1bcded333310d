"""A training run's test metrics on MLflow 3 logged models: linked to the model and the split, ranked by search."""

from __future__ import annotations

import json

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from conftest import sqlite_store
from mlflow_recsys.tracking import SplitConfig, TrainConfig, run_split, run_train
from mlflow_recsys.tracking._training import split_dataset

METRICS = ("ndcg@100", "recall@20")
NAMES = ("ndcg_at_100", "recall_at_20")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """MovieLens-100k seed 42: EASE and Popularity with their pyfunc models, EASE again without one, and
    Popularity on a second split (seed 7), all in one experiment."""
    root = tmp_path_factory.mktemp("logged-models")
    with sqlite_store(root) as experiment_id:
        split = run_split("movielens-100k", SplitConfig(seed=42))
        other = run_split("movielens-100k", SplitConfig(seed=7))
        checkpoint = f"runs:/{split}/checkpoint.zip"
        runs = {
            "ease": run_train(checkpoint, TrainConfig("EASE", metrics=METRICS)),
            "pop": run_train(checkpoint, TrainConfig("Popularity", metrics=METRICS)),
            "ease_external": run_train(checkpoint, TrainConfig("EASE", metrics=METRICS), log_model=False),
            "other_split": run_train(f"runs:/{other}/checkpoint.zip", TrainConfig("Popularity", metrics=METRICS)),
        }
        client = MlflowClient()
        digests = {k: client.get_run(r).data.tags["recsys.split_digest"] for k, r in runs.items()}
        yield {"experiment_id": experiment_id, "runs": runs, "digests": digests, "client": client}


def _models_of_split(store, digest, **search):
    return mlflow.search_logged_models(
        experiment_ids=[store["experiment_id"]],
        filter_string=f"tags.`recsys.split_digest` = '{digest}'",
        order_by=[{"field_name": "metrics.ndcg_at_100", "ascending": False}],
        output_format="list",
        **search,
    )


def test_search_logged_models_ranks_one_splits_models_in_the_order_of_their_runs_ndcg(store):
    digest = store["digests"]["ease"]
    models = _models_of_split(store, digest)
    run_ndcg = {m.source_run_id: store["client"].get_run(m.source_run_id).data.metrics["ndcg_at_100"] for m in models}
    # The split's three runs, not the run on the other split; ranked as their runs' own metric ranks them.
    assert set(run_ndcg) == {store["runs"][k] for k in ("ease", "pop", "ease_external")}
    ranked = [run_ndcg[m.source_run_id] for m in models]
    assert ranked == sorted(run_ndcg.values(), reverse=True) and ranked[0] > ranked[-1]
    assert [m.tags["recsys.model"] for m in models][-1] == "Popularity"
    model_ndcg = [next(x.value for x in m.metrics if x.key == "ndcg_at_100") for m in models]
    assert model_ndcg == [run_ndcg[m.source_run_id] for m in models]


def test_a_split_is_also_selected_by_the_dataset_of_its_metrics(store):
    (split_input,) = store["client"].get_run(store["runs"]["other_split"]).inputs.dataset_inputs
    assert split_input.dataset.name.endswith("seed 7")
    dataset = {"dataset_name": split_input.dataset.name, "dataset_digest": store["digests"]["other_split"][:36]}
    models = mlflow.search_logged_models(
        experiment_ids=[store["experiment_id"]],
        datasets=[dataset],
        filter_string="metrics.ndcg_at_100 > 0",
        output_format="list",
    )
    assert [m.source_run_id for m in models] == [store["runs"]["other_split"]]


def test_each_test_metric_and_its_interval_is_linked_to_the_runs_model_and_split_dataset(store):
    client, run_id = store["client"], store["runs"]["ease"]
    run = client.get_run(run_id)
    (output,) = run.outputs.model_outputs
    model = client.get_logged_model(output.model_id)
    assert model.name == "model" and model.status.to_proto() == mlflow.entities.LoggedModelStatus.READY.to_proto()
    assert model.source_run_id == run_id
    linked = {m.key: m for m in model.metrics}
    (split_input,) = [d.dataset for d in run.inputs.dataset_inputs]
    for name in NAMES:
        for key in (name, f"{name}.ci_low", f"{name}.ci_high"):
            metric = linked[key]
            assert metric.model_id == model.model_id and metric.run_id == run_id
            assert (metric.dataset_name, metric.dataset_digest) == (split_input.name, split_input.digest)
            assert metric.value == run.data.metrics[key]
    assert split_input.digest == run.data.tags["recsys.split_digest"][:36]


def test_the_logged_model_carries_the_runs_recsys_tags_and_params_and_still_loads_by_its_run_uri(store):
    client, run_id = store["client"], store["runs"]["ease"]
    run = client.get_run(run_id)
    model = client.get_logged_model(run.outputs.model_outputs[0].model_id)
    for tag in ("recsys.model", "recsys.seed", "recsys.split_digest", "recsys.targets_fingerprint"):
        assert model.tags[tag] == run.data.tags[tag]
    assert model.params == run.data.params
    loaded = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    assert loaded.metadata.model_id == model.model_id


def test_a_run_without_a_model_ranks_through_an_external_model_named_after_the_recommender(store):
    client, run_id = store["client"], store["runs"]["ease_external"]
    run = client.get_run(run_id)
    (output,) = run.outputs.model_outputs
    model = client.get_logged_model(output.model_id)
    assert model.name == "EASE" and model.tags["mlflow.model.isExternal"] == "true"
    assert model.tags["recsys.split_digest"] == run.data.tags["recsys.split_digest"]
    assert {m.key: m.value for m in model.metrics if m.key in NAMES} == {k: run.data.metrics[k] for k in NAMES}
    # The same recommender and split as the logged EASE run: the same metric, so the two rank together.
    ease = client.get_run(store["runs"]["ease"]).data.metrics
    assert run.data.metrics["ndcg_at_100"] == ease["ndcg_at_100"]


def test_the_evaluation_file_states_the_interval_settings_beside_each_metrics_interval(store, tmp_path):
    run_id = store["runs"]["pop"]
    path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="evaluation.json", dst_path=str(tmp_path))
    meta = json.loads(open(path).read())
    assert meta["level_intervals"] | {"method": None} == {
        "method": None,
        "confidence_level": 0.95,
        "n_resamples": 9999,
        "random_state": 0,
        "unit": "user",
    }
    metrics = store["client"].get_run(run_id).data.metrics
    for key, name in zip(METRICS, NAMES, strict=True):
        entry = meta["metrics"][key]
        assert (entry["ci_low"], entry["ci_high"]) == (metrics[f"{name}.ci_low"], metrics[f"{name}.ci_high"])
        assert entry["ci_low"] <= entry["mean"] <= entry["ci_high"]


def test_the_logged_interval_is_the_percentile_bootstrap_of_the_runs_per_user_values(store, tmp_path):
    """Recomputed here from per_user.parquet with scipy: agreement within Monte Carlo error (see
    tests/test_level_intervals.py for the bound)."""
    import scipy.stats

    run_id = store["runs"]["ease"]
    path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="per_user.parquet", dst_path=str(tmp_path))
    values = pd.read_parquet(path)["ndcg@100"].to_numpy()
    metrics = store["client"].get_run(run_id).data.metrics
    scipy_ci = scipy.stats.bootstrap(
        (values,), np.mean, n_resamples=9999, method="percentile", random_state=np.random.default_rng(11)
    ).confidence_interval
    se = np.std(values, ddof=0) / np.sqrt(len(values))
    tolerance = 4 * np.sqrt(2) * np.sqrt(0.025 * 0.975 / 9999) / (scipy.stats.norm.pdf(1.96) / se)
    assert abs(metrics["ndcg_at_100.ci_low"] - scipy_ci.low) < tolerance
    assert abs(metrics["ndcg_at_100.ci_high"] - scipy_ci.high) < tolerance


def test_split_dataset_digest_is_the_one_the_metrics_carry(store):
    """The dataset a metric links to is split_dataset's: same name and 36-character digest as the split's run."""
    client = store["client"]
    run = client.get_run(store["runs"]["pop"])
    split_run = client.get_run(run.data.params["checkpoint"].split("/")[1])
    manifest_path = mlflow.artifacts.download_artifacts(run_id=split_run.info.run_id, artifact_path="manifest.json")
    manifest = json.loads(open(manifest_path).read())
    dataset = split_dataset(manifest, split_run.data.tags["recsys.split_digest"])
    model = client.get_logged_model(run.outputs.model_outputs[0].model_id)
    ndcg = next(m for m in model.metrics if m.key == "ndcg_at_100")
    assert (ndcg.dataset_name, ndcg.dataset_digest) == (dataset.name, dataset.digest)


def test_a_run_logged_by_hand_calls_log_test_metrics_and_gets_an_external_model_named_by_its_tag(tmp_path):
    """The import path's call: a run with its recsys. tags, a result scored elsewhere, no model id."""
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    from mlflow_recsys.evaluation import EvaluationResult
    from mlflow_recsys.tracking._logged_models import log_test_metrics

    values = np.array([0.0, 0.5, 1.0, 0.25])
    result = EvaluationResult.from_per_user({"ndcg@100": values}, sample_ids=np.arange(4), targets_fingerprint="x")
    dataset = MetaDataset(source=CodeDatasetSource(tags={}), name="own split", digest="d" * 36)
    with sqlite_store(tmp_path) as experiment_id:
        made_with = {"recsys.model": "ItemKNN", "recsys.seed": "none", "recsys.split_digest": "d" * 64}
        with mlflow.start_run(tags=made_with) as run:
            mlflow.log_param("k", "20")
            intervals = log_test_metrics(result, dataset=dataset)
        (model,) = mlflow.search_logged_models(experiment_ids=[experiment_id], output_format="list")
    assert model.name == "ItemKNN" and model.source_run_id == run.info.run_id
    assert {k: model.tags[k] for k in made_with} == made_with and model.params == {"k": "20"}
    linked = {m.key: (m.value, m.dataset_name, m.dataset_digest) for m in model.metrics}
    assert linked == {
        "ndcg_at_100": (0.4375, "own split", "d" * 36),
        "ndcg_at_100.ci_low": (intervals.ci_low["ndcg@100"], "own split", "d" * 36),
        "ndcg_at_100.ci_high": (intervals.ci_high["ndcg@100"], "own split", "d" * 36),
    }


@pytest.mark.integration
def test_over_http_a_live_server_ranks_the_logged_models_of_a_split(mlflow_server):
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_server)
    try:
        experiment_id = mlflow.set_experiment("logged-models-over-http").experiment_id
        checkpoint = f"runs:/{run_split('movielens-100k', SplitConfig(seed=42))}/checkpoint.zip"
        ease = run_train(checkpoint, TrainConfig("EASE", metrics=METRICS))
        pop = run_train(checkpoint, TrainConfig("Popularity", metrics=METRICS), log_model=False)
        digest = MlflowClient().get_run(ease).data.tags["recsys.split_digest"]
        models = _models_of_split({"experiment_id": experiment_id}, digest)
        ndcg = {r: MlflowClient().get_run(r).data.metrics["ndcg_at_100"] for r in (ease, pop)}
    finally:
        mlflow.set_tracking_uri(previous)
    assert [m.source_run_id for m in models] == sorted(ndcg, key=ndcg.get, reverse=True)
    assert {m.name for m in models} == {"model", "Popularity"}
