"""The recsys pages of `mlflow server --app-name recsys`: listing, escaping, CSRF, the CLI's checks, jobs and slots.

Most tests drive the app with Flask's test client over a SQLite store; the integration tests start the real
`mlflow server --app-name recsys` (4 uvicorn workers, its default) on 127.0.0.1 and talk HTTP to it.
"""

from __future__ import annotations

import html
import http.cookiejar
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import mlflow
import numpy as np
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from conftest import new_sqlite_store
from mlflow_recsys.errors import RunSelectionError, Terminated
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.server import _jobs as jobs
from mlflow_recsys.server import _listing as listing
from mlflow_recsys.tracking._artifacts import write_evaluation_artifacts
from mlflow_recsys.tracking._local_server import local_tracking_server
from mlflow_recsys.tracking._runs import runs_by_id, search_training_runs
from simulated import log_training_run
from slot_holder import hold_slot

XSS = "<img src=x onerror=alert(1)>"
BIN = Path(sys.executable).parent
#: The key both apps require, as MLflow's basic-auth does.
SECRET_KEY_ENV = "MLFLOW_FLASK_SERVER_SECRET_KEY"


# -- a small study: training runs with real per-user artifacts -------------------------------------------------


def small_study(client: MlflowClient, experiment_id: str, folder: Path) -> dict[str, list[str]]:
    """EASE (no seed), ELSA under seeds 0-2 and Popularity, all on one split."""
    return {
        "EASE": [log_training_run(client, experiment_id, folder, model="EASE", seed=None, shift=0.02, rng_seed=1)],
        "ELSA": [
            log_training_run(client, experiment_id, folder, model="ELSA", seed=str(s), shift=0.03, rng_seed=10 + s)
            for s in range(3)
        ],
        "Popularity": [log_training_run(client, experiment_id, folder, model="Popularity", seed=None, rng_seed=2)],
    }


# -- the app under Flask's test client ------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A SQLite store the app reads as the server's backend store, and a job folder of its own.

    The test runs in ``tmp_path``: an experiment made without an artifact location keeps its artifacts under
    ``./mlruns`` of the current folder, which must not be the project's.
    """
    monkeypatch.chdir(tmp_path)
    uri = new_sqlite_store(tmp_path / "server.db")
    monkeypatch.setenv("_MLFLOW_SERVER_FILE_STORE", uri)
    monkeypatch.setenv(jobs.JOBS_DIR_ENV, str(tmp_path / "jobs"))
    monkeypatch.setenv(SECRET_KEY_ENV, "recsys-test-secret")
    monkeypatch.delenv("_MLFLOW_SGI_NAME", raising=False)
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("study", artifact_location=(tmp_path / "artifacts").as_uri())
    return client, experiment_id, tmp_path


@pytest.fixture
def web(store):
    from mlflow_recsys.server._app import create_app

    app = create_app()
    app.config["TESTING"] = True
    return app.test_client()


def csrf_token(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def post_compare(web, experiment_id, run_ids, **fields):
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    data = {
        "csrf_token": csrf_token(page),
        "run": run_ids,
        "experiment": experiment_id,
        "correction": "holm",
        "n_resamples": "999",
        **fields,
    }
    return web.post("/recsys/compare", data=data)


def test_the_factory_returns_mlflows_flask_app_with_the_pages_and_the_fastapi_app_under_uvicorn(store, monkeypatch):
    from mlflow.server import app as flask_app

    from mlflow_recsys.server._app import create_app

    assert create_app() is flask_app
    assert any(rule.rule == "/recsys/" for rule in flask_app.url_map.iter_rules())
    monkeypatch.setenv("_MLFLOW_SGI_NAME", "uvicorn")
    served = create_app()
    assert type(served).__name__ == "FastAPI"


def test_index_lists_only_experiments_with_finished_training_runs(web, store):
    client, experiment_id, tmp = store
    client.create_experiment("empty")
    log_training_run(client, experiment_id, tmp, model="EASE", seed=None)
    page = web.get("/recsys/").get_data(as_text=True)
    assert "study" in page and "empty" not in page
    assert f"/recsys/experiments/{experiment_id}" in page


def test_experiment_page_groups_runs_by_split_model_and_seed_with_the_metric(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    log_training_run(client, experiment_id, tmp, model="EASE", seed=None, digest="e" * 64, rng_seed=5)
    log_training_run(client, experiment_id, tmp, model="ELSA", seed="9", status="RUNNING")
    response = web.get(f"/recsys/experiments/{experiment_id}")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert page.count('class="split"') == 2  # two split digests
    assert page.count('name="run"') == 6  # FINISHED training runs only: the RUNNING one is not listed
    elsa = page.index(">ELSA<")
    assert page.index("seed 0", elsa) < page.index("seed 1", elsa) < page.index("seed 2", elsa)
    value = client.get_run(study["ELSA"][0]).data.metrics["ndcg_at_100"]
    assert f"{value:.4f}" in page and "ndcg@100" in page
    # The form's defaults are the compare command's.
    assert 'value="9999"' in page and '<option value="holm" selected>' in page
    assert '<option value="" >none: every pair</option>' in page or "none: every pair" in page


def test_every_name_tag_and_param_is_escaped(web, store):
    client, experiment_id, tmp = store
    client.rename_experiment(experiment_id, XSS)
    ids = [
        log_training_run(
            client,
            experiment_id,
            tmp,
            model=XSS,
            seed=XSS,
            name=XSS,
            extra_tags={"recsys.dataset": XSS, "recsys.config": json.dumps({XSS: XSS})},
        ),
        log_training_run(client, experiment_id, tmp, model="EASE", seed=None, rng_seed=3),
    ]
    client.log_param(ids[0], "payload", XSS)
    try:
        client.log_metric(ids[0], XSS, 1.0)
    except Exception:  # MLflow refuses such a metric name itself
        pass
    comparison = client.create_run(
        experiment_id,
        tags={
            "recsys.role": "comparison",
            "mlflow.runName": XSS,
            "mlflow.note.content": f"## Paired comparison\n\n{XSS}",
        },
    )
    client.set_terminated(comparison.info.run_id)
    pages = [
        web.get(f"/recsys/experiments/{experiment_id}"),
        web.get("/recsys/"),
        web.get("/recsys/compare?runs=" + urllib.parse.quote(json.dumps([ids[0], XSS]))),
        post_compare(web, experiment_id, [ids[0], XSS]),
    ]
    for response in pages:
        text = response.get_data(as_text=True)
        assert "<img" not in text, text[:2000]
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[0].get_data(as_text=True)
    assert pages[3].status_code == 400


def test_compare_without_a_csrf_token_is_refused(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    response = web.post(
        "/recsys/compare", data={"run": study["EASE"] + study["Popularity"], "experiment": experiment_id}
    )
    assert response.status_code == 400 and "CSRF" in response.get_data(as_text=True)
    assert not list((tmp / "jobs").glob("*.json"))


def _cli_message(uri: str, run_ids: list[str], **kwargs) -> str:
    """What `compare_runs` (the command line's function) says about this selection."""
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking._comparison import compare_runs

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with pytest.raises(ValueError) as caught:
            compare_runs(run_ids=run_ids, settings=ComparisonSettings(**kwargs))
    finally:
        mlflow.set_tracking_uri(previous)
    return f"{type(caught.value).__name__}: {caught.value}"


@pytest.mark.parametrize(
    "case", ["different splits", "running run", "single model", "unknown reference", "resamples out of range"]
)
def test_an_incomparable_selection_is_refused_with_the_command_lines_message(web, store, case):
    client, experiment_id, tmp = store
    uri = os.environ["_MLFLOW_SERVER_FILE_STORE"]
    study = small_study(client, experiment_id, tmp)
    fields, kwargs = {}, {}
    if case == "different splits":
        other = log_training_run(client, experiment_id, tmp, model="Other", seed=None, digest="e" * 64)
        run_ids = study["EASE"] + [other]
    elif case == "running run":
        run_ids = study["EASE"] + [log_training_run(client, experiment_id, tmp, model="X", seed=None, status="RUNNING")]
    elif case == "single model":
        run_ids = study["ELSA"]
    elif case == "unknown reference":
        run_ids, fields, kwargs = study["EASE"] + study["Popularity"], {"reference": "ELSA"}, {"reference": "ELSA"}
    else:
        run_ids, fields, kwargs = study["EASE"] + study["Popularity"], {"n_resamples": "0"}, {"n_resamples": 0}
    expected = _cli_message(uri, run_ids, **kwargs)
    before = len(client.search_runs([experiment_id]))
    response = post_compare(web, experiment_id, run_ids, **fields)
    page = response.get_data(as_text=True)
    assert response.status_code == 400
    shown = html.unescape(re.search(r'<div class="error" id="error" role="alert">(.*?)</div>', page, re.S).group(1))
    assert shown == expected
    assert len(client.search_runs([experiment_id])) == before  # nothing made
    assert not list((tmp / "jobs").glob("*.json"))  # no job started
    for rid in run_ids:  # the selection stays ticked
        assert f'value="{rid}"' in page


def test_a_compare_url_opens_the_selection_pre_ticked(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    chosen = study["EASE"] + study["ELSA"][:2]
    query = "runs=" + json.dumps(chosen) + "&experiments=" + json.dumps([experiment_id])
    for url in (f"/recsys/compare?{query}", f"/recsys/compare?{urllib.parse.quote(query, safe='=&')}"):
        page = web.get(url).get_data(as_text=True)
        ticked = set(re.findall(r'<input type="checkbox" name="run" value="(\w+)" [^>]*checked', page))
        assert ticked == set(chosen), url
    # Without experiments=, the runs' own experiment is listed.
    page = web.get("/recsys/compare?runs=" + json.dumps(chosen)).get_data(as_text=True)
    assert page.count('name="run"') == 5
    assert web.get("/recsys/compare?experiments=[]").status_code == 400


def test_paging_follows_search_runs_page_tokens(store):
    client, experiment_id, tmp = store
    ids = [
        log_training_run(client, experiment_id, tmp, model=f"M{i}", seed=None, rng_seed=i, n_users=20) for i in range(7)
    ]
    runs, truncated = search_training_runs(client, [experiment_id], page_size=3, limit=listing.MAX_LISTED)
    assert sorted(r.info.run_id for r in runs) == sorted(ids) and not truncated
    runs, truncated = search_training_runs(client, [experiment_id], page_size=3, limit=5)
    assert len(runs) == 5 and truncated


def test_the_comparisons_list_shows_the_result_tag_when_the_notes_hold_no_sentence(store):
    client, experiment_id, _ = store
    run = client.create_run(
        experiment_id,
        tags={
            "recsys.role": "comparison",
            "recsys.result": "B beat A <b>.",
            "mlflow.note.content": "## Paired comparison\n\n| a | b |",
        },
    )
    client.log_param(run.info.run_id, "reference", "None")  # a run that ended logged its settings
    client.set_terminated(run.info.run_id)
    rows = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}
    assert rows[run.info.run_id].sentences == ["B beat A <b>."]


def test_repeated_ids_in_a_compare_address_are_shown_once(web, store):
    client, experiment_id, tmp = store
    run_id = log_training_run(client, experiment_id, tmp, model="EASE", seed=None, rng_seed=5)
    address = "/recsys/compare?runs=" + urllib.parse.quote(json.dumps([run_id] * 50))
    address += "&experiments=" + urllib.parse.quote(json.dumps([experiment_id] * 2000))
    text = web.get(address).get_data(as_text=True)
    name = client.get_experiment(experiment_id).name
    assert text.count(f'value="{run_id}"') == 1 and text.count(name) <= 3


class CountingClient(MlflowClient):
    """A real client over the real store that counts its queries."""

    def __init__(self, uri):
        super().__init__(tracking_uri=uri)
        self.calls = {"search_runs": 0, "search_experiments": 0}

    def search_runs(self, *args, **kwargs):
        self.calls["search_runs"] += 1
        return super().search_runs(*args, **kwargs)

    def search_experiments(self, *args, **kwargs):
        self.calls["search_experiments"] += 1
        return super().search_experiments(*args, **kwargs)


def test_the_index_finds_experiments_with_a_few_queries_not_one_per_experiment(store):
    client, experiment_id, tmp = store
    uri = os.environ["_MLFLOW_SERVER_FILE_STORE"]
    for i in range(40):
        client.create_experiment(f"unrelated {i:02d}")
    tagged = client.create_experiment("tagged")
    client.set_experiment_tag(tagged, "recsys.has_training_runs", "true")
    log_training_run(client, tagged, tmp, model="EASE", seed=None, n_users=20)
    legacy = [client.create_experiment(f"legacy {i}") for i in range(3)]  # training runs but no experiment tag
    for exp in legacy + [experiment_id]:
        for seed in range(3):
            log_training_run(client, exp, tmp, model="ELSA", seed=str(seed), n_users=20, rng_seed=seed)
    only_running = client.create_experiment("only running")
    log_training_run(client, only_running, tmp, model="EASE", seed=None, n_users=20, status="RUNNING")
    counting = CountingClient(uri)
    found = listing.experiments_with_training_runs(counting)
    assert sorted(e.experiment_id for e in found) == sorted([tagged, experiment_id, *legacy])
    assert counting.calls["search_runs"] == 1 and counting.calls["search_experiments"] == 2
    # Experiments with more training runs than a page: each query leaves out the experiments found so far.
    counting = CountingClient(uri)
    assert listing._holding(counting, legacy + [only_running], listing.TRAIN_FILTER, page_size=2) == set(legacy)
    assert counting.calls["search_runs"] <= 4


def test_a_compare_address_without_experiments_looks_up_every_id_in_a_few_queries(web, store):
    client, experiment_id, tmp = store
    uri = os.environ["_MLFLOW_SERVER_FILE_STORE"]
    study = small_study(client, experiment_id, tmp)
    deleted = log_training_run(client, experiment_id, tmp, model="Gone", seed=None, n_users=20)
    client.delete_run(deleted)
    other = client.create_experiment("other")
    late = log_training_run(client, other, tmp, model="EASE", seed=None, n_users=20, rng_seed=9)
    missing = [f"{i:032x}" for i in range(600)]
    chosen = missing + study["EASE"] + study["Popularity"] + [deleted, late, "'); drop table runs; --"]
    counting = CountingClient(uri)
    found = runs_by_id(counting, chosen)
    assert set(found) == set(study["EASE"] + study["Popularity"] + [deleted, late])
    assert counting.calls["search_runs"] == 7  # 100 ids a query, not one query per id
    page = web.get("/recsys/compare?runs=" + urllib.parse.quote(json.dumps(chosen))).get_data(as_text=True)
    ticked = set(re.findall(r'<input type="checkbox" name="run" value="([^"]+)" [^>]*checked', page))
    assert set(study["EASE"] + study["Popularity"] + [late, deleted]) <= {html.unescape(t) for t in ticked}
    assert page.count(">not found<") == 601  # every missing id is shown as such, the hostile one as text
    assert re.search(rf"{deleted}</code></td><td>deleted \(FINISHED\)</td>", page)
    assert client.get_experiment(other).name in page  # the experiments of the runs, the 501st id's included


def test_a_refusal_names_no_store_path_and_no_command_line_hint(web, store, monkeypatch):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    twin = log_training_run(client, experiment_id, tmp, model="EASE", seed=None, rng_seed=3)
    for run_ids, expected in [
        (study["EASE"] + ["f" * 32], f"run {'f' * 32!r} was not found"),
        (study["EASE"] + [twin] + study["Popularity"], "are both EASE with seed none"),
    ]:
        page = post_compare(web, experiment_id, run_ids).get_data(as_text=True)
        shown = html.unescape(re.search(r'<div class="error" id="error" role="alert">(.*?)</div>', page, re.S).group(1))
        assert expected in shown, shown
        for leak in (str(tmp), "sqlite", "tracking store", "filter", "MLFLOW_TRACKING_URI"):
            assert leak not in shown, (leak, shown)
    # The command line keeps its hints.
    from mlflow.tracking._tracking_service import utils as tracking_utils

    from mlflow_recsys.tracking._runs import select_runs

    # Put back exactly what was there (often "not set", so the environment decides) after the test.
    monkeypatch.setattr(tracking_utils, "_tracking_uri", tracking_utils._tracking_uri)
    mlflow.set_tracking_uri(os.environ["_MLFLOW_SERVER_FILE_STORE"])
    with pytest.raises(RunSelectionError, match="the tracking store is sqlite"):
        select_runs(run_ids=["f" * 32], client=MlflowClient())


def test_a_refused_post_without_its_experiment_field_still_lists_the_runs(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    response = web.post("/recsys/compare", data={"csrf_token": csrf_token(page), "run": study["ELSA"]})
    text = response.get_data(as_text=True)
    assert response.status_code == 400 and "expected at least two models" in html.unescape(text)
    assert text.count('name="run"') == 5 and text.count("checked") >= 3


def test_the_page_carries_every_metric_for_the_primary_metric_choice(web, store):
    client, experiment_id, tmp = store
    run_id = log_training_run(client, experiment_id, tmp, model="EASE", seed=None)
    client.log_metric(run_id, "precision_at_10", float("nan"))
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    values = json.loads(html.unescape(re.search(r"data-values='([^']*)'", page).group(1)))
    metrics = client.get_run(run_id).data.metrics
    assert values == {"ndcg@100": metrics["ndcg_at_100"], "recall@20": metrics["recall_at_20"]}  # NaN left out


def test_configurations_of_one_model_are_offered_as_candidates(web, store):
    client, experiment_id, tmp = store
    ids = {
        l2: log_training_run(
            client,
            experiment_id,
            tmp,
            model="EASE",
            seed=None,
            rng_seed=l2,
            n_users=50,
            extra_tags={"recsys.config": json.dumps({"l2": float(l2), "dtype": "float32"})},
        )
        for l2 in (50, 500)
    }
    pop = log_training_run(client, experiment_id, tmp, model="Popularity", seed=None, n_users=50)
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    assert page.count("compared as <code>EASE(l2=50)</code>") == 1 and "compared as <code>EASE(l2=500)</code>" in page
    offered = re.findall(
        r'<option value="([^"]+)"></option>',
        re.search(r'<datalist id="candidates">(.*?)</datalist>', page, re.S).group(1),
    )
    assert offered == ["EASE", "EASE(l2=50)", "EASE(l2=500)", "Popularity"]
    # The offered name is accepted as the reference (the job starts); the plain model name is refused, naming both.
    response = post_compare(web, experiment_id, [*ids.values(), pop], reference="EASE(l2=50)")
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    page = post_compare(web, experiment_id, [*ids.values(), pop], reference="EASE").get_data(as_text=True)
    assert "name one of [&#39;EASE(l2=50)&#39;, &#39;EASE(l2=500)&#39;]" in page


# -- jobs and slots -------------------------------------------------------------------------------------------


def test_job_ids_are_checked_before_they_name_a_file(tmp_path, web):
    with pytest.raises(jobs.JobNotFound):
        jobs.read_job(tmp_path, "../../etc/passwd")
    with pytest.raises(jobs.JobNotFound):
        jobs.read_job(tmp_path, "0" * 32)
    assert web.get("/recsys/jobs/..%2f..%2fetc%2fpasswd").status_code == 404
    assert web.get("/recsys/jobs/" + "0" * 32).status_code == 404


def test_a_job_whose_process_is_gone_reads_as_failed(tmp_path):
    job = jobs.new_job(tmp_path, run_ids=["a", "b"], settings={}, experiment_ids=[])
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    jobs.write_job(tmp_path, {**job, "stage": "comparing", "pid": proc.pid})
    assert jobs.read_job(tmp_path, job["id"])["stage"] == "failed"


def test_ended_jobs_are_pruned_by_age_and_count_and_running_ones_never(tmp_path):
    now = time.time()
    made = []
    for i in range(6):
        job = jobs.new_job(tmp_path, run_ids=["a", "b"], settings={}, experiment_ids=[])
        (tmp_path / f"{job['id']}.log").write_text("log")
        jobs.write_job(tmp_path, {**job, "stage": "done", "finished": now - i * 3600})
        made.append(job["id"])
    running = jobs.new_job(tmp_path, run_ids=["a", "b"], settings={}, experiment_ids=[])
    jobs.write_job(tmp_path, {**running, "stage": "comparing", "pid": os.getpid(), "created": now - 30 * 24 * 3600})
    old = jobs.new_job(tmp_path, run_ids=["a", "b"], settings={}, experiment_ids=[])  # new_job prunes too
    jobs.write_job(tmp_path, {**old, "stage": "failed", "finished": now - 8 * 24 * 3600})
    assert jobs.prune(tmp_path, now=now, keep=4) == 3  # the 8-day-old job and the two oldest beyond 4
    left = {p.stem for p in tmp_path.glob("*.json")}
    assert left == set(made[:4]) | {running["id"]}
    assert {p.stem for p in tmp_path.glob("*.log")} == set(made[:4])


def test_the_launch_pid_is_a_file_of_its_own_so_the_runner_s_writes_are_never_undone(tmp_path):
    job = jobs.new_job(tmp_path, run_ids=["a", "b"], settings={}, experiment_ids=[])
    jobs.write_job(tmp_path, {**job, "stage": "comparing"})  # the runner got there first
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        jobs.record_launch(tmp_path, job["id"], proc.pid)
        state = jobs.read_job(tmp_path, job["id"])
        assert state["stage"] == "comparing" and state["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()
    assert jobs.read_job(tmp_path, job["id"])["stage"] == "failed"


def test_slots_bound_concurrent_holders_across_processes(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(5)
    procs = [ctx.Process(target=hold_slot, args=(str(tmp_path), 2, 0.6, out, start)) for _ in range(5)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    events = sorted([(got, 1) for _, got, _, _ in results] + [(end, -1) for _, _, end, _ in results])
    running, peak = 0, 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2
    assert sum(wait > 0.3 for *_, wait in results) >= 3  # three had to wait for a slot


def test_max_comparisons_is_validated(monkeypatch):
    monkeypatch.setenv(jobs.MAX_COMPARISONS_ENV, "0")
    with pytest.raises(ValueError, match=jobs.MAX_COMPARISONS_ENV):
        jobs.max_comparisons()
    monkeypatch.setenv(jobs.MAX_COMPARISONS_ENV, "3")
    assert jobs.max_comparisons() == 3


# -- break-test fixes: store errors, launches, origins, cookies, folders, the queue bound -----------------------


def test_a_runner_that_dies_before_writing_its_job_reads_as_failed(store, monkeypatch):
    from mlflow_recsys.server import _runner as runner

    folder = jobs.jobs_dir(os.environ["_MLFLOW_SERVER_FILE_STORE"])
    job = jobs.new_job(folder, run_ids=["a", "b"], settings={}, experiment_ids=[])
    monkeypatch.setattr(runner.sys, "executable", "/bin/false")  # exits at once, writes nothing
    proc = runner.launch(folder, job, tracking_uri="http://127.0.0.1:1")
    proc.wait()
    state = jobs.read_job(folder, job["id"])
    assert state["pid"] == proc.pid and state["stage"] == "failed"
    # A job that never got a process (an older server's, or a failed launch) fails once it is a minute old.
    stale = jobs.new_job(folder, run_ids=["a", "b"], settings={}, experiment_ids=[])
    jobs.write_job(folder, {**stale, "created": time.time() - 120})
    assert jobs.read_job(folder, stale["id"])["stage"] == "failed"


def test_a_failed_launch_leaves_no_job(web, store, monkeypatch):
    from mlflow_recsys.server import _runner as runner

    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)

    def refuse(*args, **kwargs):
        raise OSError("Cannot allocate memory")

    monkeypatch.setattr(runner.subprocess, "Popen", refuse)
    response = post_compare(web, experiment_id, study["EASE"] + study["Popularity"])
    assert response.status_code == 503 and "could not be started" in response.get_data(as_text=True)
    assert not list((tmp / "jobs").glob("*.json"))


class _BrokenStore:
    def __init__(self, exc):
        self.exc = exc

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise self.exc

        return fail


@pytest.mark.parametrize("kind", ["locked", "unreachable", "missing"])
def test_a_store_that_does_not_answer_is_503_not_404(web, store, monkeypatch, kind):
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, TEMPORARILY_UNAVAILABLE

    from mlflow_recsys.errors import TrackingServerError
    from mlflow_recsys.server import _views as views

    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp) if kind == "locked" else None
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    exc = {
        "locked": MlflowException("(sqlite3.OperationalError) database is locked", error_code=TEMPORARILY_UNAVAILABLE),
        "unreachable": TrackingServerError("tracking server http://127.0.0.1:1 did not answer"),
        "missing": MlflowException("no such experiment", error_code=RESOURCE_DOES_NOT_EXIST),
    }[kind]
    monkeypatch.setattr(views, "client", lambda: _BrokenStore(exc))
    response = web.get(f"/recsys/experiments/{experiment_id}")
    if kind == "missing":
        assert response.status_code == 404
        return
    text = response.get_data(as_text=True)
    assert response.status_code == 503 and text.startswith("the tracking store did not answer: "), text
    assert ("database is locked" if kind == "locked" else "did not answer") in text
    index = web.get("/recsys/")
    assert index.status_code == 503 and "the tracking store did not answer" in index.get_data(as_text=True)
    if kind == "locked":
        data = {
            "csrf_token": csrf_token(page),
            "run": study["EASE"] + study["Popularity"],
            "experiment": experiment_id,
            "correction": "holm",
            "n_resamples": "999",
        }
        posted = web.post("/recsys/compare", data=data)
        assert posted.status_code == 503, posted.get_data(as_text=True)[:500]
        assert not list((tmp / "jobs").glob("*.json"))


def test_the_runner_uses_the_command_lines_bounded_retries(monkeypatch, tmp_path):
    from mlflow_recsys.server import _runner as runner
    from mlflow_recsys.tracking._server_errors import CLI_DEFAULTS

    for name in CLI_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(runner.signal, "signal", lambda *args: None)
    monkeypatch.setattr(runner, "_watch_parent", lambda *args: None)
    seen = {}
    monkeypatch.setattr(
        runner,
        "run_job",
        lambda folder, job_id, **kw: seen.update({k: os.environ.get(k) for k in CLI_DEFAULTS}) or {"stage": "done"},
    )
    assert runner.main([str(tmp_path), "0" * 32]) == 0
    assert seen == CLI_DEFAULTS
    for name in CLI_DEFAULTS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("raw", ["abc", "0", "-1"])
def test_a_bad_max_comparisons_is_refused_when_the_app_is_made(store, monkeypatch, raw):
    from mlflow_recsys.server._app import create_app

    monkeypatch.setenv(jobs.MAX_COMPARISONS_ENV, raw)
    with pytest.raises(ValueError, match=jobs.MAX_COMPARISONS_ENV) as caught:
        create_app()
    assert repr(raw) in str(caught.value)


def test_a_missing_secret_key_is_refused_when_the_app_is_made(store, monkeypatch):
    from mlflow_recsys.server._app import create_app

    monkeypatch.delenv(SECRET_KEY_ENV)
    with pytest.raises(RuntimeError, match=f"{SECRET_KEY_ENV}: expected the key .* found it unset; set it before"):
        create_app()


def test_recsys_responses_carry_no_cors_headers(web, store):
    from mlflow_recsys.server._app import _StripCorsWsgi, create_app

    response = web.get("/recsys/", headers={"Origin": "http://127.0.0.1:9999"})
    assert response.status_code == 200
    assert not [k for k in response.headers.keys() if k.lower().startswith("access-control-allow-")]
    assert isinstance(create_app().wsgi_app, _StripCorsWsgi)  # wrapped once, however often the app is made
    assert not isinstance(create_app().wsgi_app.app, _StripCorsWsgi)

    def inner(environ, start_response):  # what Flask-CORS answers a localhost origin
        start_response(
            "200 OK",
            [
                ("Access-Control-Allow-Origin", "http://127.0.0.1:9999"),
                ("Access-Control-Allow-Credentials", "true"),
                ("Vary", "Origin"),
                ("Content-Type", "text/html"),
            ],
        )
        return [b"x"]

    def headers(path):
        sent = []
        _StripCorsWsgi(inner, prefix="/recsys/")({"PATH_INFO": path}, lambda status, h, exc_info=None: sent.extend(h))
        return [k for k, _ in sent]

    assert headers("/recsys/") == ["Vary", "Content-Type"]
    assert len(headers("/api/2.0/mlflow/experiments/search")) == 4


def test_the_uvicorn_app_strips_cors_headers_from_the_pages(store, monkeypatch):
    import asyncio

    from mlflow_recsys.server._app import _StripCors, create_app

    monkeypatch.setenv("_MLFLOW_SGI_NAME", "uvicorn")
    served = create_app()
    assert any(m.cls is _StripCors for m in served.user_middleware)

    async def inner(scope, receive, send):  # what MLflow's CORSMiddleware answers a localhost origin
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"access-control-allow-origin", b"http://localhost:9999"),
                    (b"access-control-allow-credentials", b"true"),
                    (b"content-type", b"text/html"),
                ],
            }
        )

    def headers(path):
        sent = []

        async def send(message):
            sent.append(message)

        asyncio.run(_StripCors(inner, prefix="/recsys/")({"type": "http", "path": path}, None, send))
        return [k for k, _ in sent[0]["headers"]]

    assert headers("/recsys/") == [b"content-type"]
    assert len(headers("/api/2.0/mlflow/experiments/search")) == 3


@pytest.mark.parametrize(
    "headers, refused",
    [
        ({"Origin": "http://127.0.0.1:9999"}, True),
        ({"Origin": "null"}, True),
        ({"Referer": "http://127.0.0.1:9999/evil.html"}, True),
        ({"Origin": "http://localhost"}, False),
        ({"Referer": "http://localhost/recsys/experiments/1"}, False),
        ({}, False),
    ],
)
def test_a_compare_posted_from_another_origin_is_refused(web, store, headers, refused):
    client, experiment_id, tmp = store
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    data = {"csrf_token": csrf_token(page), "run": [], "experiment": experiment_id}
    response = web.post("/recsys/compare", data=data, headers=headers)
    if refused:
        assert response.status_code == 403 and "another site" in response.get_data(as_text=True)
    else:
        assert response.status_code == 400 and "at least two ticked runs" in response.get_data(as_text=True)


def test_the_session_cookie_is_samesite_lax(web, store):
    client, experiment_id, tmp = store
    response = web.get(f"/recsys/experiments/{experiment_id}")
    cookies = response.headers.getlist("Set-Cookie")
    assert cookies and all("SameSite=Lax" in c for c in cookies), cookies


def test_a_jobs_folder_others_may_write_to_is_refused(store, monkeypatch):
    from mlflow_recsys.server._app import create_app

    client, experiment_id, tmp = store
    shared = tmp / "shared-jobs"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(jobs.JOBS_DIR_ENV, str(shared))
    with pytest.raises(RuntimeError, match="writable by its group or by others"):
        create_app()
    # The default layout makes the folder and its parent private.
    monkeypatch.delenv(jobs.JOBS_DIR_ENV)
    monkeypatch.setattr(jobs.tempfile, "gettempdir", lambda: str(tmp))
    made = jobs.jobs_dir("sqlite:///x.db")
    assert made.stat().st_mode & 0o777 == 0o700 and made.parent.stat().st_mode & 0o777 == 0o700
    made.parent.chmod(0o775)
    with pytest.raises(RuntimeError, match="writable"):
        jobs.jobs_dir("sqlite:///x.db")


def test_the_queue_is_bounded(web, store, monkeypatch):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    monkeypatch.setenv(jobs.MAX_COMPARISONS_ENV, "1")
    folder = tmp / "jobs"
    for _ in range(4):
        job = jobs.new_job(folder, run_ids=["a", "b"], settings={}, experiment_ids=[])
        jobs.write_job(folder, {**job, "pid": os.getpid()})  # a live process
    response = post_compare(web, experiment_id, study["EASE"] + study["Popularity"])
    assert response.status_code == 503
    assert "4 comparisons are already waiting; try again when one finishes" in response.get_data(as_text=True)
    assert len(list(folder.glob("*.json"))) == 4


def _admit(folder, bound, barrier, results):
    barrier.wait()
    with jobs.admission(folder):
        if jobs.unfinished_jobs(folder) < bound:
            jobs.new_job(folder, run_ids=["a", "b"], settings={}, experiment_ids=[])
            results.put(True)
            return
    results.put(False)


def test_requests_arriving_together_cannot_pass_the_queue_bound(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(12), ctx.Queue()
    workers = [ctx.Process(target=_admit, args=(tmp_path, 8, barrier, results)) for _ in range(12)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    admitted = [results.get(timeout=10) for _ in workers]
    assert admitted.count(True) == 8 and len(list(tmp_path.glob("*.json"))) == 8


def test_experiment_ids_are_merged_bounded_and_checked_before_the_store_is_asked(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    token = csrf_token(page)
    # One model only, experiment id repeated 5,000 times: one lookup, one listing, the refusal shown.
    started = time.monotonic()
    response = web.post(
        "/recsys/compare", data={"csrf_token": token, "run": study["ELSA"], "experiment": [experiment_id] * 5000}
    )
    text = response.get_data(as_text=True)
    assert response.status_code == 400 and "expected at least two models" in html.unescape(text)
    assert text.count('name="experiment"') == 1 and time.monotonic() - started < 10
    too_many = json.dumps([str(i) for i in range(101)])
    response = web.get(f"/recsys/compare?runs={json.dumps(study['EASE'])}&experiments={too_many}")
    assert response.status_code == 400 and b"expected at most 100 experiment ids, found 101" in response.data
    for path in (
        "/recsys/experiments/99999999999999999999999",
        '/recsys/compare?runs=["a"]&experiments=["99999999999999999999999"]',
    ):
        assert web.get(path).status_code == 404, path
    # An experiment deleted between listing and Compare: the refusal page still comes, with the runs.
    other = client.create_experiment("short-lived")
    runs = [log_training_run(client, other, tmp, model=m, seed=None, n_users=20) for m in ("A", "B")]
    client.delete_experiment(other)
    response = web.post("/recsys/compare", data={"csrf_token": token, "run": runs, "experiment": other})
    text = html.unescape(response.get_data(as_text=True))
    assert response.status_code == 400 and "deleted" in text and 'id="error"' in text


def test_hostile_compare_addresses_and_run_ids_are_refused_briefly(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    response = web.get("/recsys/compare?runs=" + "[" * 4000)
    assert response.status_code == 400 and b"expected runs=[...] to be a JSON list" in response.data
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    long_id = "a" * 100_000
    response = web.post(
        "/recsys/compare",
        data={"csrf_token": csrf_token(page), "run": study["EASE"] + [long_id], "experiment": experiment_id},
    )
    text = response.get_data(as_text=True)
    assert response.status_code == 400 and "runs: expected MLflow run ids" in html.unescape(text)
    assert len(text) < 60_000 and long_id not in text
    text = web.get("/recsys/compare?runs=" + json.dumps(study["EASE"] + [long_id])).get_data(as_text=True)
    assert long_id not in text and study["EASE"][0] in text


def test_a_damaged_per_user_file_is_an_artifact_error_naming_the_run(tmp_path):
    from mlflow_recsys.errors import ArtifactError
    from mlflow_recsys.tracking._artifacts import read_evaluation_artifacts

    log_dir = tmp_path / "run"
    result = EvaluationResult(
        metrics={"ndcg@10": 0.5},
        per_user={"ndcg@10": np.array([0.5, 0.5])},
        sample_ids=np.arange(2),
        targets_fingerprint="f" * 64,
    )
    write_evaluation_artifacts(result, log_dir, split_digest="d" * 64)
    whole = (log_dir / "per_user.parquet").read_bytes()
    for damaged in (b"garbage" * 10, whole[: len(whole) // 2]):
        (log_dir / "per_user.parquet").write_bytes(damaged)
        with pytest.raises(ArtifactError, match=r"^run abc: per_user.parquet is not a readable Parquet file") as info:
            read_evaluation_artifacts(log_dir, origin="run abc")
        assert str(tmp_path) not in str(info.value)


def test_names_wrap_and_are_bidi_isolated(web, store):
    page = web.get("/recsys/").get_data(as_text=True)
    assert (
        "overflow-wrap: anywhere" in page and "unicode-bidi: isolate" in page and "select { max-width: 100%; }" in page
    )


# -- the real server ------------------------------------------------------------------------------------------


@contextmanager
def recsys_server(root: Path, *, app_name: str = "recsys", env: dict | None = None):
    """`mlflow server --app-name <app_name>` on 127.0.0.1 with its default (4) uvicorn workers; yields its URL."""
    env = {jobs.JOBS_DIR_ENV: str(root / "jobs"), SECRET_KEY_ENV: "recsys-test-secret", **(env or {})}
    backend = new_sqlite_store(root / "server.db")
    with local_tracking_server(backend, root / "artifacts", timeout=180, app_name=app_name, env=env) as url:
        yield url


class Browser:
    """Cookies and redirects over urllib, as a browser keeps them (the CSRF token lives in the session cookie)."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None):
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.headers = {}
        if auth:
            import base64

            self.headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()

    def get(self, path: str) -> tuple[int, str, str]:
        try:
            with self.opener.open(urllib.request.Request(self.url + path, headers=self.headers), timeout=60) as r:
                return r.status, r.read().decode(), r.url
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), path

    def post(self, path: str, fields: dict) -> tuple[int, str, str]:
        data = urllib.parse.urlencode(fields, doseq=True).encode()
        try:
            with self.opener.open(
                urllib.request.Request(self.url + path, data=data, headers=self.headers), timeout=60
            ) as r:
                return r.status, r.read().decode(), r.url
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), path


def wait_for_job(browser: Browser, job_id: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, text, _ = browser.get(f"/recsys/jobs/{job_id}.json")
        assert status == 200, text
        job = json.loads(text)
        if job["stage"] in jobs.FINAL:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not end within {timeout} s: {job}")


@pytest.mark.server_pages
def test_mlflow_server_help_lists_the_recsys_apps():
    out = subprocess.run([str(BIN / "mlflow"), "server", "--help"], capture_output=True, text=True, check=True).stdout
    choices = re.search(r"--app-name \[([^\]]+)\]", out).group(1).split("|")
    assert {"recsys", "recsys-auth"} <= set(choices)


@pytest.mark.server_pages
def test_compare_from_the_page_on_the_real_server_at_most_one_at_a_time(tmp_path):
    """Three comparisons posted at once to 4 worker processes run one after another (N = 1), and each logs a
    FINISHED comparison run whose forest plot the page shows."""
    with recsys_server(tmp_path, env={jobs.MAX_COMPARISONS_ENV: "1"}) as url:
        client = MlflowClient(tracking_uri=url)
        experiment_id = client.create_experiment("study")
        study = small_study(client, experiment_id, tmp_path / "local")
        browser = Browser(url)
        status, page, _ = browser.get(f"/recsys/experiments/{experiment_id}")
        assert status == 200 and page.count('name="run"') == 5
        token = csrf_token(page)
        selections = [
            (study["EASE"] + study["ELSA"] + study["Popularity"], {"reference": "EASE", "primary": "ndcg@100"}),
            (study["EASE"] + study["Popularity"], {}),
            (study["ELSA"] + study["Popularity"], {"metrics": ["recall@20"]}),
        ]
        job_ids = []
        for run_ids, fields in selections:
            posted = time.monotonic()
            status, page, final_url = browser.post(
                "/recsys/compare",
                {
                    "csrf_token": token,
                    "run": run_ids,
                    "experiment": experiment_id,
                    "correction": "holm",
                    "n_resamples": "999",
                    **fields,
                },
            )
            assert status == 200, page
            job_ids.append(final_url.rsplit("/", 1)[1])
        done = [wait_for_job(browser, j) for j in job_ids]
        elapsed = time.monotonic() - posted
        for job in done:
            assert job["stage"] == "done", job["error"]
        intervals = sorted((j["started"], j["finished"]) for j in done)
        # never two at once (strict=False: each interval meets the next, so the shifted list is one shorter)
        assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:], strict=False)), intervals
        first = done[0]
        assert [s for s, _ in first["history"] if s != "queued"] == [
            "selecting",
            "loading artifacts",
            "comparing",
            "logging",
            "done",
        ]
        run = client.get_run(first["result"]["run_id"])
        assert run.info.status == "FINISHED" and run.data.tags["recsys.role"] == "comparison"
        assert run.info.experiment_id == experiment_id
        assert set(run.data.tags["recsys.source_runs"].split(",")) == set(selections[0][0])
        assert run.data.tags.get("recsys.command") == "server-compare"
        files = {f.path for f in client.list_artifacts(run.info.run_id)}
        assert {"report.html", "report_table.json", "forest.png", "seed_spread.csv"} <= files
        status, page, _ = browser.get(f"/recsys/jobs/{first['id']}")
        assert f"#/experiments/{experiment_id}/runs/{run.info.run_id}" in page
        assert first["result"]["sentences"] and all(s in html.unescape(page) for s in first["result"]["sentences"])
        with urllib.request.urlopen(f"{url}/get-artifact?path=forest.png&run_uuid={run.info.run_id}") as r:
            assert r.read(8) == b"\x89PNG\r\n\x1a\n"
        # The comparison runs are listed on the experiment page, with status and result sentence.
        status, page, _ = browser.get(f"/recsys/experiments/{experiment_id}")
        assert page.count('<td class="status">FINISHED</td>') == 3
        print(
            f"one compare from the page, end to end: {first['finished'] - first['created']:.1f} s; "
            f"three one after another: {elapsed:.1f} s"
        )


@pytest.mark.server_pages
def test_recsys_auth_puts_basic_auth_in_front_of_the_pages_and_opens_them_to_admins_only(tmp_path, monkeypatch):
    env, password = _auth_env(tmp_path)
    with recsys_server(tmp_path, app_name="recsys-auth", env=env) as url:
        anonymous, admin = Browser(url), Browser(url, auth=("admin", password))
        for path in ("/recsys/", "/recsys/experiments/0", "/recsys/jobs/" + "0" * 32):
            assert anonymous.get(path)[0] == 401, path
        assert Browser(url, auth=("admin", "wrong")).get("/recsys/")[0] == 401
        status, page, _ = admin.get("/recsys/")
        assert status == 200 and "Experiments with training runs" in page
        request = urllib.request.Request(
            f"{url}/api/2.0/mlflow/users/create",
            method="POST",
            data=json.dumps({"username": "alice", "password": password + "x"}).encode(),
            headers={**admin.headers, "Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=60).close()
        status, page, _ = Browser(url, auth=("alice", password + "x")).get("/recsys/")
        assert status == 403  # basic-auth (fail-closed on unknown routes) or the pages themselves refuse
        assert anonymous.post("/recsys/compare", {"run": ["a", "b"]})[0] == 401
        # End to end as the admin: the comparison process logs through the server with the admin's credentials.
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
        client = MlflowClient(tracking_uri=url)
        experiment_id = client.create_experiment("guarded study")
        study = small_study(client, experiment_id, tmp_path / "local")
        status, page, _ = admin.get(f"/recsys/experiments/{experiment_id}")
        assert status == 200 and page.count('name="run"') == 5
        status, page, final_url = admin.post(
            "/recsys/compare",
            {
                "csrf_token": csrf_token(page),
                "run": study["EASE"] + study["Popularity"],
                "experiment": experiment_id,
                "correction": "holm",
                "n_resamples": "999",
            },
        )
        assert status == 200, page
        job = wait_for_job(admin, final_url.rsplit("/", 1)[1])
        assert job["stage"] == "done", job["error"]
        run = client.get_run(job["result"]["run_id"])
        assert run.info.status == "FINISHED" and run.info.experiment_id == experiment_id
        assert set(run.data.tags["recsys.source_runs"].split(",")) == set(study["EASE"] + study["Popularity"])


# -- issue 27: defaults, the comparisons list, origins, dead and cancelled jobs, bounds, links ------------------


def _study_run(client, experiment_id, *, primary: str, metrics: str) -> str:
    """A study run (`mlflow run .`, role main) with the params the main entry point logs."""
    run = client.create_run(experiment_id, tags={"recsys.role": "main"})
    for key, value in {"primary": primary, "metrics": metrics, "n_resamples": "9999"}.items():
        client.log_param(run.info.run_id, key, value)
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def _selected(page: str, select_id: str) -> list[str]:
    block = re.search(rf'<select name="\w+" id="{select_id}"[^>]*>(.*?)</select>', page, re.S).group(1)
    return [html.unescape(v) for v in re.findall(r'<option value="([^"]*)" selected>', block)]


def test_page_defaults_follow_declared_primary(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    assert _selected(page, "primary") == [] and _selected(page, "metrics") == []  # nothing declared: none chosen
    _study_run(client, experiment_id, primary="recall@20", metrics="recall@20, calibrated_recall@20")
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    # The declared primary and the declared metrics the runs logged (calibrated_recall@20 they did not).
    assert _selected(page, "primary") == ["recall@20"] and _selected(page, "metrics") == ["recall@20"]
    assert re.search(r'<strong id="shown-metric">recall@20</strong>', page)
    value = client.get_run(study["EASE"][0]).data.metrics["recall_at_20"]
    assert f"{value:.4f}" in page
    # The compare page opened from the UI's address has the same defaults.
    page = web.get("/recsys/compare?runs=" + json.dumps(study["EASE"])).get_data(as_text=True)
    assert _selected(page, "primary") == ["recall@20"]
    # Two study runs that disagree declare nothing.
    _study_run(client, experiment_id, primary="ndcg@100", metrics="ndcg@100")
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    assert _selected(page, "primary") == [] and _selected(page, "metrics") == []


def test_job_page_settings_show_the_actual_defaults(web, store):
    client, experiment_id, tmp = store
    job = jobs.new_job(
        tmp / "jobs",
        run_ids=["a" * 32, "b" * 32],
        settings={"reference": None, "primary": "ndcg@100", "metrics": None, "correction": "holm", "n_resamples": 999},
        experiment_ids=[experiment_id],
    )
    jobs.write_job(tmp / "jobs", {**job, "pid": os.getpid()})
    page = html.unescape(web.get(f"/recsys/jobs/{job['id']}").get_data(as_text=True))
    rows = dict(re.findall(r"<tr><th>(\w+)</th><td>([^<]*)</td></tr>", page))
    assert ">default<" not in page
    assert rows["reference"] == "none: every pair" and rows["metrics"] == "every metric the runs share"
    assert rows["primary"] == "ndcg@100" and rows["n_resamples"] == "999" and rows["correction"] == "holm"
    assert rows["confidence_level"] == "0.95" and rows["alternative"] == "two-sided" and rows["random_state"] == "0"
    assert rows["representative_seed"] == "lowest seed of each model"


def test_comparison_list_shows_every_candidates_primary_result(web, store, monkeypatch):
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking._comparison import compare_runs

    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    monkeypatch.setattr(mlflow, "get_tracking_uri", lambda: os.environ["_MLFLOW_SERVER_FILE_STORE"])
    mlflow.set_tracking_uri(os.environ["_MLFLOW_SERVER_FILE_STORE"])
    try:
        everything = compare_runs(
            run_ids=study["EASE"] + study["ELSA"] + study["Popularity"],
            settings=ComparisonSettings(reference="EASE", primary="ndcg@100", n_resamples=199),
        )
        pair = compare_runs(
            run_ids=study["EASE"] + study["ELSA"],
            settings=ComparisonSettings(reference="EASE", primary="recall@20", metrics=("recall@20",), n_resamples=199),
        )
    finally:
        mlflow.set_tracking_uri(None)
    rows = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}
    assert len(rows) == 2
    first = rows[everything.run_id]
    expected = _result_lines(everything, "ndcg@100")
    # Both candidates (Popularity and ELSA against EASE), representative seed and seed-averaged, each shown.
    candidates = {c.candidate for c in everything.report.comparisons if c.metric == "ndcg@100"}
    assert candidates == {"ELSA", "Popularity"}
    assert len(first.sentences) == 3
    for sentence in expected[:3]:
        assert any(sentence in shown for shown in first.sentences), (sentence, first.sentences)
    assert first.reference == "EASE" and first.primary == "ndcg@100" and first.metrics == "ndcg@100,recall@20"
    assert first.n_runs == "5" and first.n_resamples == "199" and first.date.endswith(" UTC")
    second = rows[pair.run_id]
    assert second.primary == "recall@20" and second.metrics == "recall@20" and second.n_runs == "4"
    page = html.unescape(web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True))
    assert page.count('<tr class="comparison">') == 2 and page.count('<td class="status">FINISHED</td>') == 2
    assert "td.status, td.date { white-space: nowrap" in page  # "FINISHED" never wraps
    for sentence in first.sentences + second.sentences:
        assert sentence in page


@pytest.mark.parametrize(
    "env, origin, accepted",
    [
        ({}, "https://mlflow.example.com", False),
        ({"MLFLOW_SERVER_CORS_ALLOWED_ORIGINS": "https://other.example.com, https://mlflow.example.com"}, None, True),
        ({"MLFLOW_RECSYS_SERVER_URL": "https://mlflow.example.com/tracking"}, None, True),
        ({"MLFLOW_SERVER_CORS_ALLOWED_ORIGINS": "*"}, None, False),  # names no site
        ({"MLFLOW_SERVER_CORS_ALLOWED_ORIGINS": "https://mlflow.example.com"}, "https://evil.example.com", False),
    ],
)
def test_a_compare_through_a_proxy_that_rewrites_host_is_accepted_from_allowed_origins(
    web, store, monkeypatch, env, origin, accepted
):
    client, experiment_id, tmp = store
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # nginx's default: the browser's page is https://mlflow.example.com, the upstream Host 127.0.0.1:5000.
    page = web.get(f"/recsys/experiments/{experiment_id}", headers={"Host": "127.0.0.1:5000"}).get_data(as_text=True)
    headers = {"Host": "127.0.0.1:5000", "Origin": origin or "https://mlflow.example.com"}
    data = {"csrf_token": csrf_token(page), "run": [], "experiment": experiment_id}
    response = web.post("/recsys/compare", data=data, headers=headers)
    text = response.get_data(as_text=True)
    if accepted:
        assert response.status_code == 400 and "at least two ticked runs" in text  # past the origin check
    else:
        assert response.status_code == 403 and "another site" in text


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_job_ends_its_comparison_run_killed_and_stale_runs_are_marked(web, store):
    client, experiment_id, tmp = store
    folder = tmp / "jobs"
    job = jobs.new_job(folder, run_ids=["a" * 32, "b" * 32], settings={}, experiment_ids=[experiment_id])
    jobs.write_job(folder, {**job, "stage": "logging", "pid": _dead_pid()})  # SIGKILLed while logging
    left = client.create_run(
        experiment_id,
        tags={"recsys.role": "comparison", "recsys.server_job": job["id"], "recsys.result": "ELSA beat EASE."},
    ).info.run_id
    live = jobs.new_job(folder, run_ids=["a" * 32, "b" * 32], settings={}, experiment_ids=[experiment_id])
    jobs.write_job(folder, {**live, "stage": "comparing", "pid": os.getpid()})
    running = client.create_run(
        experiment_id, tags={"recsys.role": "comparison", "recsys.server_job": live["id"]}
    ).info.run_id
    old = int((time.time() - 7 * 3600) * 1000)  # a `mlflow-recsys compare` killed 7 hours ago
    cli = client.create_run(
        experiment_id, start_time=old, tags={"recsys.role": "comparison", "recsys.result": "Pop beat EASE."}
    ).info.run_id
    state = json.loads(web.get(f"/recsys/jobs/{job['id']}.json").data)
    assert state["stage"] == "failed" and "ended without a result" in state["error"]
    run = client.get_run(left)
    assert run.info.status == "KILLED" and "ended without a result" in run.data.tags["recsys.error"]
    assert json.loads((folder / f"{job['id']}.json").read_text())["stage"] == "failed"  # settled once, on file
    rows = {r.run_id: r for r in listing.comparisons(client, [experiment_id], live_jobs=frozenset([live["id"]]))}
    assert rows[left].status == "KILLED" and rows[left].sentences == [run.data.tags["recsys.error"]]
    assert rows[running].status == "RUNNING" and rows[running].stale == ""
    assert rows[cli].stale.startswith("stale: started 7 h ago") and rows[cli].sentences == []
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    assert page.count('<span class="stale">') == 1 and "Pop beat EASE." not in page
    # A page job's RUNNING run whose job is gone from this server is stale.
    gone = client.create_run(
        experiment_id, tags={"recsys.role": "comparison", "recsys.server_job": "f" * 32}
    ).info.run_id
    rows = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}
    assert rows[gone].stale == "stale: its comparison job on this server is not running"


#: The issue's nine metrics: what the train entry point logs by default.
NINE = ("ndcg@100", "calibrated_recall@20", "recall@20", "mrr@20", "map@20", "ndcg@20", "recall@50", "mrr@10", "map@10")


def _metadata_run(client, experiment_id: str, model: str, seed: str) -> str:
    """A FINISHED training run with the nine aggregate metrics logged and no artifacts: enough for every check
    made before an artifact is read."""
    from mlflow_recsys.tracking._naming import mlflow_metric_name

    tags = {
        "recsys.role": "train",
        "recsys.model": model,
        "recsys.seed": seed,
        "recsys.split_digest": "d" * 64,
        "recsys.targets_fingerprint": "f" * 64,
    }
    run = client.create_run(experiment_id, tags=tags)
    now = int(time.time() * 1000)
    client.log_batch(run.info.run_id, metrics=[Metric(mlflow_metric_name(k), 0.5, now, 0) for k in NINE])
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def test_the_replicate_bound_counts_every_report_a_job_keeps(web, store):
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.stats._comparison import MAX_REPLICATE_BYTES
    from mlflow_recsys.tracking._comparison import check_selection

    client, experiment_id, tmp = store
    # The case: 20 candidates x 2 seeds x 9 metrics at B = 1,000,000, every candidate against M00.
    seeded = [_metadata_run(client, experiment_id, f"M{i:02d}", str(s)) for i in range(20) for s in (0, 1)]
    settings = ComparisonSettings(reference="M00", n_resamples=1_000_000)
    one_report = 16 * 1_000_000 * 19 * 9  # 2.55 GiB: what the bound counted before
    assert one_report <= MAX_REPLICATE_BYTES < 2 * one_report
    with pytest.raises(ValueError, match=r"342 hypotheses would keep 5\.1 GiB of replicates") as caught:
        check_selection(run_ids=seeded, settings=settings, client=client)
    assert "at most 4 GiB" in str(caught.value)
    # The page refuses it before any job starts.
    response = post_compare(web, experiment_id, seeded, reference="M00", n_resamples="1000000")
    text = html.unescape(response.get_data(as_text=True))
    assert response.status_code == 400 and "5.1 GiB of replicates" in text and not list((tmp / "jobs").glob("*.json"))
    # Without seeds one report is kept, and the same selection size passes.
    unseeded = [_metadata_run(client, experiment_id, f"N{i:02d}", "none") for i in range(20)]
    assert len(check_selection(run_ids=unseeded, settings=settings.replace(reference="N00"), client=client)) == 20


class RunCountingClient(CountingClient):
    def __init__(self, uri):
        super().__init__(uri)
        self.calls["get_run"] = 0

    def get_run(self, run_id):
        self.calls["get_run"] += 1
        return super().get_run(run_id)


def test_selection_checks_are_paged_queries_not_one_request_per_run(store):
    from mlflow_recsys.tracking._comparison import check_selection

    client, experiment_id, tmp = store
    ids = [_metadata_run(client, experiment_id, f"M{i % 2}", str(i)) for i in range(250)]
    counting = RunCountingClient(os.environ["_MLFLOW_SERVER_FILE_STORE"])
    runs = check_selection(run_ids=ids, client=counting)
    assert [r.info.run_id for r in runs] == ids  # in the order given
    assert counting.calls["get_run"] == 0 and counting.calls["search_runs"] == 3  # 100 ids a query
    missing = "0" * 32
    with pytest.raises(RunSelectionError, match=f"run '{missing}' was not found"):
        check_selection(run_ids=ids[:5] + [missing], client=counting)


def test_cancel_ends_the_job_failed_with_who_cancelled_it(web, store):
    client, experiment_id, tmp = store
    folder = tmp / "jobs"
    job = jobs.new_job(folder, run_ids=["a" * 32, "b" * 32], settings={}, experiment_ids=[experiment_id])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    jobs.write_job(folder, {**job, "stage": "comparing", "pid": sleeper.pid})
    page = web.get(f"/recsys/jobs/{job['id']}").get_data(as_text=True)
    assert 'id="cancel"' in page
    response = web.post(f"/recsys/jobs/{job['id']}/cancel", data={"csrf_token": csrf_token(page)})
    assert response.status_code == 303
    assert sleeper.wait(10) == -10  # the cancel signal (SIGUSR1) reached the job's process
    assert jobs.cancel_reason(folder, job["id"]) == "cancelled from the recsys page by a user of this server"
    assert web.post(f"/recsys/jobs/{job['id']}/cancel", data={}).status_code == 400  # no CSRF token
    # A job not yet started is ended on file; an ended one cannot be cancelled.
    queued = jobs.new_job(folder, run_ids=["a" * 32, "b" * 32], settings={}, experiment_ids=[])
    jobs.write_job(folder, {**queued, "pid": os.getpid()})
    jobs.record_launch(folder, queued["id"], os.getpid())
    from mlflow_recsys.server import _runner as runner

    runner.cancel(folder, {**queued, "pid": None}, by="admin")
    state = jobs.read_job(folder, queued["id"])
    assert state["stage"] == "failed" and state["error"] == "Terminated: cancelled from the recsys page by admin"
    assert web.post(f"/recsys/jobs/{queued['id']}/cancel", data={"csrf_token": csrf_token(page)}).status_code == 409


@pytest.mark.parametrize("raw", ["abc", "0", "604801"])
def test_the_job_time_limit_is_validated(monkeypatch, raw):
    monkeypatch.setenv(jobs.TIME_LIMIT_ENV, raw)
    with pytest.raises(ValueError, match=jobs.TIME_LIMIT_ENV) as caught:
        jobs.time_limit()
    assert repr(raw) in str(caught.value)
    monkeypatch.setenv(jobs.TIME_LIMIT_ENV, "90")
    assert jobs.time_limit() == 90
    monkeypatch.delenv(jobs.TIME_LIMIT_ENV)
    assert jobs.time_limit() == 3600


def test_the_suite_writes_only_to_temporary_folders(store, tmp_path):
    from conftest import ROOT, new_in_working_tree, working_tree_state

    client, experiment_id, tmp = store
    before = working_tree_state()
    # An experiment without an artifact location: its artifacts land under ./mlruns of the test's folder.
    bare = client.create_experiment("no artifact location")
    log_training_run(client, bare, tmp / "local", model="EASE", seed=None, n_users=20)
    assert Path(urllib.parse.urlparse(client.get_experiment(bare).artifact_location).path).is_relative_to(tmp_path)
    assert new_in_working_tree(before, working_tree_state()) == []
    assert not (ROOT / "mlruns").exists()
    # The check sees a file written into a checkout, and into a folder that is no checkout.
    for folder in (tmp_path / "checkout", tmp_path / "plain"):
        folder.mkdir()
        if folder.name == "checkout":
            subprocess.run(["git", "init", "-q", str(folder)], check=True)
        start = working_tree_state(folder)
        (folder / "mlruns" / "1").mkdir(parents=True)
        (folder / "mlruns" / "1" / "meta.yaml").write_text("x")
        assert any("mlruns" in entry for entry in new_in_working_tree(start, working_tree_state(folder))), folder


# -- the job's own process: killed, cancelled, past its time limit --------------------------------------------


def _launch_job(store, run_ids: list[str], **settings) -> tuple[dict, subprocess.Popen]:
    """Start a page job's real process over the store (as Compare does, with the store's URI for the server's)."""
    from mlflow_recsys.server import _runner as runner

    client, experiment_id, tmp = store
    chosen = {"reference": None, "primary": None, "metrics": None, "correction": "holm", "n_resamples": 999}
    job = jobs.new_job(tmp / "jobs", run_ids=run_ids, settings={**chosen, **settings}, experiment_ids=[experiment_id])
    return job, runner.launch(tmp / "jobs", job, tracking_uri=os.environ["_MLFLOW_SERVER_FILE_STORE"])


def _wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"{what} within {timeout} s")


def test_a_sigkilled_page_job_ends_its_comparison_run_killed(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    job, proc = _launch_job(store, study["EASE"] + study["ELSA"] + study["Popularity"], reference="EASE")

    def running_run():
        found = client.search_runs(
            [experiment_id], filter_string=f"tags.`recsys.server_job` = '{job['id']}' and attributes.status = 'RUNNING'"
        )
        return found[0] if found else None

    run = _wait_until(running_run, 120, "no RUNNING comparison run appeared")
    proc.kill()  # SIGKILL: no handler runs, the run stays RUNNING
    proc.wait(30)
    assert client.get_run(run.info.run_id).info.status == "RUNNING"
    page = html.unescape(web.get(f"/recsys/jobs/{job['id']}").get_data(as_text=True))
    assert "ended without a result" in page
    ended = client.get_run(run.info.run_id)
    assert ended.info.status == "KILLED" and ended.data.tags["recsys.error"].startswith("Killed: the comparison")
    listed = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}[run.info.run_id]
    assert listed.status == "KILLED" and listed.stale == "" and listed.sentences == [ended.data.tags["recsys.error"]]


def test_cancel_and_the_time_limit_stop_a_page_job_and_say_why(web, store, monkeypatch):
    client, experiment_id, tmp = store
    models = [
        log_training_run(client, experiment_id, tmp, model=f"M{i}", seed=None, shift=0.01 * i, rng_seed=i)
        for i in range(6)
    ]
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    job, proc = _launch_job(store, models, n_resamples=1_000_000)  # 15 pairs x 2 metrics at B = 10**6: minutes
    _wait_until(lambda: jobs.read_job(tmp / "jobs", job["id"])["stage"] == "comparing", 120, "not comparing")
    cancelled = time.monotonic()
    response = web.post(f"/recsys/jobs/{job['id']}/cancel", data={"csrf_token": csrf_token(page)})
    assert response.status_code == 303
    proc.wait(60)
    print(f"a cancelled job ended {time.monotonic() - cancelled:.1f} s after Cancel")
    state = jobs.read_job(tmp / "jobs", job["id"])
    assert state["stage"] == "failed"
    assert state["error"] == "Terminated: cancelled from the recsys page by a user of this server"
    assert client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'") == []
    # The time limit: counted from the moment the job holds a slot.
    monkeypatch.setenv(jobs.TIME_LIMIT_ENV, "2")
    job, proc = _launch_job(store, models, n_resamples=1_000_000)
    started = time.monotonic()
    proc.wait(120)
    state = jobs.read_job(tmp / "jobs", job["id"])
    print(f"a job past its 2 s limit ended after {time.monotonic() - started:.1f} s")
    assert state["stage"] == "failed" and f"the time limit of the page's jobs ({jobs.TIME_LIMIT_ENV})" in state["error"]
    assert state["error"].startswith("Terminated: stopped after 2 s")


def _auth_env(root: Path) -> tuple[dict, str]:
    """What `--app-name recsys-auth` needs: a basic-auth config, the admin password and the secret key."""
    password = "Recsys-Adm1n-Passw0rd-For-Tests"
    config = root / "auth.ini"
    config.write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{root}/auth.db\nadmin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    env = {
        "MLFLOW_AUTH_CONFIG_PATH": str(config),
        "MLFLOW_AUTH_ADMIN_PASSWORD": password,
        SECRET_KEY_ENV: "recsys-test-secret",
    }
    return env, password


def _cors_headers(url: str, auth: tuple[str, str] | None, origin: str) -> dict:
    headers = {"Origin": origin}
    if auth:
        import base64

        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
        return {k.lower(): v for k, v in r.headers.items() if k.lower().startswith("access-control-allow-")}


@pytest.mark.server_pages
@pytest.mark.parametrize("app_name", ["recsys", "recsys-auth"])
def test_cors_headers_are_stripped_from_the_pages_under_both_apps(tmp_path, monkeypatch, app_name):
    from mlflow_recsys.tracking._server_page import recsys_page_url

    env, password = _auth_env(tmp_path) if app_name == "recsys-auth" else ({}, None)
    auth = ("admin", password) if password else None
    foreign = "http://localhost:9999"  # another local page: MLflow's CORS answers localhost with credentials
    with recsys_server(tmp_path, app_name=app_name, env=env) as url:
        # The API answers the foreign origin with credentials: the header really is sent, and only stripped below.
        api = _cors_headers(f"{url}/api/2.0/mlflow/experiments/search?max_results=1", auth, foreign)
        assert api.get("access-control-allow-origin") == foreign and api.get("access-control-allow-credentials")
        for path in ("/recsys/", "/recsys/experiments/0"):
            assert _cors_headers(url + path, auth, foreign) == {}, (app_name, path)
        # The server has the pages: comparison notes and the study's text link to them.
        if auth:
            monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
            monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
        assert recsys_page_url("0", url) == f"{url}/recsys/experiments/0"
        if auth:
            monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong")
            assert recsys_page_url("0", url) is None  # refused: no page this user can open


@pytest.mark.server_pages
def test_comparison_notes_link_to_the_recsys_page_when_the_server_has_one(tmp_path, mlflow_server, monkeypatch):
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking._comparison import compare_runs
    from mlflow_recsys.tracking._server_page import SERVER_URL_ENV, recsys_page_url

    monkeypatch.delenv(SERVER_URL_ENV, raising=False)
    assert recsys_page_url("1", mlflow_server) is None  # a plain `mlflow server`: no pages
    assert recsys_page_url("1", f"sqlite:///{tmp_path}/x.db") is None  # a database: no server
    monkeypatch.setenv(SERVER_URL_ENV, "https://user:pw@mlflow.example.com/")
    assert recsys_page_url("7", mlflow_server) == "https://mlflow.example.com/recsys/experiments/7"
    monkeypatch.delenv(SERVER_URL_ENV)
    with recsys_server(tmp_path) as url:
        client = MlflowClient(tracking_uri=url)
        experiment_id = client.create_experiment("linked")
        study = small_study(client, experiment_id, tmp_path / "local")
        mlflow.set_tracking_uri(url)
        try:
            outcome = compare_runs(
                run_ids=study["EASE"] + study["Popularity"], settings=ComparisonSettings(n_resamples=199)
            )
        finally:
            mlflow.set_tracking_uri(None)
        note = client.get_run(outcome.run_id).data.tags["mlflow.note.content"]
        link = f"{url}/recsys/experiments/{experiment_id}"
        assert note.endswith(f"Compare these and other runs on the server's page: {link}")
        with urllib.request.urlopen(link, timeout=60) as r:
            assert r.status == 200 and outcome.run_id in r.read().decode()


def test_the_demo_prints_both_commands_for_its_store(tmp_path, monkeypatch):
    from mlflow_recsys.tracking import _study as study
    from mlflow_recsys.tracking._server_page import SERVER_URL_ENV

    monkeypatch.delenv(SERVER_URL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    mlflow.set_tracking_uri("sqlite:///mlruns.db")  # the demo's store, relative to the project folder
    try:
        text = study._ui_hint("c" * 32, "3")
    finally:
        mlflow.set_tracking_uri(None)
    store = f"sqlite:///{tmp_path}/mlruns.db"
    assert f"ui --backend-store-uri {store} --port 5000" in text
    assert f"server --app-name recsys --backend-store-uri {store} --port 5000" in text
    assert text.endswith("then open http://127.0.0.1:5000/recsys/experiments/3")
    # Against a server with the pages, its page is named.
    monkeypatch.setenv(SERVER_URL_ENV, "https://mlflow.example.com")
    mlflow.set_tracking_uri("https://mlflow.example.com")
    try:
        text = study._ui_hint("c" * 32, "3")
    finally:
        mlflow.set_tracking_uri(None)
    assert text.endswith("compare them again on https://mlflow.example.com/recsys/experiments/3")


# -- issue 27, points A3 and A5 on the server pages --------------------------------------------------------------


def _compare_in_store(run_ids: list[str], **settings):
    """``compare_runs`` into the test store (the server's backend store)."""
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking._comparison import compare_runs

    mlflow.set_tracking_uri(os.environ["_MLFLOW_SERVER_FILE_STORE"])
    try:
        return compare_runs(run_ids=run_ids, settings=ComparisonSettings(**settings))
    finally:
        mlflow.set_tracking_uri(None)


def _result_lines(outcome, metric: str) -> list[str]:
    """The primary metric's result sentences, primary analysis first, labelled when there are two: built here from
    the outcome, independently of the notes and of the page."""
    analyses = [("representative-seed", outcome.report)]
    if outcome.seed_averaged is not None:
        analyses.append(("seed-averaged", outcome.seed_averaged))
    analyses.sort(key=lambda pair: pair[0] != outcome.primary_analysis)
    seeded = {
        (c.baseline, c.candidate) for c in (outcome.seed_averaged or outcome.report).comparisons if c.averages_seeds
    }
    lines = []
    for kind, report in analyses:
        primary = kind == outcome.primary_analysis
        label = f"{'Primary' if primary else 'Sensitivity'} analysis: {kind} comparison. " if len(analyses) == 2 else ""
        lines += [
            label + report.results_text(metric, c.candidate, c.baseline)
            for c in report.comparisons
            # every pair in the primary analysis; in the other only those whose seeds make it differ
            if c.metric == metric and (primary or (c.baseline, c.candidate) in seeded)
        ]
    return lines


def test_the_comparisons_list_shows_only_result_sentences_whatever_notes_were_logged(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    others = [
        log_training_run(client, experiment_id, tmp, model=f"Model{i}", seed=None, shift=0.005 * i, rng_seed=20 + i)
        for i in range(3)
    ]
    outcome = _compare_in_store(
        study["EASE"] + study["ELSA"] + study["Popularity"] + others,
        reference="EASE",
        primary="ndcg@100",
        n_resamples=199,
    )
    note = client.get_run(outcome.run_id).data.tags["mlflow.note.content"]
    # The sentences come before the seeds, the provenance bullets and the caption of the table. Three more models keep
    # every result sentence and the seed sentence within the notes' paragraph budget whatever the resampled numbers
    # (about 3,600 of its 4,000 characters), so the listing must stop at the seeds.
    assert "What was compared" not in note and "\n- Runs in the table: " in note
    assert "Primary analysis: seed-averaged comparison (the sensitivity analysis is in report.md):" in note
    assert "**Seeds (" in note
    expected = _result_lines(outcome, "ndcg@100")
    assert len(expected) == 5 + 1  # five candidates against EASE, and ELSA's representative-seed sentence
    assert all(s.startswith("Primary analysis: seed-averaged comparison. ") for s in expected[:5])
    assert sum("Averaged over training seeds (ELSA: 3" in s for s in expected[:5]) == 1
    assert expected[5].startswith("Sensitivity analysis: representative-seed comparison. ELSA")
    row = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}[outcome.run_id]
    assert row.sentences == expected
    page = html.unescape(web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True))
    cell = re.search(r'<tr class="comparison">.*?</tr>', page, re.S).group(0)
    assert re.findall(r'<p class="sentence">(.*?)</p>', cell, re.S) == expected
    assert "Seeds" not in cell and "Dataset" not in cell and "report.md" not in cell


def test_note_sentences_stop_at_the_first_paragraph_that_is_no_result_sentence():
    end = "n = 300 users, of whom 290 scored differently)."
    note = (
        "## Paired comparison\n\nPrimary metric (chosen at comparison time): **ndcg@100**.\n\n"
        f"**Primary analysis: seed-averaged comparison.** ELSA\\_2 beat **EASE** &lt;b&gt; ({end}\n\n"
        f"Pop scored less than EASE ({end}\n\n"
        "**Seeds (EASE vs ELSA)**: ELSA ranges.\n\n- Dataset: synthetic\n\n"
        f"Primary analysis: seed-averaged comparison (the sensitivity analysis is in report.md):\n\n| a | b |\n\n{end}"
    )
    assert listing.note_sentences(note) == [
        f"Primary analysis: seed-averaged comparison. ELSA_2 beat EASE <b> ({end}",
        f"Pop scored less than EASE ({end}",
    ]
    assert listing.note_sentences("## Paired comparison\n\n| a | b |") == []
    # Compact notes that dropped the sentences hold none: the row then shows the headline.
    dropped = (
        "## Paired comparison\n\nPrimary metric (x): **ndcg@100**.\n\nThe seed-spread sentences are in report.html."
    )
    assert listing.note_sentences(dropped) == []


def test_job_page_names_the_primary_analysis_first_and_the_sensitivity_analysis_second(web, store, monkeypatch):
    from mlflow_recsys.server import _runner as runner

    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    run_ids = study["EASE"] + study["ELSA"] + study["Popularity"]
    settings = {"reference": "EASE", "primary": "ndcg@100", "metrics": None, "correction": "holm", "n_resamples": 199}
    folder = tmp / "jobs"
    job = jobs.new_job(folder, run_ids=run_ids, settings=settings, experiment_ids=[experiment_id])
    mlflow.set_tracking_uri(os.environ["_MLFLOW_SERVER_FILE_STORE"])
    try:
        done = runner.run_job(folder, job["id"])
    finally:
        mlflow.set_tracking_uri(None)
    assert done["stage"] == "done", done.get("error")
    outcome = _compare_in_store(run_ids, reference="EASE", primary="ndcg@100", n_resamples=199)  # the same again
    expected = _result_lines(outcome, "ndcg@100")
    assert [s.split(". ")[0] for s in expected] == [
        "Primary analysis: seed-averaged comparison",
        "Primary analysis: seed-averaged comparison",
        "Sensitivity analysis: representative-seed comparison",
    ]
    page = html.unescape(web.get(f"/recsys/jobs/{job['id']}").get_data(as_text=True))
    shown = re.findall(r'<p class="sentence">(.*?)</p>', page, re.S)
    assert shown[:3] == expected and len(shown) == 3 + len(outcome.seed_spreads)
    # The notes label them the same way.
    note = client.get_run(done["result"]["run_id"]).data.tags["mlflow.note.content"]
    assert listing.note_sentences(note) == expected
    rows = dict(re.findall(r"<tr><th>(\w+)</th><td>([^<]*)</td></tr>", page))
    assert rows["primary_analysis"] == "auto: seed-averaged" and rows["paired_seeds"] == "no"


def test_job_settings_show_the_resolved_analysis_and_booleans_in_words():
    from mlflow_recsys.server._selection import shown_settings

    form = {"reference": None, "primary": None, "metrics": None, "correction": "holm", "n_resamples": 999}
    before = dict(shown_settings(form))
    assert before["primary_analysis"] == "auto" and before["paired_seeds"] == "no"
    assert "False" not in before.values() and "True" not in before.values()
    assert dict(shown_settings(form, primary_analysis_used="seed-averaged"))["primary_analysis"] == (
        "auto: seed-averaged"
    )
    assert dict(shown_settings(form, primary_analysis_used="representative-seed"))["primary_analysis"] == (
        "auto: representative-seed"
    )


def test_a_comparison_run_without_params_shows_its_settings_as_not_logged(web, store):
    client, experiment_id, _ = store
    base = {"recsys.role": "comparison", "recsys.n_source_runs": "4"}
    running = client.create_run(experiment_id, tags=base).info.run_id  # cut off before its end
    # Killed between its tags and its params: notes and headline are there, its settings are not.
    note = "## Paired comparison\n\nPrimary metric (x): **ndcg@100**.\n\nB beat A (3, of whom 2 scored differently)."
    killed = client.create_run(
        experiment_id, tags={**base, "recsys.result": "B beat A early.", "mlflow.note.content": note}
    ).info.run_id
    client.set_terminated(killed, "KILLED")
    rows = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}
    for run_id in (running, killed):
        row = rows[run_id]
        assert (row.reference, row.primary, row.metrics, row.n_resamples) == ("not logged",) * 4
        assert row.n_runs == "4" and row.sentences == []
    page = html.unescape(web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True))
    cells = re.findall(r'<tr class="comparison">.*?</tr>', page, re.S)
    assert len(cells) == 2
    for cell in cells:
        assert re.findall(r"<td>([^<]*)</td><td>([^<]*)</td>", cell)[0] == ("not logged", "not logged")
        assert "every pair" not in cell and ">none<" not in cell and '<p class="sentence">' not in cell
    assert "B beat A" not in page
    # A run that logged its params shows their meaning: every pair, no primary metric.
    client.log_param(killed, "reference", "None")
    client.log_param(killed, "primary", "None")
    row = {r.run_id: r for r in listing.comparisons(client, [experiment_id])}[killed]
    assert (row.reference, row.primary, row.metrics) == ("every pair", "none", "not logged")


def test_the_form_takes_a_hypothesis_with_its_margin_and_refuses_a_margin_without_one(web, store):
    client, experiment_id, tmp = store
    study = small_study(client, experiment_id, tmp)
    page = web.get(f"/recsys/experiments/{experiment_id}").get_data(as_text=True)
    assert '<select name="hypothesis" id="hypothesis">' in page and 'name="margin"' in page
    run_ids = study["EASE"] + study["Popularity"]
    fields = {"reference": "Popularity", "hypothesis": "non-inferiority", "margin": "0.05", "relative_margin": "true"}
    response = post_compare(web, experiment_id, run_ids, **fields)
    assert response.status_code == 303, response.get_data(as_text=True)[:2000]
    (job,) = [json.loads(p.read_text()) for p in (tmp / "jobs").glob("*.json")]
    assert {k: job["settings"][k] for k in ("hypothesis", "margin", "relative_margin")} == {
        "hypothesis": "non-inferiority",
        "margin": 0.05,
        "relative_margin": True,
    }
    refused = post_compare(web, experiment_id, run_ids, reference="Popularity", margin="0.05")
    text = html.unescape(refused.get_data(as_text=True))
    assert refused.status_code == 400 and "margin: expected no margin with hypothesis 'superiority'" in text


def test_a_stop_signal_lost_in_a_finaliser_still_stops_the_job_at_its_next_stage():
    # Python reports, and drops, an exception raised in a __del__: a Cancel landing there would go unheard, and the
    # job would run on to "done". The handler records the reason too, and the job asks again at each stage.
    import gc
    import signal

    from mlflow_recsys.server._runner import CANCEL_SIGNAL, Stop

    stop, lost = Stop(), []

    class Finalised:
        def __del__(self):
            os.kill(os.getpid(), CANCEL_SIGNAL)
            for _ in range(10_000):  # the handler runs between these bytecodes, inside the finaliser
                pass

    previous = signal.signal(CANCEL_SIGNAL, stop.handler(lambda signum: f"cancelled ({signal.Signals(signum).name})"))
    unraisable = sys.unraisablehook
    sys.unraisablehook = lambda info: lost.append(info.exc_type)
    try:
        stop.check()  # nothing recorded yet
        Finalised()
        gc.collect()
    finally:
        sys.unraisablehook = unraisable
        signal.signal(CANCEL_SIGNAL, previous)
    assert lost == [Terminated]  # raised, and lost
    with pytest.raises(Terminated, match=r"^cancelled \(SIGUSR1\)$"):
        stop.check()


def test_a_stop_signal_wrapped_by_compiled_code_still_says_why_the_job_stopped(tmp_path):
    # A handler's Terminated raised inside a numba kernel's return comes back as "SystemError: CPUDispatcher(...)
    # returned a result with an exception set": the job records the signal's reason, not that.
    from mlflow_recsys.server import _runner as runner

    folder = tmp_path / "jobs"
    folder.mkdir()
    job = jobs.new_job(folder, run_ids=["a" * 32], settings={}, experiment_ids=["0"])
    stop = runner.Stop()

    def signal_lands_in_a_kernel():
        stop.reason = "stopped after 2 s, the time limit of the page's jobs"
        raise SystemError("CPUDispatcher(<function bootstrap_sums>) returned a result with an exception set")

    with pytest.raises(Terminated):
        runner.run_job(folder, job["id"], on_start=signal_lands_in_a_kernel, stop=stop)
    assert jobs.read_job(folder, job["id"])["error"] == f"Terminated: {stop.reason}"
    other = jobs.new_job(folder, run_ids=["a" * 32], settings={}, experiment_ids=["0"])

    def fails():
        raise SystemError("a fault of its own")

    assert runner.run_job(folder, other["id"], on_start=fails, stop=runner.Stop())["error"] == (
        "SystemError: a fault of its own"
    )
