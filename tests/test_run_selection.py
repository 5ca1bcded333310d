"""Issue 27: what a selection of runs takes, and what a comparison reads before it computes.

Real SQLite stores under temporary folders; the runs are copies of real training runs on MovieLens-100k.
"""

import base64
import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
import uuid

import mlflow
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import TRAINED_METRICS, new_sqlite_store, sqlite_store, trained_copy
from mlflow_recsys.cli import cli
from mlflow_recsys.errors import RecsysError, TrackingPermissionError
from mlflow_recsys.server import _listing as listing
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import RunSelectionError, SplitConfig, TrainConfig, compare_runs, run_split, run_train
from mlflow_recsys.tracking._limits import duplicates
from mlflow_recsys.tracking._local_server import local_tracking_server
from mlflow_recsys.tracking._runs import search_training_runs, select_runs

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning")


class _CountedId(str):
    """A run id that counts the hashes and comparisons made of it (in a class-wide counter)."""

    operations = 0

    def __hash__(self):
        type(self).operations += 1
        return str.__hash__(self)

    def __eq__(self, other):
        type(self).operations += 1
        return str.__eq__(self, other)


def _ids_with_one_repeat(n: int) -> list[str]:
    ids = [uuid.uuid4().hex for _ in range(n - 1)]
    return ids[: n // 2] + [ids[7]] + ids[n // 2 :]


def test_duplicate_check_of_a_selection_is_linear():
    # 40,000 ids with one repeat: a list.count per id made 1.6e9 comparisons (15 s); one count of each id makes
    # a hash per id, and the operations grow with n, not n^2.
    counts = {}
    for n in (20_000, 40_000):
        ids = [_CountedId(i) for i in _ids_with_one_repeat(n)]
        _CountedId.operations = 0
        assert duplicates(ids) == [ids[7]]
        counts[n] = _CountedId.operations
    assert counts[40_000] <= 2 * 40_000
    assert counts[40_000] / counts[20_000] == pytest.approx(2, rel=0.01)


def test_duplicate_check_of_a_selection_names_the_repeated_id_before_reading_any_run(tmp_path):
    ids = _ids_with_one_repeat(40_000)
    with sqlite_store(tmp_path):
        # Not one of these runs exists: the repeat is found before any is fetched (else "was not found").
        with pytest.raises(
            RunSelectionError, match=rf"^runs: expected distinct run ids, found {ids[7]} more than once"
        ):
            select_runs(run_ids=ids, client=MlflowClient())
        assert mlflow.search_runs(search_all_experiments=True).empty


def test_duplicate_check_lists_at_most_twenty_repeated_ids(tmp_path):
    ids = [f"run{i}" for i in range(30)] * 2
    assert duplicates(ids) == [f"run{i}" for i in range(30)]  # each once, in first-seen order
    with sqlite_store(tmp_path), pytest.raises(RunSelectionError, match=r"found run0, .*, run19 and 10 others more"):
        select_runs(run_ids=ids, client=MlflowClient())


# -- C6: an experiment selection takes its FINISHED training runs, the same ones the server's page lists ----------

METRICS = TRAINED_METRICS


@pytest.fixture(scope="module")
def trained(trained_store, tmp_path_factory):
    with trained_copy(trained_store, tmp_path_factory.mktemp("selection-store"), "selection") as trained:
        yield trained


def _experiment_with_leftovers(trained, copy_run, tmp_path, name):
    """An experiment with FINISHED EASE and Popularity runs, a RUNNING one (a killed study's zombie or a sweep in
    progress) and a FAILED one; their ids by state."""
    client = MlflowClient()
    experiment_id = client.create_experiment(name, artifact_location=(tmp_path / "art").as_uri())
    runs = {}
    for state, source, model in [
        ("FINISHED", "ease", "EASE"),
        ("FINISHED", "pop", "Popularity"),
        ("RUNNING", "ease", "ELSA"),
        ("FAILED", "pop", "Broken"),
    ]:
        run_id = copy_run(trained[source], tmp_path / model, model=model, experiment_id=experiment_id)
        client.update_run(run_id, status=state)
        runs.setdefault(state, []).append(run_id)
    return experiment_id, runs


def test_experiment_selection_takes_finished_runs_and_counts_the_others(trained, copy_run, tmp_path, caplog):
    experiment_id, runs = _experiment_with_leftovers(trained, copy_run, tmp_path, "with-leftovers")
    with caplog.at_level(logging.WARNING, logger="mlflow_recsys.tracking._runs"):
        outcome = compare_runs(experiment="with-leftovers", settings=ComparisonSettings(n_resamples=199))
    assert MlflowClient().get_run(outcome.run_id).info.status == "FINISHED"
    assert sorted(outcome.source_runs) == ["EASE", "Popularity"]
    assert sorted(rid for seeds in outcome.source_runs.values() for rid in seeds.values()) == sorted(runs["FINISHED"])
    assert [r.getMessage() for r in caplog.records] == [
        "experiment 'with-leftovers': compared its 2 FINISHED training runs; "
        "left out 2 training runs that are not FINISHED (1 FAILED, 1 RUNNING)"
    ]
    # The server's page lists exactly these runs: one rule decides both.
    page_runs, truncated = search_training_runs(MlflowClient(), [experiment_id], limit=listing.MAX_LISTED)
    selected = select_runs(experiment=experiment_id, client=MlflowClient())
    assert [r.info.run_id for r in page_runs] == [r.info.run_id for r in selected] and not truncated
    assert sorted(r.info.run_id for r in selected) == sorted(runs["FINISHED"])
    # Named by id, a RUNNING run is still refused: the user asked for that run.
    with pytest.raises(RunSelectionError, match=rf"{runs['RUNNING'][0]} \(RUNNING\)"):
        select_runs(run_ids=runs["FINISHED"] + runs["RUNNING"], client=MlflowClient())


def test_experiment_selection_of_only_unfinished_runs_says_what_it_left_out(trained, copy_run, tmp_path):
    client = MlflowClient()
    experiment_id = client.create_experiment("only-running", artifact_location=(tmp_path / "art").as_uri())
    run_id = copy_run(trained["ease"], tmp_path / "r", model="EASE", experiment_id=experiment_id)
    client.update_run(run_id, status="RUNNING")
    with pytest.raises(
        RunSelectionError,
        match=r"^no FINISHED training runs in experiment 'only-running'; "
        r"left out 1 training run that is not FINISHED \(1 RUNNING\)$",
    ):
        select_runs(experiment="only-running", client=client)


def test_compare_command_takes_an_experiment_with_a_run_left_running(trained, copy_run, tmp_path):
    _experiment_with_leftovers(trained, copy_run, tmp_path, "cli-leftovers")
    result = CliRunner().invoke(cli, ["compare", "--experiment", "cli-leftovers", "--n-resamples", "199"])
    assert result.exit_code == 0, result.output
    run_id = result.output.strip().splitlines()[-1].removeprefix("comparison run ")
    run = MlflowClient().get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["recsys.n_source_runs"] == "2"


# -- C8: the comparison run is made before any work, so a server that will not take it says so first ------------


def test_permission_error_is_a_recsys_error_and_a_permission_error():
    assert issubclass(TrackingPermissionError, RecsysError) and issubclass(TrackingPermissionError, PermissionError)


def _create_user(url: str, admin: tuple[str, str], username: str, password: str) -> None:
    token = base64.b64encode(":".join(admin).encode()).decode()
    request = urllib.request.Request(
        f"{url}/api/2.0/mlflow/users/create",
        method="POST",
        data=json.dumps({"username": username, "password": password}).encode(),
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=60).close()


def _as_user(monkeypatch, username: str, password: str) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", username)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)


@pytest.mark.server_pages
def test_write_permission_to_the_target_experiment_is_checked_before_any_work(tmp_path, monkeypatch):
    password = "Recsys-Adm1n-Passw0rd-For-Tests"
    config = tmp_path / "auth.ini"
    config.write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{tmp_path}/auth.db\nadmin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    env = {
        "MLFLOW_AUTH_CONFIG_PATH": str(config),
        "MLFLOW_AUTH_ADMIN_PASSWORD": password,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "recsys-test-secret",
    }
    backend = new_sqlite_store(tmp_path / "server.db")
    previous = mlflow.get_tracking_uri()
    with local_tracking_server(backend, tmp_path / "artifacts", app_name="basic-auth", env=env, timeout=180) as url:
        try:
            mlflow.set_tracking_uri(url)
            _as_user(monkeypatch, "admin", password)
            experiment_id = mlflow.create_experiment("guarded")
            mlflow.set_experiment(experiment_id=experiment_id)
            checkpoint = f"runs:/{run_split('movielens-100k', SplitConfig(seed=42))}/checkpoint.zip"
            ids = [
                run_train(checkpoint, TrainConfig(m, metrics=METRICS), log_model=False) for m in ("EASE", "Popularity")
            ]
            _create_user(url, ("admin", password), "reader", password + "r")
            mlflow.set_experiment(experiment_id="0")  # the reader's comparison must not depend on the admin's choice

            _as_user(monkeypatch, "reader", password + "r")  # READ on every experiment: the server's default
            stages = []
            started = time.monotonic()
            with pytest.raises(TrackingPermissionError) as refused:
                compare_runs(run_ids=ids, settings=ComparisonSettings(n_resamples=999), on_stage=stages.append)
            waited = time.monotonic() - started
            assert str(refused.value) == (
                f"output_experiment: the tracking server refused to write the comparison run into experiment "
                f"'guarded' (id {experiment_id}), the first source run's for user 'reader'; nothing was computed. "
                "Ask the experiment's owner for EDIT permission, or write the comparison into an experiment you may "
                "write to: --output-experiment NAME (output_experiment= in Python; a new name is created)"
            )
            assert stages == ["selecting"]  # refused before any per-user artifact was read
            assert mlflow.active_run() is None
            result = CliRunner().invoke(cli, ["compare", *ids, "--n-resamples", "999"])
            assert result.exit_code == 1
            assert "Error: TrackingPermissionError: output_experiment: the tracking server refused" in result.output
            assert "--output-experiment NAME" in result.output

            # The remedy works: an experiment of the reader's own.
            outcome = compare_runs(
                run_ids=ids, settings=ComparisonSettings(n_resamples=999), output_experiment="reader's comparisons"
            )
            run = MlflowClient().get_run(outcome.run_id)
            assert run.info.status == "FINISHED" and run.data.tags["recsys.n_source_runs"] == "2"
            _as_user(monkeypatch, "admin", password)
            made = MlflowClient().search_runs(
                [experiment_id], filter_string="tags.`recsys.role` = 'comparison'", run_view_type=3
            )
            assert made == []  # the refused compares left nothing in the guarded experiment
            print(f"a READ-only user's compare refused after {waited:.1f} s, before loading any artifact")
        finally:
            mlflow.set_tracking_uri(previous)


@pytest.mark.parametrize(
    "args",
    [[], ["--filter", "params.l2 = '50'"], ["run1", "--experiment", "e"], ["--compare-url", "http://host/#/x"]],
)
def test_a_refused_selection_opens_no_store(tmp_path, args):
    """With no tracking URI set MLflow's default store is ./mlflow.db, made when first opened: a selection refused on
    its form must be refused before that, leaving the directory as it was."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING")}
    done = subprocess.run(
        [sys.executable, "-c", "from mlflow_recsys.cli import cli; cli()", "compare", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stderr.startswith("Error: "), done.stderr
    assert list(tmp_path.iterdir()) == []
