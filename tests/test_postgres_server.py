"""The tracking server in its production shape, on both of its backends: `mlflow server --backend-store-uri
<sqlite | postgresql> --artifacts-destination <dir>` on 127.0.0.1, artifacts proxied (``mlflow-artifacts:/``).

The PostgreSQL server is Debian's, started in a temporary folder by ``postgres_cluster`` (``initdb`` / ``pg_ctl``
as an unprivileged user, so this works when CI runs as root). The selection, comparison and refusal tests of
``test_integration.py`` and ``test_tracking.py`` are collected here again, unchanged, once per backend: their
fixtures (``served``, ``store``) are redefined below on this module's server. Marked ``postgres``, so
``make test`` leaves them out; ``make postgres-test`` runs them (a few minutes).
"""

from __future__ import annotations

import subprocess

import mlflow
import pytest
import sqlalchemy as sa
from mlflow.tracking import MlflowClient

from conftest import BIN, clean_env
from mlflow_recsys.tracking import SplitConfig, run_split, select_runs
from mlflow_recsys.tracking._local_server import local_tracking_server
from mlflow_recsys.tracking._training import resolve_checkpoint
from postgres_cluster import postgres_cluster

# The shared tests, collected here once per backend (in their files' order: some add runs later ones see).
from test_integration import (  # noqa: F401
    METRICS,
    test_a_running_run_is_refused_over_http,
    test_compare_by_a_pasted_ui_url_percent_encoded,
    test_compare_by_experiment_and_filter_over_http,
    test_compare_by_ids_over_http_logs_to_the_server,
    test_corrupted_artifact_over_http_is_refused_naming_the_run,
    test_mismatched_fingerprints_over_http_end_the_comparison_run_failed,
    train_small_study,
)
from test_tracking import (  # noqa: F401
    study,
    test_a_config_tag_that_is_not_a_json_object_is_named,
    test_check_selection_refuses_what_compare_runs_refuses_and_stages_are_reported_in_order,
    test_compare_by_experiment_and_filter,
    test_compare_refuses_a_metric_that_was_not_evaluated,
    test_compare_refuses_runs_from_different_splits_naming_them,
    test_compare_refuses_runs_that_are_not_finished,
    test_compare_runs_logs_a_comparison_run_matching_an_independent_computation,
    test_corrupted_per_user_artifact_is_refused_naming_the_run,
    test_mismatched_fingerprints_leave_the_comparison_run_failed_with_the_reason,
    test_paired_seeds_with_different_seed_sets_is_refused_before_any_run,
    test_representative_seed_picks_the_representative_run,
    test_runs_of_one_model_with_different_hyperparameters_are_distinct_candidates,
)

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request, tmp_path_factory):
    """A live `mlflow server` with proxied artifacts on each backend store: its URL, store URI and folder."""
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "sqlite":
        store = f"sqlite:///{root}/server.db"
        with local_tracking_server(store, root / "artifacts") as url:
            yield {"kind": "sqlite", "url": url, "store": store, "root": root}
    else:
        with postgres_cluster() as cluster:
            store = cluster.create_database("mlflow")
            with local_tracking_server(store, root / "artifacts") as url:
                yield {"kind": "postgresql", "url": url, "store": store, "root": root}


@pytest.fixture(scope="module")
def store(backend):
    """``test_tracking``'s store, on this module's server: the active experiment ``tracking``."""
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(backend["url"])
    mlflow.set_experiment("tracking")
    yield backend["root"]
    mlflow.set_tracking_uri(previous)


@pytest.fixture(scope="module")
def served(store, backend):
    """``test_integration``'s runs (a split, EASE, Popularity, two ELSA seeds) in experiment ``over-http``.

    The models read the checkpoint through its ``mlflow-artifacts:/`` URI, the form the split run's artifact URI
    takes behind the proxy. The active experiment goes back to ``tracking`` afterwards, where the tests of
    ``test_tracking`` add runs.
    """
    experiment_id = mlflow.set_experiment("over-http").experiment_id
    split = run_split("movielens-100k", SplitConfig(seed=3))
    checkpoint = f"{MlflowClient().get_run(split).info.artifact_uri}/checkpoint.zip"
    assert checkpoint.startswith("mlflow-artifacts:/")
    runs = train_small_study(checkpoint)
    mlflow.set_experiment("tracking")
    return {"url": backend["url"], "experiment_id": experiment_id, "split": split, "checkpoint": checkpoint, **runs}


def test_runs_live_in_the_backend_store_and_artifacts_behind_the_proxy(served, backend):
    run = MlflowClient().get_run(served["EASE"])
    assert run.info.artifact_uri == f"mlflow-artifacts:/{served['experiment_id']}/{served['EASE']}/artifacts"
    assert run.data.params["checkpoint"] == served["checkpoint"]
    # The server wrote the files under its --artifacts-destination, and the run row is in the database itself.
    assert (
        backend["root"] / "artifacts" / served["experiment_id"] / served["EASE"] / "artifacts" / "per_user.parquet"
    ).is_file()
    engine = sa.create_engine(backend["store"])
    try:
        with engine.connect() as connection:
            assert engine.dialect.name == backend["kind"]
            found = connection.execute(
                sa.text("SELECT status FROM runs WHERE run_uuid = :id"), {"id": served["EASE"]}
            ).scalar_one()
    finally:
        engine.dispose()
    assert found == "FINISHED"


@pytest.mark.parametrize("form", ["mlflow-artifacts:/", "mlflow-artifacts://host:port/", "runs:/"])
def test_a_checkpoint_is_read_through_each_artifact_uri_form(served, backend, tmp_path, form):
    path = f"{served['experiment_id']}/{served['split']}/artifacts/checkpoint.zip"
    uri = {
        "mlflow-artifacts:/": f"mlflow-artifacts:/{path}",
        "mlflow-artifacts://host:port/": f"mlflow-artifacts://{backend['url'].split('://')[1]}/{path}",
        "runs:/": f"runs:/{served['split']}/checkpoint.zip",
    }[form]
    local = resolve_checkpoint(uri, str(tmp_path))
    assert local.is_file() and local.read_bytes()[:2] == b"PK"


def test_selection_pages_through_the_search_on_each_backend(served):
    finished = "attributes.status = 'FINISHED'"  # a shared test leaves a KILLED training run here
    everything = MlflowClient().search_runs(  # a selection lists its runs oldest first
        [served["experiment_id"]],
        max_results=1000,
        filter_string=f"tags.`recsys.role` = 'train' and {finished}",
        order_by=["attributes.start_time ASC"],
    )
    paged = select_runs(experiment="over-http", filter_string=finished, page_size=2)
    assert len(everything) >= 4
    assert [r.info.run_id for r in paged] == [r.info.run_id for r in everything]


def test_the_compare_command_over_http(served, backend, copy_run, tmp_path):
    """The how-to's study command: ``mlflow-recsys compare`` by experiment and split digest, as a process."""
    aside = MlflowClient().create_experiment("cli-study")
    for model in ("EASE", "Popularity"):
        copy_run(served[model], tmp_path / model, model=model, experiment_id=aside)
    digest = MlflowClient().get_run(served["EASE"]).data.tags["recsys.split_digest"]
    proc = subprocess.run(
        [
            str(BIN / "mlflow-recsys"),
            "compare",
            "--experiment",
            "cli-study",
            "--filter",
            f"tags.`recsys.split_digest` = '{digest}'",
            "--reference",
            "Popularity",
            "--primary",
            "ndcg@100",
            "--n-resamples",
            "999",
        ],
        env=clean_env(backend["url"]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Paired comparison" in proc.stdout
    (comparison,) = MlflowClient().search_runs([aside], filter_string="tags.`recsys.role` = 'comparison'")
    assert comparison.info.status == "FINISHED" and comparison.info.artifact_uri.startswith("mlflow-artifacts:/")
