"""Credentials in URIs never reach params, error messages or the command line's output."""

import socket
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import trained_copy
from mlflow_recsys.cli import cli
from mlflow_recsys.tracking import TrainConfig, run_train
from mlflow_recsys.tracking._context import log_params_once
from mlflow_recsys.tracking._redact import redact

METRICS = ("ndcg@100",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:secret@127.0.0.1:5000/c.zip", "http://***@127.0.0.1:5000/c.zip"),
        ("https://alice:pa55@mlflow.example.com", "https://***@mlflow.example.com"),
        ("postgresql+psycopg2://u:p@h:5432/db", "postgresql+psycopg2://***@h:5432/db"),
        # A user name alone can be the secret (a token used as the user).
        ("https://ghp_abc123@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
        # An unencoded "@" in the password: everything up to the host goes.
        ("mysql://root:p@ss@db/x", "mysql://***@db/x"),
        ("s3://AKIAXXX:wJalr%2Fkey@bucket/path", "s3://***@bucket/path"),
        # A URL that went through pathlib.Path keeps one slash, and its password.
        (
            "File not found: https:/u:hunter2@example.com/clicks.csv",
            "File not found: https:/***@example.com/clicks.csv",
        ),
        (
            "https://b.s3.amazonaws.com/c.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F2024%2Fs3"
            "&X-Amz-Date=20240101T000000Z&X-Amz-Signature=0a1b2c&X-Amz-Security-Token=FQoG",
            "https://b.s3.amazonaws.com/c.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
            "&X-Amz-Date=20240101T000000Z&X-Amz-Signature=***&X-Amz-Security-Token=***",
        ),
        (
            "https://acct.blob.core.windows.net/c/x.zip?sv=2022&sig=abc%3D&se=2030",
            "https://acct.blob.core.windows.net/c/x.zip?sv=2022&sig=***&se=2030",
        ),
        (
            "https://api.example.com/x?access_token=t0k&page=2#top",
            "https://api.example.com/x?access_token=***&page=2#top",
        ),
        (
            "could not download 'http://u:hunter2@10.0.0.1/c.zip' (connection refused); retry later",
            "could not download 'http://***@10.0.0.1/c.zip' (connection refused); retry later",
        ),
        ("host=db port=5432 password=hunter2 user=me", "host=db port=5432 password=*** user=me"),
        (
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=ab+c==;",
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=***;",
        ),
        ("DATABRICKS_TOKEN is dapi0123456789abcdef0123456789abcdef-2", "DATABRICKS_TOKEN is dapi***"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "Authorization: Bearer ***"),
    ],
)
def test_redact_masks_credentials(text, expected):
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "metrics: expected keys of the form 'name@k' (e.g. 'ndcg@100'), found ['ndcg100']",
        "runs:/0123abcd/checkpoint.zip",
        "/home/me@work/checkpoints/ml-100k.zip",
        "sqlite:////tmp/a@b/mlruns.db",
        'http://127.0.0.1:5000/#/compare-runs?runs=["a1","b2"]&experiments=["3"]',
        "mail me at alice@example.com",
        "Bearer tokens are described in RFC 6750",
    ],
)
def test_redact_leaves_text_without_credentials_unchanged(text):
    assert redact(text) == text


def test_redact_refuses_a_non_string():
    with pytest.raises(TypeError, match="text: expected a str, found bytes"):
        redact(b"http://u:p@h")


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory):
    with trained_copy(trained_store, tmp_path_factory.mktemp("secrets"), "secrets") as trained:
        yield trained


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")


@pytest.fixture
def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_count(experiment_id):
    return len(MlflowClient().search_runs([experiment_id]))


def test_a_checkpoint_url_with_a_password_is_redacted_in_the_error(store, closed_port):
    before = run_count(store["experiment_id"])
    url = f"http://user:secret@127.0.0.1:{closed_port}/c.zip"
    with pytest.raises(FileNotFoundError) as missing:
        run_train(url, TrainConfig("Popularity", metrics=METRICS), log_model=False)
    message = str(missing.value)
    assert "secret" not in message and "user" not in message
    assert message.startswith(f"checkpoint: could not download 'http://***@127.0.0.1:{closed_port}/c.zip'")
    assert run_count(store["experiment_id"]) == before


def test_checkpoint_params_keep_local_paths_and_runs_uris(store, tmp_path):
    folder = tmp_path / "me@work"  # an "@" in a plain path is no credential
    local = Path(mlflow.artifacts.download_artifacts(store["checkpoint"], dst_path=str(folder)))
    by_path = run_train(str(local), TrainConfig("Popularity", metrics=METRICS), log_model=False)
    by_uri = run_train(store["checkpoint"], TrainConfig("Popularity", metrics=METRICS), log_model=False)
    client = MlflowClient()
    assert client.get_run(by_path).data.params["checkpoint"] == str(local)
    assert client.get_run(by_uri).data.params["checkpoint"] == store["checkpoint"]
    assert client.get_run(by_uri).info.status == "FINISHED"
    assert client.get_run(by_path).data.metrics["ndcg_at_100"] == client.get_run(by_uri).data.metrics["ndcg_at_100"]


def test_params_are_logged_with_credentials_redacted_and_match_their_unredacted_form(store):
    with mlflow.start_run() as run:
        # `mlflow run` logs its -P values before our code can redact them; ours must not conflict with them.
        mlflow.log_param("checkpoint", "https://u:pw@host/c.zip")
        log_params_once(
            {
                "checkpoint": "https://u:pw@host/c.zip",
                "tracking": "postgresql://me:pw@db/mlflow",
                "source": "https://host/x?sig=abc&v=1",
            }
        )
    params = MlflowClient().get_run(run.info.run_id).data.params
    assert params["tracking"] == "postgresql://***@db/mlflow" and params["source"] == "https://host/x?sig=***&v=1"
    assert params["checkpoint"] == "https://u:pw@host/c.zip"  # MLflow's own, left as it is


def test_cli_never_prints_the_password(store, closed_port, tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "train",
            "--checkpoint",
            f"http://user:secret@127.0.0.1:{closed_port}/c.zip",
            "--model",
            "Popularity",
            "--metrics",
            "ndcg@100",
        ],
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "secret" not in res.output
    assert "FileNotFoundError: checkpoint: could not download 'http://***@127.0.0.1" in res.output
    res = runner.invoke(cli, ["split", "--dataset", "https://u:hunter2@example.com/clicks.csv"])
    assert res.exit_code == 1 and "hunter2" not in res.output and "***@example.com/clicks.csv" in res.output
    # An unreachable tracking server whose URI holds a password: MLflow's own error, one redacted line.
    store_uri = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"http://admin:topsecret@127.0.0.1:{closed_port}")
    try:
        res = runner.invoke(
            cli,
            ["train", "--checkpoint", str(tmp_path / "c.zip"), "--model", "Popularity"],
            env={"MLFLOW_RUN_ID": "0" * 32, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"},
        )
    finally:
        mlflow.set_tracking_uri(store_uri)
    assert res.exit_code == 1 and "topsecret" not in res.output and "Traceback" not in res.output
    assert f"http://***@127.0.0.1:{closed_port}" in res.output


def test_a_registered_models_alias_uri_is_no_credential():
    from mlflow_recsys.tracking._redact import redact

    for uri in ("models:/recsys@champion", "models:/my-model@previous-champion", "MODELS:/x@y"):
        assert redact(f"--incumbent {uri} failed") == f"--incumbent {uri} failed"
    assert redact("https://user:pw@models.example.com/x") == "https://***@models.example.com/x"
