"""How long the recsys page takes to list an experiment of 1,000 training runs.

    .venv/bin/python benchmarks/server_listing.py [--runs 1000] [--repeat 3]

Logs ``--runs`` FINISHED training runs (10 models x 100 seeds on one split, each with the tags, params and nine
metrics `mlflow-recsys train` logs) into a SQLite store in a temporary folder, starts
``mlflow server --app-name recsys`` on 127.0.0.1 for it (4 workers, the default), and times ``GET
/recsys/experiments/<id>`` over HTTP: the runs read page by page through ``search_runs`` page tokens, grouped and
rendered. Waits ``--settle`` seconds (15) for every worker process to start, then prints the first request's time
and the best of ``--repeat`` more, beside the time of the reading alone (in this process). The target is at most
2 s. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
import urllib.request
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from mlflow_recsys.server import _listing as listing
from mlflow_recsys.tracking._local_server import local_tracking_server
from mlflow_recsys.tracking._runs import SEARCH_PAGE_SIZE, search_training_runs

KEYS = [
    "ndcg_at_100",
    "calibrated_recall_at_20",
    "recall_at_20",
    "mrr_at_20",
    "map_at_20",
    "precision_at_20",
    "hit_rate_at_20",
    "recall_at_50",
    "ndcg_at_20",
]


def log_runs(uri: str, n_runs: int) -> str:
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("bench-listing")
    now = int(time.time() * 1000)
    for i in range(n_runs):
        model, seed = f"Model{i % 10}", str(i // 10)
        run = client.create_run(experiment_id, run_name=f"{model} seed {seed}")
        tags = {
            "recsys.role": "train",
            "recsys.model": model,
            "recsys.seed": seed,
            "recsys.split_digest": "d" * 64,
            "recsys.targets_fingerprint": "f" * 64,
            "recsys.dataset": "movielens-100k",
            "recsys.config": json.dumps({"latent_dim": 24, "epochs": 20}),
            "recsys.package_version": "0.1.0",
        }
        params = {
            "model": model,
            "seed": seed,
            "checkpoint": "runs:/abc/checkpoint.zip",
            "latent_dim": "24",
            "batch_size": "64",
            "epochs": "20",
            "lr": "0.01",
            "metrics": ",".join(KEYS),
        }
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(k, 0.3 + 0.001 * (i % 97), now, 0) for k in KEYS] + [Metric("fit_seconds", 1.0, now, 0)],
            params=[Param(k, v) for k, v in params.items()],
            tags=[RunTag(k, v) for k, v in tags.items()],
        )
        client.set_terminated(run.info.run_id, "FINISHED")
    return experiment_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to let every worker start")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        uri = f"sqlite:///{root}/bench.db"
        started = time.perf_counter()
        experiment_id = log_runs(uri, args.runs)
        print(f"logged {args.runs} training runs in {time.perf_counter() - started:.1f} s")

        client = MlflowClient(tracking_uri=uri)
        started = time.perf_counter()
        runs, _ = search_training_runs(client, [experiment_id], limit=listing.MAX_LISTED)
        read = time.perf_counter() - started
        grouped = listing.group_runs(runs)
        print(
            f"read {len(runs)} runs through search_runs pages of {SEARCH_PAGE_SIZE} in {read:.2f} s, grouped in "
            f"{time.perf_counter() - started - read:.2f} s ({len(grouped.splits)} split, "
            f"{sum(len(s.models) for s in grouped.splits)} models)"
        )

        # The server's environment drops this process's MLFLOW_ variables: the pages' key is passed on here.
        jobs = {"MLFLOW_RECSYS_JOBS_DIR": str(root / "jobs"), "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(32)}
        with local_tracking_server(uri, root / "artifacts", timeout=180, app_name="recsys", env=jobs) as url:
            # /health answers as soon as one worker is up; the others are still importing on 2 cores.
            time.sleep(args.settle)
            times = []
            for _ in range(args.repeat + 1):
                started = time.perf_counter()
                with urllib.request.urlopen(f"{url}/recsys/experiments/{experiment_id}", timeout=120) as response:
                    body = response.read().decode()
                times.append(time.perf_counter() - started)
            listed = body.count('name="run"')
        print(
            f"GET /recsys/experiments/{experiment_id} over HTTP, {listed} runs listed, {len(body) / 1e6:.1f} MB: "
            f"first (after {args.settle:g} s of start-up) {times[0]:.2f} s, best of {args.repeat} more "
            f"{min(times[1:]):.2f} s (target <= 2 s)"
        )


if __name__ == "__main__":
    main()
