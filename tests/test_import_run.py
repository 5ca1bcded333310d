"""log_recommendations against a real SQLite store and the MovieLens-100k split: a train-like run."""

import mlflow
import numpy as np
import pandas as pd
import pytest

from conftest import TRAINED_METRICS, trained_copy
from mlflow_recsys import log_recommendations
from mlflow_recsys.data import load_recsys_split, read_checkpoint
from mlflow_recsys.models._train_config import TrainConfig
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._training import resolve_checkpoint

METRICS = TRAINED_METRICS

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning")


def _per_user(run_id: str, dst) -> pd.DataFrame:
    path = mlflow.artifacts.download_artifacts(f"runs:/{run_id}/per_user.parquet", dst_path=str(dst))
    return pd.read_parquet(path)


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory):
    root = tmp_path_factory.mktemp("import")
    with trained_copy(trained_store, root, "import") as runs:
        client = mlflow.MlflowClient()
        split_run = client.get_run(runs["ease"]).data.params["checkpoint"]
        (root / "ckpt").mkdir()
        with read_checkpoint(resolve_checkpoint(split_run, str(root / "ckpt"))) as ckpt:
            split = load_recsys_split(ckpt)
        fitted = TrainConfig("EASE", metrics=METRICS).build().fit(split["x_train"])
        indices, _ = fitted.recommend(split["test_source_matrix"], 100)
        users = np.repeat(split["test_eval_user_ids"], 100)
        frame = pd.DataFrame({"user": users, "item": split["item_ids"][indices.ravel()]})
        frame["rank"] = np.tile(np.arange(1, 101), len(split["test_eval_user_ids"]))
        yield {**runs, "checkpoint": split_run, "frame": frame[indices.ravel() >= 0]}


def test_ease_lists_imported_equal_the_trained_ease_run(store, tmp_path):
    run_id = log_recommendations(store["frame"], checkpoint=store["checkpoint"], model="EASE-lists", metrics=METRICS)
    client = mlflow.MlflowClient()
    imported, trained = client.get_run(run_id), client.get_run(store["ease"])
    pd.testing.assert_frame_equal(_per_user(run_id, tmp_path / "a"), _per_user(store["ease"], tmp_path / "b"))
    assert imported.data.tags[tags.TARGETS_FINGERPRINT] == trained.data.tags[tags.TARGETS_FINGERPRINT]
    assert imported.data.tags[tags.ROLE] == tags.ROLE_TRAIN
    assert imported.data.tags[tags.IMPORTED_FROM] == "dataframe"
    assert imported.data.tags[tags.SEED] == tags.NO_SEED
    assert imported.data.tags[tags.SPLIT_DIGEST] == trained.data.tags[tags.SPLIT_DIGEST]
    assert imported.data.metrics["n_history_items_removed"] == 0
    assert imported.data.metrics["n_missing_users"] == 0
    assert imported.data.metrics["ndcg_at_100"] == pytest.approx(trained.data.metrics["ndcg_at_100"])
    assert imported.data.params["history"] == "remove"


def test_compare_runs_accepts_an_imported_run_beside_a_trained_one(store):
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking import compare_runs

    run_id = log_recommendations(
        store["frame"], checkpoint=store["checkpoint"], model="EASE-lists", seed=3, params={"l2": 500}, metrics=METRICS
    )
    outcome = compare_runs(
        run_ids=[store["pop"], run_id], settings=ComparisonSettings(reference="Popularity", n_resamples=199)
    )
    assert outcome.run_id
    assert mlflow.MlflowClient().get_run(run_id).data.tags[tags.CONFIG] == '{"l2": "500"}'


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"recommendations": "ranks"}, r"recommendations\['rank'\]: expected distinct ranks"),
        ({"params": {"a#b": 1}}, r"params: expected names .*MLflow's rule for param names.*found 'a#b'"),
        ({"params": {"../up": 1}}, r"params: expected names .*found '../up'"),
        ({"seed": "abc"}, r"seed: expected an integer >= 0, found 'abc'"),
        ({"seed": " 4 "}, r"seed: expected an integer >= 0, found ' 4 '"),
        ({"seed": 1.5}, r"seed: expected an integer >= 0, found 1.5"),
        ({"seed": "\u00b2"}, r"seed: expected an integer >= 0, found '\u00b2'"),  # a digit to str.isdigit
        ({"seed": True}, r"seed: expected an integer >= 0, found True"),
        ({"model": "a\nb"}, r"model: expected a non-empty name without control"),
        ({"model": "M" * 6001}, r"model: expected .*of at most 6,000 characters"),
    ],
)
def test_a_refused_import_leaves_no_run(store, change, message):
    """Every refusal, of the lists, the seed, the model's name or a param's name, comes before a run exists."""
    before = len(mlflow.search_runs(search_all_experiments=True))
    given = {"recommendations": store["frame"], "model": "bad", **change}
    if isinstance(given["recommendations"], str):  # "ranks": the lists with every rank 1
        given["recommendations"] = store["frame"].assign(rank=1)
    with pytest.raises(ValueError, match=message):
        log_recommendations(given.pop("recommendations"), checkpoint=store["checkpoint"], metrics=METRICS, **given)
    assert len(mlflow.search_runs(search_all_experiments=True)) == before


def test_a_model_name_mlflow_refuses_for_a_logged_model_is_kept_on_the_run_and_its_model(store):
    """MLflow refuses / : . % and quotes in a logged model's name; the recommender's name keeps them."""
    run_id = log_recommendations(
        store["frame"], checkpoint=store["checkpoint"], model="implicit.als v1/2", seed="007", metrics=METRICS
    )
    run = mlflow.MlflowClient().get_run(run_id)
    assert run.data.tags[tags.MODEL] == "implicit.als v1/2" and run.data.tags[tags.SEED] == "7"
    (model,) = mlflow.search_logged_models(
        experiment_ids=[run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'", output_format="list"
    )
    assert model.name == "implicit-als v1-2" and model.tags[tags.MODEL] == "implicit.als v1/2"


def test_import_run_command_prints_the_run_id_and_the_counts(store, tmp_path):
    from click.testing import CliRunner

    from mlflow_recsys.cli import cli

    path = tmp_path / "recs.parquet"
    store["frame"][store["frame"]["user"] != store["frame"]["user"].iloc[0]].to_parquet(path)
    args = ["import-run", "--checkpoint", store["checkpoint"], "--recommendations", str(path), "--model", "EASE-file"]
    result = CliRunner().invoke(cli, [*args, "--param", "l2=500", "--metrics", "ndcg@100"])
    assert result.exit_code == 0, result.output
    run_id = result.output.split()[2]
    run = mlflow.MlflowClient().get_run(run_id)
    assert run.data.tags[tags.IMPORTED_FROM] == "parquet" and run.data.params["l2"] == "500"
    assert "n_missing_users 1" in result.output and run.data.metrics["n_missing_users"] == 1
    twice = CliRunner().invoke(cli, [*args, "--param", "k=1", "--param", "k=2"])
    assert twice.exit_code == 2 and "expected each KEY once, found 'k' twice" in twice.output
