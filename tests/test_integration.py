"""The real thing end to end: `mlflow run` entry points, and a real `mlflow server` over HTTP."""

import json
import os
import subprocess
import urllib.parse
from pathlib import Path

import mlflow
import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from conftest import BIN, clean_env, new_sqlite_store
from mlflow_recsys import __version__
from mlflow_recsys.stats import ComparisonSettings, FewSeedsWarning
from mlflow_recsys.tracking import (
    ArtifactError,
    RunSelectionError,
    SplitConfig,
    TrainConfig,
    compare_runs,
    run_split,
    run_train,
)

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).resolve().parents[1]
METRICS = ("ndcg@100", "recall@20")


def test_main_entry_point_runs_the_whole_study_as_mlflow_runs(tmp_path):
    uri = new_sqlite_store(tmp_path / "mlruns.db")
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.create_experiment("study", artifact_location=(tmp_path / "artifacts").as_uri())
        proc = subprocess.run(
            [
                str(BIN / "mlflow"),
                "run",
                str(PROJECT),
                "--env-manager",
                "local",
                "--experiment-name",
                "study",
                "-P",
                "seeds=0,1",
                "-P",
                "epochs=2",
                "-P",
                "n_resamples=999",
            ],
            env=clean_env(uri),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "mlflow ui --backend-store-uri" in proc.stdout
        # The result is printed as plain text (summary.txt), not as the notes' markdown.
        result = proc.stdout[proc.stdout.index("== Result") :]
        assert "Primary metric (declared in advance): ndcg@100." in result and "candidate vs baseline" in result
        assert "movielens-100k (https://" in result and "\\-" not in result and "&gt;" not in result
        runs = MlflowClient().search_runs([mlflow.get_experiment_by_name("study").experiment_id])
        roles = sorted((r.data.tags.get("recsys.role"), r.data.tags.get("recsys.model", "")) for r in runs)
        assert roles == [
            ("comparison", ""),
            ("main", ""),
            ("split", ""),
            ("train", "EASE"),
            ("train", "ELSA"),
            ("train", "ELSA"),
        ]
        assert all(r.info.status == "FINISHED" for r in runs)
        # Each training run holds only the params its model uses, though `mlflow run` logged them.
        trained = {
            r.data.tags["recsys.model"]: r.data.params for r in runs if r.data.tags.get("recsys.role") == "train"
        }
        assert "l2" in trained["EASE"] and not {"epochs", "seed", "lr", "latent_dim"} & set(trained["EASE"])
        assert {"seed", "epochs", "lr", "latent_dim"} <= set(trained["ELSA"]) and "l2" not in trained["ELSA"]
        assert {r.data.tags.get("recsys.package_version") for r in runs} == {__version__}
        # The study logged its primary metric before training, so the comparison may say it was declared.
        (comparison,) = [r for r in runs if r.data.tags.get("recsys.role") == "comparison"]
        note = comparison.data.tags["mlflow.note.content"]
        assert "Primary metric (declared in advance): **ndcg@100**." in note
        # The primary metric is a family of its own: one hypothesis (ELSA vs EASE), unadjusted.
        c = comparison.data.metrics
        assert c["ELSA.vs.EASE.ndcg_at_100.adjusted_p_value"] == c["ELSA.vs.EASE.ndcg_at_100.p_value"]
        assert c["ELSA.vs.EASE.recall_at_20.adjusted_p_value"] >= c["ELSA.vs.EASE.recall_at_20.p_value"]
    finally:
        mlflow.set_tracking_uri(None)


def train_small_study(checkpoint: str) -> dict[str, str]:
    """EASE, Popularity and ELSA under seeds 0 and 1 (2 epochs) on the checkpoint; run ids by name."""
    runs = {
        "EASE": run_train(checkpoint, TrainConfig("EASE", metrics=METRICS), log_model=False),
        "Popularity": run_train(checkpoint, TrainConfig("Popularity", metrics=METRICS), log_model=False),
    }
    for seed in (0, 1):
        fast = {"seed": seed, "latent_dim": 8, "batch_size": 128, "epochs": 2}
        runs[f"ELSA{seed}"] = run_train(checkpoint, TrainConfig("ELSA", fast, metrics=METRICS), log_model=False)
    return runs


@pytest.fixture(scope="module")
def served(mlflow_server):
    """A split, EASE, Popularity and two ELSA seeds, logged to the live server."""
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_server)
    experiment_id = mlflow.set_experiment("over-http").experiment_id
    split = run_split("movielens-100k", SplitConfig(seed=3))
    runs = train_small_study(f"runs:/{split}/checkpoint.zip")
    yield {"url": mlflow_server, "experiment_id": experiment_id, **runs}
    mlflow.set_tracking_uri(previous)


def test_compare_by_ids_over_http_logs_to_the_server(served):
    outcome = compare_runs(
        run_ids=[served["Popularity"], served["EASE"]],
        settings=ComparisonSettings(reference="Popularity", n_resamples=999),
    )
    row = outcome.report.get("ndcg@100", "EASE")
    assert row.difference > 0 and row.direction == "better"
    run = MlflowClient().get_run(outcome.run_id)
    assert run.info.status == "FINISHED" and run.info.artifact_uri.startswith("mlflow-artifacts:")
    assert {a.path for a in MlflowClient().list_artifacts(outcome.run_id)} >= {"report.csv", "report.html"}


def test_compare_by_a_pasted_ui_url_percent_encoded(served):
    runs = json.dumps([served["EASE"], served["ELSA0"], served["ELSA1"]])
    url = f"{served['url']}/#/compare-runs?runs={runs}&experiments={json.dumps([served['experiment_id']])}"
    pasted = urllib.parse.quote(urllib.parse.quote(url, safe=""), safe="")
    with pytest.warns(FewSeedsWarning):  # two seeds only
        outcome = compare_runs(compare_url=pasted, settings=ComparisonSettings(reference="EASE", n_resamples=999))
    assert set(outcome.source_runs) == {"EASE", "ELSA"} and set(outcome.source_runs["ELSA"]) == {"0", "1"}
    assert not outcome.seed_frame().empty


def test_compare_by_experiment_and_filter_over_http(served):
    outcome = compare_runs(
        experiment="over-http",
        filter_string="tags.`recsys.seed` = 'none'",
        settings=ComparisonSettings(reference="Popularity", n_resamples=999),
    )
    assert set(outcome.source_runs) == {"EASE", "Popularity"}


def test_a_running_run_is_refused_over_http(served):
    client = MlflowClient()
    stuck = client.create_run(served["experiment_id"], tags={"recsys.role": "train", "recsys.model": "X"})
    try:
        with pytest.raises(RunSelectionError, match=rf"{stuck.info.run_id} \(RUNNING\)"):
            compare_runs(run_ids=[served["EASE"], stuck.info.run_id])
    finally:
        client.set_terminated(stuck.info.run_id, "KILLED")


def test_mismatched_fingerprints_over_http_end_the_comparison_run_failed(served, tmp_path, copy_run):
    fake = copy_run(served["EASE"], tmp_path, model="Other", edit_meta=lambda m: {**m, "targets_fingerprint": "0" * 64})
    with pytest.raises(RunSelectionError, match="targets fingerprint"):
        compare_runs(run_ids=[served["EASE"], fake], settings=ComparisonSettings(reference="EASE", n_resamples=999))
    failed = MlflowClient().search_runs(
        [served["experiment_id"]], filter_string="tags.`recsys.role` = 'comparison' and attributes.status = 'FAILED'"
    )
    assert failed and "targets fingerprint" in failed[0].data.tags["recsys.error"]


def test_corrupted_artifact_over_http_is_refused_naming_the_run(served, tmp_path, copy_run):
    def poison(frame):
        frame["recall@20"] = np.inf
        return frame

    fake = copy_run(served["EASE"], tmp_path, model="Broken", edit_frame=poison)
    with pytest.raises(ArtifactError, match=rf"run {fake}.*'recall@20'"):
        compare_runs(run_ids=[served["EASE"], fake], settings=ComparisonSettings(reference="EASE", n_resamples=999))


def test_compare_entry_point_with_a_bad_selection_fails_its_run_with_the_reason(tmp_path):
    uri = new_sqlite_store(tmp_path / "mlruns.db")
    mlflow.set_tracking_uri(uri)
    try:
        experiment_id = mlflow.create_experiment("bad", artifact_location=(tmp_path / "artifacts").as_uri())
        proc = subprocess.run(
            [
                str(BIN / "mlflow"),
                "run",
                str(PROJECT),
                "--env-manager",
                "local",
                "--experiment-name",
                "bad",
                "-e",
                "compare",
                "-P",
                "experiment=no-such-experiment",
            ],
            env=clean_env(uri),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode != 0 and "no-such-experiment" in proc.stdout + proc.stderr
        (run,) = MlflowClient().search_runs([experiment_id])
        assert run.info.status == "FAILED" and run.data.tags["recsys.role"] == "comparison"
        assert "no-such-experiment" in run.data.tags["recsys.error"]
    finally:
        mlflow.set_tracking_uri(None)


def test_split_entry_point_takes_each_protocol_and_leaves_unset_fractions_unset(tmp_path):
    uri = new_sqlite_store(tmp_path / "mlruns.db")
    mlflow.set_tracking_uri(uri)
    try:
        experiment_id = mlflow.create_experiment("splits", artifact_location=(tmp_path / "artifacts").as_uri())
        for params in (["-P", "split_mode=leave_one_out"], ["-P", "split_mode=time_split", "-P", "test_frac=0.3"]):
            proc = subprocess.run(
                [
                    str(BIN / "mlflow"),
                    "run",
                    str(PROJECT),
                    "--env-manager",
                    "local",
                    "--experiment-name",
                    "splits",
                    "-e",
                    "split",
                    *params,
                ],
                env=clean_env(uri),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        manifests = {}
        for run in MlflowClient().search_runs([experiment_id]):
            manifest = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/manifest.json")
            manifests[manifest["parameters"]["split_mode"]] = manifest["parameters"]
        assert manifests["leave_one_out"]["test_frac"] is None and manifests["leave_one_out"]["val_frac"] is None
        assert manifests["time_split"]["test_frac"] == 0.3 and manifests["time_split"]["val_frac"] == 0.1
        assert manifests["time_split"]["eval_holdout_frac"] is None
    finally:
        mlflow.set_tracking_uri(None)


def mlflow_run(uri: str, experiment: str, entry_point: str, *params: str) -> subprocess.CompletedProcess:
    """``mlflow run`` of this project's ``entry_point`` with ``-P`` ``params``, in ``experiment``; it must succeed."""
    args = [a for p in params for a in ("-P", p)]
    proc = subprocess.run(
        [str(BIN / "mlflow"), "run", str(PROJECT), "--env-manager", "local", "--experiment-name", experiment]
        + ["-e", entry_point, *args],
        env=clean_env(uri),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


#: What `mlflow run` logged for a parameter left unset before (issue 27, A8): shell-quoted empty text, or a word
#: the step resolves itself.
PLACEHOLDERS = {"''", "", "none", "None", "auto"}


def test_entry_point_params_left_unset_are_logged_as_resolved_not_as_placeholders(tmp_path):
    uri = new_sqlite_store(tmp_path / "mlruns.db")
    mlflow.set_tracking_uri(uri)
    try:
        experiment_id = mlflow.create_experiment("params", artifact_location=(tmp_path / "artifacts").as_uri())
        mlflow_run(uri, "params", "split")
        mlflow_run(uri, "params", "split", "seed=7", "val_frac=0.15", "min_rating=3")
        splits = {
            r.data.params["seed"]: r
            for r in MlflowClient().search_runs([experiment_id], "tags.`recsys.role` = 'split'")
        }
        default = splits["42"].data.params
        assert not {k: v for k, v in default.items() if v in PLACEHOLDERS and k != "eval_draws"}, default
        # Each resolved once, from the split's manifest (SplitConfig's resolution), and no column names at all.
        assert (default["val_frac"], default["test_frac"], default["eval_holdout_frac"]) == ("0.1", "0.2", "0.2")
        assert default["min_rating"] == "4.0" and not {"user_col", "columns"} & set(default)
        # Given ones come through as -P options MLflow passes on: logged as typed, and used.
        given = splits["7"].data.params
        assert (given["val_frac"], given["min_rating"]) == ("0.15", "3")
        manifest = mlflow.artifacts.load_dict(f"runs:/{splits['7'].info.run_id}/manifest.json")
        assert manifest["parameters"]["val_frac"] == 0.15 and manifest["parameters"]["min_rating"] == 3.0

        checkpoint = f"runs:/{splits['42'].info.run_id}/checkpoint.zip"
        sources = [
            run_train(checkpoint, TrainConfig(m, metrics=METRICS), log_model=False) for m in ("EASE", "Popularity")
        ]
        mlflow_run(uri, "params", "compare", f"run_ids={','.join(sources)}", "n_resamples=99")
        (comparison,) = MlflowClient().search_runs([experiment_id], "tags.`recsys.role` = 'comparison'")
        params = comparison.data.params
        assert "''" not in params.values() and not {"filter", "experiment", "compare_url"} & set(params), params
        assert params["run_ids"] == ",".join(sources) and params["compared_metrics"] == ",".join(METRICS)
        assert params["metrics"] == "None"  # the comparison's own record: no metrics were asked for
    finally:
        mlflow.set_tracking_uri(None)


@pytest.mark.parametrize("output", ["head -0", "head -1", "> /dev/full", "2>&-"])
def test_a_command_ends_its_runs_whatever_becomes_of_its_output(served, output):
    """`mlflow-recsys compare ... | head -1` (the reader goes away), `> /dev/full` (every write fails) or `2>&-`
    (stderr closed): the comparison is logged and ends FINISHED. On a tracking server MLflow prints "View run ... at:
    <URL>" to stdout before it sets the status, so a failed write used to stop it there and leave the run RUNNING;
    with stderr closed, Python's sys.stderr is None and the progress bar failed the run. A reader who left chose to
    (exit 0); a full device is reported once the run has ended (exit 1)."""
    client = MlflowClient(tracking_uri=served["url"])  # earlier tests may have pointed MLflow elsewhere
    before = {r.info.run_id for r in client.search_runs([served["experiment_id"]])}
    command = [str(BIN / "mlflow-recsys"), "compare", "--run-ids", f"{served['Popularity']},{served['EASE']}",
               "--reference", "Popularity", "--n-resamples", "199"]  # fmt: skip
    with open("/dev/full", "w") as full:
        proc = subprocess.Popen(
            command,
            env={**clean_env(served["url"]), "MLFLOW_EXPERIMENT_ID": served["experiment_id"]},
            stdout=full if output == "> /dev/full" else subprocess.PIPE,
            stderr=subprocess.PIPE if output != "2>&-" else None,
            preexec_fn=(lambda: os.close(2)) if output == "2>&-" else None,  # noqa: PLW1509 - a closed stderr
        )
        if proc.stdout is not None:
            for _ in range(int(output.split()[-1]) if output.startswith("head") else 0):
                assert proc.stdout.readline()
            if output.startswith("head"):
                proc.stdout.close()  # as `head` does
        _, stderr = proc.communicate(timeout=300)
    made = [r for r in client.search_runs([served["experiment_id"]]) if r.info.run_id not in before]
    text = (stderr or b"").decode()
    assert [r.info.status for r in made] == ["FINISHED"], text[-3000:]
    assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    if output == "> /dev/full":
        assert (
            proc.returncode == 1 and "Error: OSError: [Errno 28] No space left on device (writing the standard" in text
        )
    else:
        assert proc.returncode == 0, text[-3000:]
