"""Shared fixtures: a real MLflow tracking server over HTTP, and a way to copy training runs."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

BIN = Path(sys.executable).parent


def clean_env(tracking_uri: str) -> dict:
    """This environment without MLflow variables, pointing at ``tracking_uri``, with the venv on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(MLFLOW_TRACKING_URI=tracking_uri, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """One `mlflow server` on 127.0.0.1 for the whole session (it takes 10 to 25 s to start)."""
    root = tmp_path_factory.mktemp("server")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{root}/server.db", "--artifacts-destination", str(root / "artifacts")],
        env=clean_env(""), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
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
    yield url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def copy_run():
    """Make a FINISHED training run whose per-user artifacts are an (optionally edited) copy of another's."""

    def make(source_run_id, folder, *, model, edit_meta=None, edit_frame=None):
        client = MlflowClient()
        source = client.get_run(source_run_id)
        folder = Path(folder) / model
        folder.mkdir(parents=True)
        for name in ("per_user.parquet", "evaluation.json"):
            mlflow.artifacts.download_artifacts(run_id=source_run_id, artifact_path=name, dst_path=str(folder))
        if edit_meta is not None:
            meta = json.loads((folder / "evaluation.json").read_text())
            (folder / "evaluation.json").write_text(json.dumps(edit_meta(meta)))
        if edit_frame is not None:
            frame = pd.read_parquet(folder / "per_user.parquet")
            edit_frame(frame).to_parquet(folder / "per_user.parquet", index=False)
        run_tags = {k: v for k, v in source.data.tags.items() if k.startswith("recsys.")}
        run = client.create_run(source.info.experiment_id, tags={**run_tags, "recsys.model": model})
        client.log_artifacts(run.info.run_id, str(folder))
        client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    return make
