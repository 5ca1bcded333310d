"""Issue 12, kind 5: a tracking server that dies, a SIGTERM, and failures while logging.

A live ``mlflow server`` on 127.0.0.1 is killed while ``mlflow-recsys compare`` computes; the command must exit
non-zero within a bounded time, and once the server is back the comparison run must be absent or FAILED.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from conftest import sqlite_store
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import SplitConfig, TrainConfig, compare_runs, run_split, run_train
from mlflow_recsys.tracking._local_server import free_port, local_tracking_server
from mlflow_recsys.tracking._server_errors import CLI_DEFAULTS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.server_faults,
    pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning"),
]

BIN = Path(sys.executable).parent
METRICS = ("ndcg@100", "recall@20", "mrr@20")
#: Models in the slow comparison: 6 models, 15 pairs x 3 metrics at B = 1,000,000 take several seconds.
MODELS = ["M0", "M1", "M2", "M3", "M4", "M5"]


def _env(uri: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return {**env, "MLFLOW_TRACKING_URI": uri, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", **extra}


def _populate(copy_run, folder: Path) -> list[str]:
    """A split, one Popularity run and copies of it under MODELS (each scaled, so no pair ties)."""
    mlflow.set_experiment("faults")  # by name: an experiment id set by an earlier test means nothing here
    split_id = run_split("movielens-100k", SplitConfig(seed=42))
    source = run_train(f"runs:/{split_id}/checkpoint.zip", TrainConfig("Popularity", metrics=METRICS), log_model=False)
    return [
        copy_run(
            source,
            folder / name,
            model=name,
            edit_frame=lambda f, s=1 - 0.02 * i: f.assign(**{m: f[m] * s for m in METRICS}),
        )
        for i, name in enumerate(MODELS)
    ]


def _start_compare(uri: str, ids: list[str], **env) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "mlflow-recsys"), "compare", *ids, "--n-resamples", "1000000"],
        env=_env(uri, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(stream, text: str, timeout: float) -> list[str]:
    """Read ``stream`` line by line until one holds ``text``; the lines read so far."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not printed within {timeout} s: {''.join(seen)[-2000:]}")


def _comparison_runs():
    experiments = [e.experiment_id for e in MlflowClient().search_experiments(view_type=3)]
    return MlflowClient().search_runs(experiments, filter_string="tags.`recsys.role` = 'comparison'", run_view_type=3)


def test_killing_the_server_mid_compare_exits_within_the_bound_and_leaves_no_results(tmp_path, copy_run):
    port = free_port()
    db = f"sqlite:///{tmp_path}/server.db"
    with local_tracking_server(db, tmp_path / "artifacts", port=port) as url:
        mlflow.set_tracking_uri(url)
        try:
            ids = _populate(copy_run, tmp_path)
            proc = _start_compare(url, ids)
            _wait_for_line(proc.stderr, "loaded the per-user artifacts", timeout=120)
        except BaseException:
            mlflow.set_tracking_uri(None)
            raise
    killed = time.monotonic()  # the with block has terminated the server
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    waited = time.monotonic() - killed
    print(f"compare exited {waited:.1f} s after the server was stopped")  # the figure the docs quote
    assert proc.returncode == 1, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "TrackingServerError" in errors[0] and "did not answer" in errors[0], err[-3000:]
    assert "Traceback" not in err and "not found" not in errors[0]
    # The comparison itself takes seconds; after it, one request fails after 0 + 2 + 4 s of backoff.
    assert waited < 120, waited
    with local_tracking_server(db, tmp_path / "artifacts", port=port) as url:
        mlflow.set_tracking_uri(url)
        try:
            (left,) = _comparison_runs()
            artifacts = MlflowClient().list_artifacts(left.info.run_id)
        finally:
            mlflow.set_tracking_uri(None)
    # The comparison run is made before the artifacts are read (so that a server refusing the write says so
    # before any work); with its server gone for good nobody can end it, so it stays as the server last saw it:
    # RUNNING, with its source runs and no result.
    assert left.info.status == "RUNNING" and left.data.tags["recsys.n_source_runs"] == str(len(ids))
    assert left.data.metrics == {} and artifacts == [] and "recsys.result" not in left.data.tags


def test_an_unreachable_server_is_reported_as_unreachable_within_the_bound(tmp_path):
    started = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "mlflow-recsys"), "compare", "a" * 32, "b" * 32],
        env=_env(f"http://user:hunter2@127.0.0.1:{free_port()}"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    print(f"unreachable server reported after {elapsed:.1f} s")
    assert proc.returncode == 1
    assert "did not answer" in proc.stderr and "was not found" not in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stderr and "Traceback" not in proc.stderr
    # Connection refused: 3 retries after 0, 2 and 4 s (+ up to 1 s of jitter each) and the start of Python.
    assert CLI_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "3" and elapsed < 45, elapsed
    split = subprocess.run(
        [str(BIN / "mlflow-recsys"), "split"],
        env=_env(f"http://127.0.0.1:{free_port()}", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert split.returncode == 1 and "TrackingServerError" in split.stderr and "did not answer" in split.stderr
    debug = subprocess.run(
        [str(BIN / "mlflow-recsys"), "--debug", "compare", "a" * 32, "b" * 32],
        env=_env(f"http://127.0.0.1:{free_port()}", MLFLOW_HTTP_REQUEST_MAX_RETRIES="0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr


@pytest.fixture
def populated_store(tmp_path, copy_run):
    with sqlite_store(tmp_path, "faults") as experiment_id:
        yield {"uri": mlflow.get_tracking_uri(), "experiment_id": experiment_id, "ids": _populate(copy_run, tmp_path)}


def test_sigterm_ends_the_comparison_run_failed_whichever_made_it(populated_store):
    client = MlflowClient()
    # What `mlflow run -e compare` makes before our command starts: a RUNNING run without a recsys.role.
    entry = client.create_run(populated_store["experiment_id"]).info.run_id
    proc = _start_compare(populated_store["uri"], populated_store["ids"], MLFLOW_RUN_ID=entry)
    try:
        _wait_for_line(proc.stderr, "loaded the per-user artifacts", timeout=120)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != 0
    run = client.get_run(entry)
    assert run.info.status == "FAILED" and "SIGTERM" in run.data.tags["recsys.error"], err[-2000:]
    assert run.data.metrics == {} and [r.info.run_id for r in _comparison_runs()] == [entry]

    # Without an entry point's run, the comparison's own run (made before any artifact is read) ends FAILED.
    proc = _start_compare(populated_store["uri"], populated_store["ids"])
    try:
        _wait_for_line(proc.stderr, "loaded the per-user artifacts", timeout=120)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != 0
    (own,) = [r for r in _comparison_runs() if r.info.run_id != entry]
    assert own.info.status == "FAILED" and "SIGTERM" in own.data.tags["recsys.error"] and own.data.metrics == {}


def test_a_failure_while_logging_ends_the_run_failed_and_the_next_compare_starts_afresh(populated_store, tmp_path):
    # An artifact location under a regular file cannot be written to, by anyone: a real fault, late in the run.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    mlflow.create_experiment("unwritable", artifact_location=(blocker / "artifacts").as_uri())
    ids = populated_store["ids"][:2]
    with pytest.raises(OSError):
        compare_runs(
            run_ids=ids, settings=ComparisonSettings(reference="M0", n_resamples=199), output_experiment="unwritable"
        )
    assert mlflow.active_run() is None
    (failed,) = _comparison_runs()
    assert failed.info.status == "FAILED" and "not-a-folder" in failed.data.tags["recsys.error"]
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference="M0", n_resamples=199))
    assert outcome.run_id != failed.info.run_id
    assert MlflowClient().get_run(outcome.run_id).info.status == "FINISHED"
    assert MlflowClient().get_run(failed.info.run_id).info.status == "FAILED"
