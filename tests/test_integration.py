"""The real thing end to end: `mlflow run` entry points, and a real `mlflow server` over HTTP."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from mlflow_recsys.tracking import compare_runs, run_split, run_train

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env(tracking_uri):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(MLFLOW_TRACKING_URI=tracking_uri, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def test_main_entry_point_runs_the_whole_study_as_mlflow_runs(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.create_experiment("study", artifact_location=(tmp_path / "artifacts").as_uri())
        proc = subprocess.run(
            [str(BIN / "mlflow"), "run", str(PROJECT), "--env-manager", "local", "--experiment-name", "study",
             "-P", "seeds=0,1", "-P", "epochs=2", "-P", "n_resamples=999"],
            env=_env(uri), capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "| ndcg@100" in proc.stdout and "mlflow ui --backend-store-uri" in proc.stdout
        runs = MlflowClient().search_runs([mlflow.get_experiment_by_name("study").experiment_id])
        roles = sorted((r.data.tags.get("recsys.role"), r.data.tags.get("recsys.model", "")) for r in runs)
        assert roles == [("comparison", ""), ("main", ""), ("split", ""), ("train", "EASE"), ("train", "ELSA"),
                         ("train", "ELSA")]
        assert all(r.info.status == "FINISHED" for r in runs)
        from mlflow_recsys import __version__

        assert {r.data.tags.get("recsys.package_version") for r in runs} == {__version__}
    finally:
        mlflow.set_tracking_uri(None)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{tmp_path}/server.db", "--artifacts-destination",
         str(tmp_path / "server-artifacts")],
        env=_env(""), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"mlflow server did not start: {proc.stderr.read()[-2000:]}")
            time.sleep(0.5)
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(url)
    yield url
    mlflow.set_tracking_uri(previous)
    proc.terminate()
    proc.wait(timeout=30)


def test_train_and_compare_against_a_live_tracking_server(mlflow_server):
    mlflow.set_experiment("over-http")
    split = run_split(dataset="movielens-100k", seed=3)
    checkpoint = f"runs:/{split}/checkpoint.zip"
    metrics = ("ndcg@100", "recall@20")
    ease = run_train(checkpoint=checkpoint, model="EASE", metrics=metrics, log_model=False)
    pop = run_train(checkpoint=checkpoint, model="Popularity", metrics=metrics, log_model=False)
    outcome = compare_runs(run_ids=[pop, ease], reference="Popularity", n_resamples=999)
    row = outcome.report.get("ndcg@100", "EASE")
    assert row.difference > 0 and row.direction == "better"
    run = MlflowClient().get_run(outcome.run_id)
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")
    assert {a.path for a in MlflowClient().list_artifacts(outcome.run_id)} >= {"report.csv", "methods.md"}
