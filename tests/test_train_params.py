"""`mlflow-recsys train` takes and logs only the hyper-parameters of the model it trains."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

import mlflow_recsys as mr
from conftest import sqlite_store
from mlflow_recsys.cli import cli
from mlflow_recsys.models import MODELS


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-params")
    rng = np.random.default_rng(0)
    log = pd.DataFrame({"user": rng.integers(0, 120, 4000), "item": rng.integers(0, 60, 4000), "value": 5.0})
    path = mr.build_recsys_checkpoint(log, checkpoint_path=root / "c.zip", min_user_interactions=3)
    with sqlite_store(root) as experiment_id:
        yield str(path), experiment_id


@pytest.mark.parametrize(
    "model, option, value",
    [("EASE", "--epochs", "5"), ("EASE", "--seed", "1"), ("ELSA", "--l2", "50"), ("Popularity", "--seed", "0")],
)
def test_a_hyper_parameter_the_model_does_not_take_is_refused_before_any_run(checkpoint, model, option, value):
    path, experiment_id = checkpoint
    before = len(MlflowClient().search_runs([experiment_id]))
    res = CliRunner().invoke(cli, ["train", "--checkpoint", path, "--model", model, option, value])
    name = option[2:].replace("-", "_")
    assert res.exit_code == 2, res.output
    takes = ", ".join(MODELS[model].hyperparameters) or "none"
    assert f"{name}: not a hyper-parameter of {model} (it takes: {takes}); found {name}=" in res.output
    assert len(MlflowClient().search_runs([experiment_id])) == before


def test_each_run_logs_only_what_its_model_uses(checkpoint):
    path, experiment_id = checkpoint
    runs = {}
    for args in (
        ["--model", "EASE", "--l2", "50"],
        ["--model", "Popularity"],
        ["--model", "ELSA", "--seed", "3", "--epochs", "1", "--latent_dim", "8", "--batch_size", "32"],
    ):
        res = CliRunner().invoke(cli, ["train", "--checkpoint", path, "--metrics", "ndcg@10", *args])
        assert res.exit_code == 0, res.output
        run = MlflowClient().get_run(res.output.split("train run ")[1].split()[0])
        runs[args[1]] = run
    common = {"model", "checkpoint", "metrics"}
    # A model's params are its config's fields, the ones the command takes and the fixed ones (dtype, optimizer).
    assert (
        set(runs["EASE"].data.params) == common | {"l2", "dtype", "device"} and runs["EASE"].data.params["l2"] == "50.0"
    )
    assert set(runs["Popularity"].data.params) == common
    elsa = runs["ELSA"].data.params
    assert set(elsa) == common | set(MODELS["ELSA"].hyperparameters) | {"optimizer"}
    assert (elsa["seed"], elsa["epochs"], elsa["latent_dim"], elsa["batch_size"]) == ("3", "1", "8", "32")
    # The device is not part of a configuration: runs on cpu and cuda of one setting are seeds of one candidate.
    assert "device" not in runs["ELSA"].data.tags["recsys.config"]
