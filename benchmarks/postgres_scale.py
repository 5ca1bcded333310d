"""Scale against a tracking server on PostgreSQL: 200 training runs selected and compared, 20,000 selected by paging.

    .venv/bin/python benchmarks/postgres_scale.py [--models 10] [--seeds 20] [--users 943] [--paging-runs 20000]
        [--profile]

Starts Debian's PostgreSQL in a temporary folder (``tests/postgres_cluster.py``: ``initdb`` / ``pg_ctl``, with
PostgreSQL's default durability) and ``mlflow server --backend-store-uri postgresql+psycopg2://...
--artifacts-destination <dir>`` on 127.0.0.1, so artifacts are proxied (``mlflow-artifacts:/``). Then:

1. Logs models x seeds synthetic training runs over HTTP, each with MovieLens-100k-sized per-user artifacts
   (943 users, five metrics, written by ``write_evaluation_artifacts``), and times ``compare_runs`` selecting them
   by experiment (B = 9,999, the default) in a fresh process: each stage, the peak resident memory of that
   process, and the most runs' artifact downloads in flight at once (a bounded pool of
   ``$MLFLOW_RECSYS_DOWNLOAD_THREADS`` threads, default 8; set the variable to try other sizes). ``--profile``
   prints cProfile's busiest functions of that process.
2. Inserts ``--paging-runs`` training runs into another experiment through MLflow's own tables in the same
   database (the REST API creates a run in several requests; these rows are what ``create_run``,
   ``set_tag`` and ``log_metric`` write), and times ``select_runs`` reading them all through ``search_runs``
   pages, and a filtered selection, again in a fresh process.

Prints figures; asserts only that the selections found every run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import resource
import sys
import tempfile
import threading
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mlflow_recsys.stats import ComparisonSettings
from postgres_cluster import postgres_cluster  # noqa: E402

PROFILE_ROWS = 25  # functions printed by --profile, by cumulative time
KEYS = ["ndcg@100", "calibrated_recall@20", "recall@20", "mrr@20", "map@20"]
DIGEST, FINGERPRINT = "b" * 64, "c" * 64


def _tags(model: str, seed: int) -> dict[str, str]:
    return {
        "recsys.role": "train",
        "recsys.model": model,
        "recsys.seed": str(seed),
        "recsys.split_digest": DIGEST,
        "recsys.targets_fingerprint": FINGERPRINT,
        "recsys.dataset": "synthetic-ml-100k",
        "recsys.config": json.dumps({"latent_dim": 64}),
        "mlflow.runName": f"{model} seed {seed}",
    }


def log_study(url: str, n_models: int, n_seeds: int, n_users: int, root: Path) -> str:
    """models x seeds FINISHED training runs with per-user artifacts, logged over HTTP; returns the experiment id."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from mlflow_recsys.evaluation import EvaluationResult
    from mlflow_recsys.tracking import mlflow_metric_name, write_evaluation_artifacts

    client = MlflowClient(tracking_uri=url)
    experiment_id = client.create_experiment("scale-200")
    rng = np.random.default_rng(0)
    base = {k: rng.beta(2, 5, n_users) for k in KEYS}
    ids = np.arange(1, n_users + 1)

    def one(i: int) -> None:
        model, seed = f"M{i // n_seeds}", i % n_seeds
        noise = np.random.default_rng(i)
        values = {
            k: np.clip(v + 0.004 * (i // n_seeds) + noise.normal(0, 0.03, n_users), 0, 1) for k, v in base.items()
        }
        result = EvaluationResult.from_per_user(values, sample_ids=ids, targets_fingerprint=FINGERPRINT)
        folder = root / f"run{i}"
        write_evaluation_artifacts(result, folder, split_digest=DIGEST)
        run = client.create_run(experiment_id, tags=_tags(model, seed))
        now = int(time.time() * 1000)
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(mlflow_metric_name(k), float(np.mean(v)), now, 0) for k, v in values.items()],
        )
        client.log_artifacts(run.info.run_id, str(folder))
        client.set_terminated(run.info.run_id, "FINISHED")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n_models * n_seeds)))
    return experiment_id


def insert_runs(store_uri: str, url: str, n_runs: int, n_models: int = 10) -> str:
    """``n_runs`` FINISHED training runs in a new experiment, written to MLflow's tables in bulk."""
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlParam, SqlRun, SqlTag
    from mlflow.tracking import MlflowClient

    experiment_id = MlflowClient(tracking_uri=url).create_experiment("scale-paging")
    engine = sa.create_engine(store_uri)
    now = int(time.time() * 1000)
    rng = np.random.default_rng(1)
    chunk = 2000
    try:
        for start in range(0, n_runs, chunk):
            runs, tags, metrics, params = [], [], [], []
            for i in range(start, min(start + chunk, n_runs)):
                run_id = uuid.uuid4().hex
                model, seed = f"M{i % n_models}", i // n_models
                runs.append(
                    {
                        "run_uuid": run_id,
                        "name": f"{model} seed {seed}",
                        "source_type": "UNKNOWN",
                        "source_name": "",
                        "entry_point_name": "",
                        "user_id": "bench",
                        "status": "FINISHED",
                        "start_time": now - 1000 + i,
                        "end_time": now + i,
                        "deleted_time": None,
                        "source_version": "",
                        "lifecycle_stage": "active",
                        "artifact_uri": f"mlflow-artifacts:/{experiment_id}/{run_id}/artifacts",
                        "experiment_id": int(experiment_id),
                    }
                )
                tags += [{"key": k, "value": v, "run_uuid": run_id} for k, v in _tags(model, seed).items()]
                metrics += [
                    {
                        "key": "ndcg_at_100",
                        "value": float(rng.random()),
                        "timestamp": now,
                        "step": 0,
                        "is_nan": False,
                        "run_uuid": run_id,
                    }
                ]
                params += [{"key": "latent_dim", "value": "64", "run_uuid": run_id}]
            with engine.begin() as connection:
                connection.execute(sa.insert(SqlRun.__table__), runs)
                connection.execute(sa.insert(SqlTag.__table__), tags)
                connection.execute(sa.insert(SqlLatestMetric.__table__), metrics)
                connection.execute(sa.insert(SqlParam.__table__), params)
    finally:
        engine.dispose()
    return experiment_id


# -- the timed parts, each in a fresh process so its peak memory is its own -------------------------------------


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _time_compare(url: str, experiment_id: str, n_resamples: int, profile: bool, out) -> None:
    import mlflow

    from mlflow_recsys.stats import ComparisonWarning
    from mlflow_recsys.tracking import _runs, compare_runs
    from mlflow_recsys.tracking._downloads import download_threads

    warnings.simplefilter("ignore", ComparisonWarning)
    mlflow.set_tracking_uri(url)
    in_flight, most, lock = 0, 0, threading.Lock()
    download = _runs.download_files  # one run's artifact files: a listing, then each file

    def counted(*args, **kwargs):
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        try:
            return download(*args, **kwargs)
        finally:
            with lock:
                in_flight -= 1

    _runs.download_files = counted
    profiler = cProfile.Profile() if profile else None
    stages: list[tuple[str, float]] = []
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    outcome = compare_runs(
        experiment=experiment_id,
        settings=ComparisonSettings(reference="M0", primary="ndcg@100", n_resamples=n_resamples),
        on_stage=lambda name: stages.append((name, time.perf_counter())),
    )
    total = time.perf_counter() - start
    marks = [*stages, ("end", start + total)]
    hot = ""
    if profiler is not None:
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(PROFILE_ROWS)
        hot = text.getvalue()
    out.put(
        {
            "total": total,
            "stages": {name: marks[i + 1][1] - t for i, (name, t) in enumerate(marks[:-1])},
            "runs": sum(len(s) for s in outcome.source_runs.values()),
            "peak_mib": _peak_mib(),
            "most_downloads_in_flight": most,
            "pool": download_threads(),
            "hypotheses": len(outcome.report.comparisons),
            "profile": hot,
        }
    )


def _time_paging(url: str, experiment_id: str, out) -> None:
    import mlflow

    from mlflow_recsys.tracking import select_runs
    from mlflow_recsys.tracking._runs import SEARCH_PAGE_SIZE

    mlflow.set_tracking_uri(url)
    start = time.perf_counter()
    everything = select_runs(experiment=experiment_id)
    all_s = time.perf_counter() - start
    start = time.perf_counter()
    some = select_runs(experiment=experiment_id, filter_string="tags.`recsys.model` = 'M1'")
    some_s = time.perf_counter() - start
    out.put(
        {
            "all": len(everything),
            "all_s": all_s,
            "some": len(some),
            "some_s": some_s,
            "page": SEARCH_PAGE_SIZE,
            "distinct": len({r.info.run_id for r in everything}),
            "peak_mib": _peak_mib(),
        }
    )


def _in_child(target, *args):
    """``target(*args, queue)`` in a fresh (spawned) process; what it put on the queue. Fails if it died first."""
    import queue

    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    proc = context.Process(target=target, args=(*args, out))
    proc.start()
    try:
        while True:
            try:
                return out.get(timeout=1)
            except queue.Empty:
                if not proc.is_alive():
                    raise RuntimeError(
                        f"{target.__name__} exited {proc.exitcode} without a result (see above)"
                    ) from None
    finally:
        proc.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--users", type=int, default=943)
    parser.add_argument("--paging-runs", type=int, default=20000)
    parser.add_argument("--n-resamples", type=int, default=9999)
    parser.add_argument("--profile", action="store_true", help="print cProfile's busiest functions of the comparison")
    args = parser.parse_args()
    # The fresh processes inherit these: no run URL printed per run, no progress bars.
    os.environ.update(
        MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT="true", MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false", TQDM_DISABLE="1"
    )
    from mlflow_recsys.tracking._local_server import local_tracking_server

    print(f"{os.cpu_count()} CPUs; PostgreSQL from Debian, started in a temporary folder")
    with tempfile.TemporaryDirectory() as tmp, postgres_cluster(durable=True) as cluster:
        root = Path(tmp)
        store = cluster.create_database("mlflow")
        started = time.perf_counter()
        with local_tracking_server(store, root / "artifacts") as url:
            print(
                f"mlflow server on {store.split('@')[0]}@127.0.0.1:{cluster.port} up in "
                f"{time.perf_counter() - started:.1f} s at {url}"
            )
            n = args.models * args.seeds
            started = time.perf_counter()
            experiment_id = log_study(url, args.models, args.seeds, args.users, root / "logged")
            size = (root / "logged" / "run0" / "per_user.parquet").stat().st_size
            print(
                f"logged {n} runs ({args.models} models x {args.seeds} seeds, {args.users} users x {len(KEYS)} "
                f"metrics, per_user.parquet {size / 1024:.0f} KiB) in {time.perf_counter() - started:.1f} s"
            )
            c = _in_child(_time_compare, url, experiment_id, args.n_resamples, args.profile)
            assert c["runs"] == n, c
            print(
                f"select + compare {c['runs']} runs by experiment (B = {args.n_resamples:,}, {c['hypotheses']} "
                f"hypotheses, seed spread and seed-averaged report, logged back): {c['total']:.1f} s"
            )
            for name, seconds in c["stages"].items():
                print(f"  {name:<18} {seconds:6.1f} s")
            print(f"  peak memory of the comparing process: {c['peak_mib']:.0f} MiB")
            print(
                f"  artifact downloads: a pool of {c['pool']} threads; at most {c['most_downloads_in_flight']} "
                "in flight at once"
            )
            print(c["profile"], end="")

            started = time.perf_counter()
            paging_id = insert_runs(store, url, args.paging_runs, args.models)
            print(
                f"\ninserted {args.paging_runs:,} training runs into MLflow's tables in "
                f"{time.perf_counter() - started:.1f} s"
            )
            p = _in_child(_time_paging, url, paging_id)
            assert p["all"] == p["distinct"] == args.paging_runs, p
            pages = -(-p["all"] // p["page"])
            print(
                f"select_runs over {p['all']:,} runs ({pages} search_runs pages of {p['page']:,}): {p['all_s']:.1f} s"
            )
            print(f"select_runs with a filter, {p['some']:,} of them: {p['some_s']:.1f} s")
            print(f"  peak memory of the selecting process: {p['peak_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
