"""SplitConfig and TrainConfig (issue 16, point 1): checked once, canonical, and what the steps log."""

from __future__ import annotations

import dataclasses
import inspect
import json
import pickle
import re
import zipfile

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import sqlite_store
from mlflow_recsys.data import SplitConfig, build_recsys_checkpoint
from mlflow_recsys.models import MODELS, EASEConfig, TrainConfig
from mlflow_recsys.tracking import run_split, run_train


@pytest.fixture(scope="module")
def log():
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "user": rng.integers(0, 90, 3000),
            "item": rng.integers(0, 50, 3000),
            "value": rng.integers(1, 6, 3000).astype(float),
            "timestamp": rng.integers(0, 10**6, 3000),
        }
    )


def test_split_defaults_are_build_recsys_checkpoints_and_the_command_lines():
    from mlflow_recsys.cli import split

    defaults = {f.name: f.default for f in dataclasses.fields(SplitConfig)}
    signature = inspect.signature(build_recsys_checkpoint).parameters
    assert {name: signature[name].default for name in defaults} == defaults
    cli = {p.name: p.default for p in split.params}
    # The command line says "auto" for min_rating: 4, or none for a log without ratings.
    assert {name: cli[name] for name in defaults if name != "min_rating"} == {
        name: value for name, value in defaults.items() if name != "min_rating"
    }
    assert cli["min_rating"] == "auto" and defaults["min_rating"] == 4.0


@pytest.mark.parametrize(
    "given, message",
    [
        ({"split_mode": "random"}, "split_mode: expected one of ('user_split', 'leave_one_out', 'time_split')"),
        ({"seed": -1}, "seed: expected an integer >= 0, found -1"),
        ({"seed": 1.5}, "seed: expected an integer >= 0, found 1.5"),
        ({"eval_draws": 0}, "eval_draws: expected an integer >= 1, found 0"),
        ({"split_mode": "leave_one_out", "eval_draws": 2}, "eval_draws: expected 1 for split_mode='leave_one_out'"),
        ({"split_mode": "time_split", "eval_holdout_frac": 0.3}, "eval_holdout_frac: does not apply to split_mode="),
        ({"split_mode": "leave_one_out", "test_frac": 0.3}, "test_frac: does not apply to split_mode="),
        ({"test_frac": 0.6, "val_frac": 0.5}, "test_frac + val_frac: expected a sum below 1"),
        ({"eval_holdout_frac": 1.0}, "eval_holdout_frac: expected a number strictly between 0 and 1, found 1.0"),
        ({"min_rating": float("nan")}, "min_rating: expected a finite number or None, found nan"),
        ({"min_rating": True}, "min_rating: expected a finite number or None, found True"),
        ({"min_user_interactions": 0}, "min_user_interactions: expected an integer >= 1, found 0"),
        ({"min_item_interactions": "2"}, "min_item_interactions: expected an integer >= 1, found '2'"),
    ],
)
def test_each_split_setting_is_refused_with_its_name(given, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SplitConfig(**given)


def test_split_config_is_frozen_and_canonical():
    config = SplitConfig(seed=np.int64(7), min_rating=4, min_user_interactions=np.int32(3))
    assert (type(config.seed), type(config.min_rating), type(config.min_user_interactions)) == (int, float, int)
    # The mode's default fractions are filled in, so spelling them out makes the same config.
    assert SplitConfig() == SplitConfig(eval_holdout_frac=0.2, test_frac=0.2, val_frac=0.1)
    assert (SplitConfig().test_frac, SplitConfig(split_mode="leave_one_out").test_frac) == (0.2, None)
    assert SplitConfig(split_mode="time_split").split_keywords() == {"test_frac": 0.2, "val_frac": 0.1}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 8  # type: ignore[misc]
    assert hash(config) == hash(SplitConfig(seed=7, min_rating=4.0, min_user_interactions=3))


@pytest.mark.parametrize(
    "config",
    [
        SplitConfig(seed=5, eval_draws=2, test_frac=0.25),
        SplitConfig(split_mode="leave_one_out", min_rating=None, min_user_interactions=3),
        SplitConfig(split_mode="time_split", val_frac=0.0, min_item_interactions=2),
    ],
)
def test_to_params_is_what_the_checkpoint_manifest_records(log, tmp_path, config):
    path = build_recsys_checkpoint(log, checkpoint_path=tmp_path / "c.zip", **config.to_params())
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["parameters"] == config.to_params()
    assert list(config.to_params()) == [f.name for f in dataclasses.fields(SplitConfig)]


def test_the_train_steps_defaults_are_the_ones_its_command_line_states():
    from mlflow_recsys.cli import train

    stated = {}
    for option in train.params:
        found = re.match(r"(\w+): .*\[default: ([^\]]+)\]", option.help or "")
        if found:
            stated[option.name] = (found.group(1), found.group(2))
    assert len(stated) == 8  # l2, seed and ELSA's six others but patience
    for name, (model, text) in stated.items():
        logged = TrainConfig(model).to_params()[name]
        assert logged == type(logged)(text), name


@pytest.mark.parametrize(
    "args, message",
    [
        (("KNN",), "model: expected one of ('EASE', 'ELSA', 'Popularity'), found 'KNN'"),
        (("EASE", {"epochs": 5}), "epochs: not a hyper-parameter of EASE (it takes: l2); found epochs=5"),
        (("Popularity", {"seed": 0}), "seed: not a hyper-parameter of Popularity (it takes: none); found seed=0"),
        (("EASE", [("l2", 5.0)]), "hyperparameters: expected a mapping of hyper-parameter names to values, found"),
        (("EASE", {"l2": -1.0}), "l2: expected a finite number > 0, found -1.0"),
        (("ELSA", {"epochs": 0}), "epochs: expected an integer >= 1, found 0"),
        (("ELSA", {"device": "meta"}), "device"),
        (("EASE", {}, ("ndcg@x",)), "metrics: "),
        (("EASE", {}, ()), "metrics: "),
        (("EASE", {}, 3), "metrics: "),
    ],
)
def test_each_train_setting_is_refused_with_its_name(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainConfig(*args)


def test_train_config_is_read_only_canonical_and_survives_pickling():
    config = TrainConfig("ELSA", {"seed": np.int64(3), "lr": 1}, metrics="ndcg@10")
    assert dict(config.hyperparameters) == {"seed": 3, "lr": 1.0} and type(config.hyperparameters["seed"]) is int
    assert config.metrics == ("ndcg@10",)
    with pytest.raises(TypeError):
        config.hyperparameters["seed"] = 4  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model = "EASE"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(config)) == config  # a Ray task gets it pickled
    assert hash(config) == hash(TrainConfig("ELSA", {"lr": 1.0, "seed": 3}, metrics=["ndcg@10"]))
    with pytest.raises(ValueError, match="seed: expected an integer >= 0"):
        config.replace(hyperparameters={"seed": -1})


def test_to_params_is_the_models_config_and_nothing_else():
    ease = TrainConfig("EASE", {"l2": 50}).to_params()
    assert ease == {
        "model": "EASE",
        "metrics": ",".join(TrainConfig("EASE").metrics),
        "l2": 50.0,
        "dtype": EASEConfig().dtype,
    }
    assert set(TrainConfig("Popularity").to_params()) == {"model", "metrics"}
    elsa = TrainConfig("ELSA", {"seed": 2}, metrics=["recall@20", "ndcg@10", "ndcg@5"]).to_params()
    assert set(MODELS["ELSA"].hyperparameters) <= set(elsa) and elsa["seed"] == 2
    # Keys of one metric class are scored by one object, so they are listed together.
    assert elsa["metrics"] == "recall@20,ndcg@10,ndcg@5"


@pytest.mark.parametrize("step", ["split", "train"])
def test_a_step_refuses_a_config_of_the_wrong_kind_before_any_run(tmp_path, step):
    with sqlite_store(tmp_path) as experiment_id:
        if step == "split":
            with pytest.raises(ValueError, match=re.escape("config: expected a SplitConfig, found {'seed': 1}")):
                run_split("movielens-100k", {"seed": 1})  # type: ignore[arg-type]
        else:
            with pytest.raises(ValueError, match=re.escape("config: expected a TrainConfig, found 'EASE'")):
                run_train(str(tmp_path / "missing.zip"), "EASE")  # type: ignore[arg-type]
        assert MlflowClient().search_runs([experiment_id]) == []
