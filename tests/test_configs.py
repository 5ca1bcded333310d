"""SplitConfig and TrainConfig (issue 16, point 1): checked once, canonical, and what the steps log."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import math
import pickle
import re
import warnings
import zipfile
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import sqlite_store
from mlflow_recsys import _validation as validation
from mlflow_recsys.cli import cli
from mlflow_recsys.data import SplitConfig, build_recsys_checkpoint
from mlflow_recsys.models import MODELS, EASEConfig, TrainConfig
from mlflow_recsys.settings_schema import mlproject_parameters, settings_of
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import RunSelectionError, compare_runs, run_split, run_train
from mlflow_recsys.tracking._limits import MAX_PARAM_LENGTH, MAX_RUN_NAME_LENGTH, text_digest


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
    """build_recsys_checkpoint's keywords default to the declared settings; the split command's options give the
    declared defaults (min_rating says "auto": 4, or none for a log without ratings); the MLproject's split entry
    point declares each setting with a fixed default as the schema does."""
    from mlflow_recsys.cli import cli

    split = cli.commands["split"]

    declared = settings_of(SplitConfig)
    signature = inspect.signature(build_recsys_checkpoint).parameters
    assert {name: signature[name].default for name in declared} == {name: d for name, (d, _) in declared.items()}
    given = split.make_context("split", []).params
    assert given["min_rating"] == "auto"
    assert SplitConfig(**{n: given[n] for n in declared if n != "min_rating"}) == SplitConfig()
    project = yaml.safe_load((Path(__file__).parents[1] / "MLproject").read_text())["entry_points"]["split"]
    fixed = ["split_mode", "seed", "eval_draws", "min_user_interactions", "min_item_interactions"]
    assert project["parameters"] == {
        "dataset": {"type": "string", "default": "movielens-100k"},
        **mlproject_parameters(SplitConfig, fixed),
    }
    for name in fixed:
        assert f"--{name.replace('_', '-')} {{{name}}}" in project["command"], name


@pytest.mark.parametrize(
    "given, message",
    [
        ({"split_mode": "random"}, "split_mode: expected one of ('user_split', 'leave_one_out', 'time_split')"),
        ({"seed": -1}, "seed: expected an integer >= 0, found -1"),
        ({"seed": 1.5}, "seed: expected an integer >= 0, found 1.5"),
        ({"eval_draws": 0}, "eval_draws: expected an integer in [1, 100], found 0"),
        ({"split_mode": "leave_one_out", "eval_draws": 2}, "eval_draws: expected 1 for split_mode='leave_one_out'"),
        ({"split_mode": "time_split", "eval_holdout_frac": 0.3}, "eval_holdout_frac: does not apply to split_mode="),
        ({"split_mode": "leave_one_out", "test_frac": 0.3}, "test_frac: does not apply to split_mode="),
        ({"test_frac": 0.6, "val_frac": 0.5}, "test_frac + val_frac: expected a sum below 1"),
        ({"eval_holdout_frac": 1.0}, "eval_holdout_frac: expected a number strictly between 0 and 1, found 1.0"),
        ({"min_rating": float("nan")}, "min_rating: expected a finite number, found nan"),
        ({"min_rating": True}, "min_rating: expected a finite number, found True"),
        ({"min_rating": 10**400}, "min_rating: expected a finite number, found 1000"),
        ({"min_user_interactions": 0}, "min_user_interactions: expected an integer in [1, 2,147,483,647], found 0"),
        ({"min_user_interactions": 2**64}, "min_user_interactions: expected an integer in [1, 2,147,483,647], found 1"),
        ({"min_item_interactions": "2"}, "min_item_interactions: expected an integer in [1, 2,147,483,647], found '2'"),
        # No test rows means nothing to evaluate; no validation rows is a split without early stopping.
        ({"test_frac": 0}, "test_frac: expected a number strictly between 0 and 1, found 0"),
        ({"split_mode": "time_split", "test_frac": 0.0}, "test_frac: expected a number strictly between 0 and 1"),
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
    from mlflow_recsys.cli import cli

    train = cli.commands["train"]

    stated = {}
    for option in train.params:
        found = re.search(r"\(([^()]+)\)$", option.help or "")
        for use in found.group(1).split("; ") if found else ():  # "(EASE, default cpu; ELSA, default cpu)"
            if said := re.fullmatch(r"(\w+), default (.+)", use):
                stated[option.name, said.group(1)] = said.group(2)
    # l2 and device of EASE; ELSA's seed, latent_dim, batch_size, epochs, lr, weight_decay, device and
    # matmul_precision (patience has no default)
    assert len(stated) == 10
    for (name, model), text in stated.items():
        logged = TrainConfig(model).to_params()[name]
        assert logged == type(logged)(text), name


@pytest.mark.parametrize(
    "args, message",
    [
        (("KNN",), "model: expected one of ('EASE', 'ELSA', 'Popularity'), found 'KNN'"),
        (("EASE", {"epochs": 5}), "epochs: not a hyper-parameter of EASE (it takes: l2, device); found epochs=5"),
        (("Popularity", {"seed": 0}), "seed: not a hyper-parameter of Popularity (it takes: none); found seed=0"),
        (("EASE", [("l2", 5.0)]), "hyperparameters: expected a mapping of hyper-parameter names to values, found"),
        (("EASE", {"l2": -1.0}), "l2: expected a number in [1e-06, 1e+12], found -1.0"),
        (("ELSA", {"epochs": 0}), "epochs: expected an integer in [1, 100,000], found 0"),
        (("ELSA", {"epochs": 10**20}), "epochs: expected an integer in [1, 100,000], found 100000000000000000000"),
        (("ELSA", {"latent_dim": 10**20}), "latent_dim: expected an integer in [1, 65,536], found 1000"),
        (("ELSA", {"batch_size": 2**24 + 1}), "batch_size: expected an integer in [1, 16,777,216], found 16777217"),
        (("ELSA", {"patience": 10**6}), "patience: expected an integer in [1, 100,000], found 1000000"),
        (("ELSA", {"device": "meta"}), "device"),
        (("EASE", {}, ("ndcg@x",)), "metrics: "),
        (("EASE", {}, ()), "metrics: "),
        (("EASE", {}, 3), "metrics: "),
        (("EASE", {}, ("ndcg@10", "ndcg@10")), "metrics: expected distinct keys, found duplicates"),
    ],
)
def test_each_train_setting_is_refused_with_its_name(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainConfig(*args)


def test_train_config_is_read_only_canonical_and_survives_pickling():
    config = TrainConfig("ELSA", {"seed": np.int64(3), "lr": 1}, metrics="ndcg@10")
    # Whole and in the config's types: a default left out or spelled out makes the same config.
    assert set(config.hyperparameters) == set(MODELS["ELSA"].hyperparameters)
    assert (config.hyperparameters["seed"], config.hyperparameters["lr"]) == (3, 1.0)
    assert type(config.hyperparameters["seed"]) is int
    assert TrainConfig("ELSA") == TrainConfig("ELSA", {"latent_dim": 24, "patience": None})
    assert dict(TrainConfig("EASE").hyperparameters) == {"l2": 500.0, "device": "cpu"}
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
        "device": "cpu",
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


# -- what the break test of session 7 found ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: validation.number(10**400, "x"), "x: expected a finite number, found 1000"),
        (lambda: SplitConfig(test_frac=10**400), "test_frac: expected a number strictly between 0 and 1, found 1000"),
        (lambda: TrainConfig("EASE", {"l2": 10**400}), "l2: expected a number in [1e-06, 1e+12], found 1000"),
        (lambda: SplitConfig(seed=2**63), f"seed: expected an integer <= {2**63 - 1:,} (2**63 - 1), found {2**63}"),
        (lambda: TrainConfig("ELSA", {"seed": 2**70}), "seed: expected an integer <= 9,223,372,036,854,775,807"),
        (lambda: ComparisonSettings(random_state=10**23), "random_state: expected an integer <= 9,223,"),
        (
            lambda: TrainConfig("Popularity", metrics=["ndcg@1000000000"]),
            "metrics: the cutoff of 'ndcg@1000000000': expected",
        ),
        (lambda: SplitConfig(eval_draws=10**9), "eval_draws: expected an integer in [1, 100], found 1000000000"),
        (lambda: TrainConfig("EASE", metrics=None), "metrics: expected a metric key or a list of keys, found NoneType"),
        (lambda: TrainConfig("EASE", metrics=b"ndcg@10"), "metrics: expected a metric key or a list"),
        (lambda: TrainConfig("EASE", metrics={"ndcg@10", "recall@20"}), "metrics: expected a metric key or a list"),
        (
            lambda: ComparisonSettings(metrics={"ndcg@10"}),
            "metrics: expected a metric key or a list of keys (in order)",
        ),
        (lambda: ComparisonSettings(metrics=["ndcg@10,recall@20"]), "metrics: expected keys without commas"),
        (lambda: ComparisonSettings(metrics=["ndcg@10\n"]), "metrics: expected keys without commas"),
        (lambda: ComparisonSettings(correction=np.array(["holm", "x"])), "correction: expected one of"),
        (lambda: validation.one_of(True, "x", (1, 2)), "x: expected one of (1, 2), found True"),
    ],
)
def test_out_of_range_and_odd_values_are_refused_with_their_name(make, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        make()


def test_the_largest_seed_is_taken_and_values_come_out_in_plain_python_types():
    assert SplitConfig(seed=2**63 - 1).seed == 2**63 - 1
    assert ComparisonSettings(random_state=2**63 - 1, representative_seed=np.int64(1)).representative_seed == "1"
    zero = validation.number(-0.0, "x")
    assert zero == 0.0 and math.copysign(1.0, zero) == 1.0
    assert SplitConfig(val_frac=-0.0).to_params() == SplitConfig(val_frac=0.0).to_params()
    assert str(SplitConfig(min_rating=-0.0).min_rating) == "0.0"
    assert type(SplitConfig(split_mode=np.str_("time_split")).split_mode) is str
    assert type(TrainConfig(np.str_("EASE")).model) is str


def test_a_subclass_keeps_its_own_fields_through_pickling_and_copying():
    @dataclasses.dataclass(frozen=True)
    class Tagged(TrainConfig):
        note: str = ""

    globals()["Tagged"] = Tagged  # pickle finds a class by its module-level name
    Tagged.__qualname__ = "Tagged"
    config = Tagged("ELSA", {"epochs": 1}, note="x")
    for copied in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config), copy.copy(config)):
        assert type(copied) is Tagged and copied == config and copied.note == "x"


def test_replace_may_change_the_split_mode():
    config = SplitConfig(seed=3).replace(split_mode="leave_one_out")
    assert (config.split_mode, config.seed, config.test_frac) == ("leave_one_out", 3, None)
    assert SplitConfig(split_mode="time_split").replace(split_mode="user_split") == SplitConfig()
    assert SplitConfig(test_frac=0.3).replace(seed=1).test_frac == 0.3


def test_replace_may_change_the_model_which_then_takes_its_own_defaults():
    elsa = TrainConfig("ELSA", {"epochs": 3}, metrics="ndcg@10")
    assert elsa.replace(model="EASE") == TrainConfig("EASE", metrics="ndcg@10")
    assert elsa.replace(model="EASE", hyperparameters={"l2": 50.0}).hyperparameters == {"l2": 50.0, "device": "cpu"}
    assert elsa.replace(metrics="recall@20").hyperparameters["epochs"] == 3
    assert elsa.replace(model="ELSA").hyperparameters["epochs"] == 3  # the same model keeps what it was given
    with pytest.raises(ValueError, match=r"^l2: not a hyper-parameter of ELSA"):
        elsa.replace(hyperparameters={"l2": 5.0})


def test_a_long_foreign_hyper_parameter_is_named_in_a_short_message():
    with pytest.raises(ValueError) as info:
        TrainConfig("EASE", {"x" * 10_000: "y" * 10_000})
    assert len(str(info.value)) < 500 and "not a hyper-parameter of EASE" in str(info.value)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, log):
    root = tmp_path_factory.mktemp("configs-store")
    path = root / ("n" * 200 + ".csv")
    log.to_csv(path, index=False)
    with sqlite_store(root) as experiment_id:
        split = run_split(str(path), SplitConfig(min_user_interactions=3))
        yield {"root": root, "csv": path, "split": split, "experiment_id": experiment_id}


def test_bad_step_arguments_are_refused_before_any_run(small_store):
    checkpoint = f"runs:/{small_store['split']}/checkpoint.zip"
    before = len(MlflowClient().search_runs([small_store["experiment_id"]]))
    with pytest.raises(ValueError, match=re.escape("checkpoint: expected a checkpoint zip path or an artifact URI")):
        run_train(5, TrainConfig("Popularity"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("log_model: expected True or False, found 'no'")):
        run_train(checkpoint, TrainConfig("Popularity"), log_model="no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape("data_dir: expected a folder path or None, found 5")):
        run_split("movielens-100k", data_dir=5)  # type: ignore[arg-type]
    with pytest.raises(RunSelectionError, match=re.escape("run_ids: expected a list of run ids")):
        compare_runs(run_ids="a,b")  # type: ignore[arg-type]
    assert len(MlflowClient().search_runs([small_store["experiment_id"]])) == before


def test_long_params_and_names_are_kept_within_mlflows_limits(small_store, tmp_path, log):
    split_run = MlflowClient().get_run(small_store["split"])
    assert len(split_run.info.run_name) <= MAX_RUN_NAME_LENGTH
    keys = [f"ndcg@{k}" for k in range(1, 1200)]
    joined = ",".join(keys)
    assert len(joined) > MAX_PARAM_LENGTH
    train = run_train(
        f"runs:/{small_store['split']}/checkpoint.zip", TrainConfig("Popularity", metrics=keys), log_model=False
    )
    logged = MlflowClient().get_run(train).data.params["metrics"]
    assert (
        logged == f"{len(joined):,} characters, sha256 {text_digest(joined, 16)}; the whole value is in evaluation.json"
    )
    column = "c" * 7000
    path = tmp_path / "long.csv"
    log.rename(columns={"user": column}).to_csv(path, index=False)
    split = run_split(str(path), SplitConfig(min_user_interactions=3), columns={"user": column})
    params = MlflowClient().get_run(split).data.params
    assert params["columns"].endswith("the whole value is in manifest.json") and len(params["columns"]) < 200
    frame = run_split(log, SplitConfig(min_user_interactions=3))
    digest = MlflowClient().get_run(frame).data.params["dataset"]
    assert re.fullmatch("DataFrame, interactions sha256 [0-9a-f]{64}", digest)


def test_the_report_names_the_split_run_the_models_were_trained_on(small_store, log):
    checkpoint = f"runs:/{small_store['split']}/checkpoint.zip"
    ids = [run_train(checkpoint, TrainConfig(m, metrics="ndcg@10"), log_model=False) for m in ("EASE", "Popularity")]
    # The same rows split again, later, under another name: the same digest, another dataset description.
    later = run_split(log.rename(columns={"user": "u"}), SplitConfig(min_user_interactions=3), columns={"user": "u"})
    client = MlflowClient()
    assert (
        client.get_run(later).data.tags["recsys.split_digest"]
        == client.get_run(ids[0]).data.tags["recsys.split_digest"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(n_resamples=99))
    provenance = mlflow.artifacts.load_dict(f"runs:/{outcome.run_id}/provenance.json")
    assert provenance["split"]["run_id"] == small_store["split"]


def test_compare_refuses_an_option_of_commas_alone(small_store):
    res = CliRunner().invoke(cli, ["compare", "a", "b", "--metrics", ","])
    assert res.exit_code == 1 and "metrics: expected at least one metric key, found none" in res.output


@pytest.mark.filterwarnings("ignore::UserWarning")  # 99 resamples on a small log: the comparison is not the point
def test_an_empty_option_is_an_option_left_out_and_huge_values_are_refused_before_a_run(small_store, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    checkpoint = f"runs:/{small_store['split']}/checkpoint.zip"
    client = MlflowClient()
    before = len(client.search_runs([small_store["experiment_id"]]))
    huge = ["train", "--checkpoint", checkpoint, "--model", "ELSA", "--latent-dim", "99999999999999999999"]
    res = CliRunner().invoke(cli, huge)
    assert res.exit_code == 1 and "latent_dim: expected an integer in [1, 65,536]" in res.output, res.output
    assert len(client.search_runs([small_store["experiment_id"]])) == before
    res = CliRunner().invoke(cli, ["train", "--checkpoint", checkpoint, "--model", "EASE", "--l2", "1e400"])
    assert res.exit_code == 1 and "l2: expected a number in [1e-06, 1e+12], found '1e400'" in res.output, res.output
    # `--device ''` and `--l2 ''` are the options left out: EASE trains with l2=500 on its default device.
    ids = []
    for model in ("EASE", "Popularity"):
        left_out = ["--device", ""] + (["--l2", ""] if model == "EASE" else [])
        res = CliRunner().invoke(cli, ["train", "--checkpoint", checkpoint, "--model", model, *left_out])
        assert res.exit_code == 0, res.output
        ids.append(re.search(r"train run ([0-9a-f]{32})", res.output).group(1))
    assert client.get_run(ids[0]).data.params["device"] == "cpu" and client.get_run(ids[0]).data.params["l2"] == "500.0"
    # `--min-rating ''` is the default (auto: 4 for a log with ratings), not "keep every row".
    res = CliRunner().invoke(cli, ["split", "--dataset", str(small_store["csv"]), "--min-rating", ""])
    split_id = re.search(r"split run ([0-9a-f]{32})", res.output).group(1)
    assert client.get_run(split_id).data.params["min_rating"] == "4.0"
    res = CliRunner().invoke(cli, ["compare", *ids, "--model-tag", "", "--n-resamples", "99", "--metrics", "ndcg@100"])
    assert res.exit_code == 0, res.output
    comparison = client.search_runs(
        [small_store["experiment_id"]], filter_string="tags.`recsys.role` = 'comparison'", order_by=["start_time DESC"]
    )[0]
    assert comparison.data.params["model_tag"] == "recsys.model"


def test_a_column_name_that_reads_like_a_secret_is_masked_in_params_and_whole_in_the_manifest(small_store, log):
    split = run_split(log.rename(columns={"user": "api_key=abc"}), columns={"user": "api_key=abc"})
    assert json.loads(MlflowClient().get_run(split).data.params["columns"]) == {"user": "api_key=***"}
    manifest = mlflow.artifacts.load_dict(f"runs:/{split}/manifest.json")
    assert manifest["dataset"]["columns"]["user"] == "api_key=abc"


def test_a_file_name_that_is_not_utf8_is_logged_with_its_byte_escaped(small_store, log, tmp_path):
    path = tmp_path / b"\xff.csv".decode("utf-8", "surrogateescape")  # a byte a shell may pass on
    log.to_csv(path, index=False)
    run = MlflowClient().get_run(run_split(str(path), SplitConfig(min_user_interactions=3)))
    assert run.info.status == "FINISHED" and run.data.params["dataset"].endswith("\\udcff.csv")
    assert run.data.tags["recsys.dataset"] == "\\udcff" and run.info.run_name.startswith("split \\udcff ")
