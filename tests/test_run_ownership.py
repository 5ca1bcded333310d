"""A run named by MLFLOW_RUN_ID is used only when it is the fresh run `mlflow run` made; each param has one writer."""

import mlflow
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import small_study, trained_copy
from mlflow_recsys.cli import cli
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import SplitConfig, TrainConfig, run_split, run_train
from mlflow_recsys.tracking._context import (
    RunOwnershipError,
    check_step_run,
    entry_point_run,
    log_params_once,
)
from mlflow_recsys.tracking._study import run_study

METRICS = ("ndcg@100", "recall@20")


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory):
    with trained_copy(trained_store, tmp_path_factory.mktemp("ownership"), "ownership") as trained:
        yield {**trained, "EASE": trained["ease"], "Popularity": trained["pop"]}


@pytest.fixture(autouse=True)
def no_inherited_run(monkeypatch):
    # The CLI sets MLFLOW_RECSYS_COMMAND for its process; monkeypatch puts both variables back afterwards.
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    yield
    assert mlflow.active_run() is None, "a refused step left a run active"


def snapshot(run_id):
    """Everything a hijack could change: status, end time, tags, params, metrics with history, artifacts."""
    client = MlflowClient()
    run = client.get_run(run_id)

    def listing(path=None):
        out = []
        for f in client.list_artifacts(run_id, path):
            out += listing(f.path) if f.is_dir else [(f.path, f.file_size)]
        return sorted(out)

    history = {k: [(m.step, m.value) for m in client.get_metric_history(run_id, k)] for k in run.data.metrics}
    return {
        "status": run.info.status,
        "end_time": run.info.end_time,
        "tags": dict(run.data.tags),
        "params": dict(run.data.params),
        "metrics": dict(run.data.metrics),
        "history": history,
        "artifacts": listing(),
    }


def run_ids(experiment_id):
    return {r.info.run_id for r in MlflowClient().search_runs([experiment_id])}


def mlproject_train_run(experiment_id, **params):
    """A run as `mlflow run -e train` leaves it before our code starts: RUNNING, its -P params logged, no role."""
    client = MlflowClient()
    run = client.create_run(experiment_id, tags={"mlflow.project.entryPoint": "train"})
    for key, value in params.items():
        client.log_param(run.info.run_id, key, value)
    return run.info.run_id


def test_train_refuses_a_finished_train_run_and_leaves_it_unchanged(store, monkeypatch):
    finished = store["Popularity"]
    before, ids_before = snapshot(finished), run_ids(store["experiment_id"])
    assert before["status"] == "FINISHED" and before["tags"]["recsys.role"] == "train"
    assert {"per_user.parquet", "evaluation.json"} <= {path for path, _ in before["artifacts"]}
    assert before["params"]["model"] == "Popularity" and before["metrics"]["ndcg_at_100"] > 0
    monkeypatch.setenv("MLFLOW_RUN_ID", finished)
    # The case: another model's results would have landed in this run under its own model param.
    with pytest.raises(RunOwnershipError) as refused:
        run_train(store["checkpoint"], TrainConfig("EASE", metrics=METRICS), log_model=False)
    message = str(refused.value)
    for part in ("MLFLOW_RUN_ID", finished, "status FINISHED", "recsys.role='train'", "unset MLFLOW_RUN_ID"):
        assert part in message
    assert snapshot(finished) == before
    assert run_ids(store["experiment_id"]) == ids_before


def test_the_refusal_comes_before_the_checkpoint_is_read(store, monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_RUN_ID", store["EASE"])
    # A missing checkpoint would be a FileNotFoundError; the run check must win, as it runs first.
    with pytest.raises(RunOwnershipError, match="status FINISHED"):
        run_train(str(tmp_path / "missing.zip"), TrainConfig("Popularity"))


def test_split_and_study_refuse_a_finished_run(store, monkeypatch):
    finished = store["EASE"]
    before, ids_before = snapshot(finished), run_ids(store["experiment_id"])
    monkeypatch.setenv("MLFLOW_RUN_ID", finished)
    with pytest.raises(RunOwnershipError, match=f"run {finished} with status FINISHED"):
        run_split("movielens-100k", SplitConfig(seed=1))
    with pytest.raises(RunOwnershipError, match=f"run {finished} with status FINISHED"):
        run_study(small_study(split_seed=1), echo=lambda _: None)
    assert snapshot(finished) == before
    assert run_ids(store["experiment_id"]) == ids_before


def test_a_running_run_that_already_has_a_role_is_refused(store, monkeypatch):
    client = MlflowClient()
    busy = client.create_run(store["experiment_id"], tags={"recsys.role": "split"}).info.run_id
    client.log_param(busy, "dataset", "movielens-100k")
    before, ids_before = snapshot(busy), run_ids(store["experiment_id"])
    monkeypatch.setenv("MLFLOW_RUN_ID", busy)
    with pytest.raises(RunOwnershipError) as refused:
        run_train(store["checkpoint"], TrainConfig("Popularity", metrics=METRICS), log_model=False)
    message = str(refused.value)
    assert f"run {busy} with status RUNNING, recsys.role='split'" in message and "unset MLFLOW_RUN_ID" in message
    after = snapshot(busy)
    assert after == before and after["status"] == "RUNNING"
    assert run_ids(store["experiment_id"]) == ids_before


def test_an_unknown_run_id_is_refused(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_RUN_ID", "0" * 32)
    with pytest.raises(RunOwnershipError, match=r"MLFLOW_RUN_ID: expected the id of a run .* found '0{32}'"):
        check_step_run()


def test_a_fresh_mlproject_run_is_used_and_its_cli_form_params_are_kept(store, monkeypatch):
    ids_before = run_ids(store["experiment_id"])
    # What `mlflow run -e train -P checkpoint=... -P model=Popularity` logs: the entry point's two params.
    fresh = mlproject_train_run(store["experiment_id"], checkpoint=store["checkpoint"], model="Popularity")
    monkeypatch.setenv("MLFLOW_RUN_ID", fresh)
    assert check_step_run().environment_run_id == fresh
    assert run_train(store["checkpoint"], TrainConfig("Popularity", metrics=METRICS), log_model=False) == fresh
    after = snapshot(fresh)
    assert run_ids(store["experiment_id"]) == ids_before | {fresh}
    assert after["status"] == "FINISHED"
    assert after["tags"]["recsys.role"] == "train" and after["tags"]["recsys.model"] == "Popularity"
    assert after["tags"]["mlflow.runName"] == "Popularity" and after["tags"]["recsys.seed"] == "none"
    # Only what the model uses: Popularity takes no hyper-parameter, so no seed and no l2; our metrics param is added.
    assert after["params"] == {
        "checkpoint": store["checkpoint"],
        "model": "Popularity",
        "metrics": "ndcg@100,recall@20",
    }
    assert {"per_user.parquet", "evaluation.json"} <= {path for path, _ in after["artifacts"]}
    reference = MlflowClient().get_run(store["Popularity"]).data.metrics
    assert after["metrics"]["ndcg_at_100"] == pytest.approx(reference["ndcg_at_100"])


def test_log_params_once_leaves_what_mlflow_run_logged_and_adds_the_rest(store):
    with mlflow.start_run() as run:
        # As `mlflow run` logs them: the command-line text, shell-quoted where needed.
        for key, value in {
            "l2": "500",
            "min_rating": "4",
            "seeds": "'0, 1'",
            "metrics": "''",
            "val_frac": "none",
            "lr": "0.01",
            "split_mode": "user_split",
        }.items():
            mlflow.log_param(key, value)
        log_params_once(
            {
                "l2": 500.0,
                "min_rating": 4.0,
                "seeds": "0,1",
                "metrics": "ndcg@100",
                "val_frac": 0.1,
                "lr": 0.01,
                "split_mode": "user_split",
                "dtype": "float32",
                "patience": None,
            }
        )
    params = MlflowClient().get_run(run.info.run_id).data.params
    assert params == {
        "l2": "500",
        "min_rating": "4",
        "seeds": "'0, 1'",
        "metrics": "''",
        "val_frac": "none",
        "lr": "0.01",
        "split_mode": "user_split",
        "dtype": "float32",
        "patience": "None",
    }


def test_entry_point_run_logs_params_to_a_new_run_without_the_variable(store):
    with entry_point_run("fresh", params={"a": 1, "b": None}) as run:
        pass
    got = MlflowClient().get_run(run.info.run_id)
    assert got.info.status == "FINISHED" and got.data.params == {"a": "1", "b": "None"}
    assert got.data.tags["mlflow.runName"] == "fresh"


def test_cli_train_refuses_a_finished_run_with_exit_code_and_message(store):
    finished = store["Popularity"]
    before = snapshot(finished)
    res = CliRunner().invoke(
        cli,
        ["train", "--checkpoint", store["checkpoint"], "--model", "EASE", "--metrics", "ndcg@100"],
        env={"MLFLOW_RUN_ID": finished},
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "RunOwnershipError: MLFLOW_RUN_ID" in res.output and finished in res.output
    assert "status FINISHED" in res.output and "unset MLFLOW_RUN_ID" in res.output
    assert snapshot(finished) == before


def test_compare_refuses_a_train_run_named_by_mlflow_run_id(store, monkeypatch):
    # comparison.py runs the same check (context.check_step_run) before any write.
    from mlflow_recsys.tracking import compare_runs

    train = store["EASE"]
    before, ids_before = snapshot(train), run_ids(store["experiment_id"])
    monkeypatch.setenv("MLFLOW_RUN_ID", train)
    with pytest.raises(RunOwnershipError, match=rf"run {train} with status FINISHED, recsys.role='train'"):
        compare_runs(
            run_ids=[store["EASE"], store["Popularity"]],
            settings=ComparisonSettings(reference="Popularity", n_resamples=99),
        )
    res = CliRunner().invoke(
        cli, ["compare", store["EASE"], store["Popularity"], "--n-resamples", "99"], env={"MLFLOW_RUN_ID": train}
    )
    assert res.exit_code == 1 and "MLFLOW_RUN_ID" in res.output and "unset MLFLOW_RUN_ID" in res.output
    after = snapshot(train)
    assert after == before and after["tags"]["recsys.role"] == "train" and "recsys.error" not in after["tags"]
    assert run_ids(store["experiment_id"]) == ids_before


def test_steps_inside_a_callers_active_run_nest_under_it(store, monkeypatch):
    """Issue 27 B4: split, train and compare inside `with mlflow.start_run():` each make a child run."""
    from mlflow_recsys.tracking import compare_runs

    before_ease = snapshot(store["EASE"])
    with mlflow.start_run(run_name="caller") as outer:
        # An MLFLOW_RUN_ID set afterwards (another run's) is not read while the caller's run is active.
        monkeypatch.setenv("MLFLOW_RUN_ID", store["EASE"])
        split_id = run_split("movielens-100k", SplitConfig(seed=7))
        train_id = run_train(
            f"runs:/{split_id}/checkpoint.zip", TrainConfig("Popularity", metrics=METRICS), log_model=False
        )
        outcome = compare_runs(
            run_ids=[store["EASE"], store["Popularity"]],
            settings=ComparisonSettings(reference="Popularity", metrics=list(METRICS), n_resamples=99),
        )
        assert mlflow.active_run().info.run_id == outer.info.run_id  # the caller's run is active again
    client = MlflowClient()
    roles = {}
    for child in (split_id, train_id, outcome.run_id):
        run = client.get_run(child)
        assert run.data.tags["mlflow.parentRunId"] == outer.info.run_id
        assert run.info.status == "FINISHED" and run.info.experiment_id == outer.info.experiment_id
        roles[run.data.tags["recsys.role"]] = child
    assert set(roles) == {"split", "train", "comparison"}
    caller = snapshot(outer.info.run_id)
    assert caller["status"] == "FINISHED" and caller["params"] == {} and caller["metrics"] == {}
    assert "recsys.role" not in caller["tags"] and caller["artifacts"] == []
    assert snapshot(store["EASE"]) == before_ease


def test_steps_refuse_a_callers_run_that_ended_before_any_work(store, tmp_path):
    """A caller's active run terminated elsewhere: every step refuses by name before it builds or reads anything."""
    from mlflow_recsys.tracking import compare_runs

    with mlflow.start_run() as outer:
        MlflowClient().set_terminated(outer.info.run_id, "KILLED")
        ids_before = run_ids(store["experiment_id"])
        expected = rf"the active run: expected a RUNNING run .* found run {outer.info.run_id} with status KILLED"
        with pytest.raises(RunOwnershipError, match=expected):
            run_split("movielens-100k", SplitConfig(seed=8))
        with pytest.raises(RunOwnershipError, match=expected):  # before the missing checkpoint is looked for
            run_train(str(tmp_path / "missing.zip"), TrainConfig("Popularity"))
        with pytest.raises(RunOwnershipError, match=expected):
            run_study(small_study(split_seed=8), echo=lambda _: None)
        with pytest.raises(RunOwnershipError, match=expected):
            compare_runs(run_ids=[store["EASE"], store["Popularity"]], settings=ComparisonSettings(n_resamples=99))
        assert run_ids(store["experiment_id"]) == ids_before
