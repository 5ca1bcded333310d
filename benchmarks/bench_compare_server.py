"""Comparison against a live `mlflow server`: selection, download, statistics and logging, timed.

    .venv/bin/python benchmarks/bench_compare_server.py [--runs 20] [--users 2500] [--metrics 6]

Starts a server on 127.0.0.1 with a SQLite store in a temporary folder, logs
synthetic training runs (4 models x seeds) with per-user artifacts, then times
``compare_runs`` (B = 9,999) end to end and its selection and download stages
on their own. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import mlflow
import numpy as np
from mlflow.tracking import MlflowClient

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import ComparisonSettings, ComparisonWarning
from mlflow_recsys.tracking import compare_runs, select_runs, write_evaluation_artifacts
from mlflow_recsys.tracking._downloads import download_threads
from mlflow_recsys.tracking._local_server import local_tracking_server
from mlflow_recsys.tracking._runs import load_many

KEYS = ["ndcg@100", "calibrated_recall@20", "recall@20", "mrr@20", "map@20", "precision@20", "hit_rate@20", "recall@50"]


def log_runs(n_runs: int, n_users: int, keys: list[str], root: Path) -> list[str]:
    client = MlflowClient()
    experiment_id = mlflow.create_experiment("bench")
    rng = np.random.default_rng(0)
    base = {k: rng.beta(2, 3, n_users) for k in keys}
    ids = np.arange(n_users)
    run_ids = []
    for i in range(n_runs):
        model, seed = f"M{i % 4}", i // 4
        values = {k: np.clip(v + rng.normal(0.002 * (i % 4), 0.05, n_users), 0, 1) for k, v in base.items()}
        result = EvaluationResult.from_per_user(values, sample_ids=ids, targets_fingerprint="bench")
        folder = root / f"run{i}"
        write_evaluation_artifacts(result, folder, split_digest="bench")
        run = client.create_run(
            experiment_id,
            tags={
                "recsys.role": "train",
                "recsys.model": model,
                "recsys.seed": str(seed),
                "recsys.split_digest": "bench",
                "recsys.targets_fingerprint": "bench",
                "recsys.config": json.dumps({}),
            },
        )
        client.log_artifacts(run.info.run_id, str(folder))
        client.set_terminated(run.info.run_id, "FINISHED")
        run_ids.append(run.info.run_id)
    return run_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--users", type=int, default=2500)
    parser.add_argument("--metrics", type=int, default=6)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ComparisonWarning)
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        with local_tracking_server(f"sqlite:///{root}/server.db", root / "artifacts") as url:
            print(f"server up in {time.perf_counter() - started:.1f} s at {url}")
            mlflow.set_tracking_uri(url)
            keys = KEYS[: args.metrics]
            run_ids = log_runs(args.runs, args.users, keys, root)
            start = time.perf_counter()
            runs = select_runs(run_ids=run_ids)
            selected = time.perf_counter()
            load_many(runs, download_threads())
            downloaded = time.perf_counter()
            compare_runs(run_ids=run_ids, settings=ComparisonSettings(reference="M0", metrics=keys, n_resamples=9999))
            total = time.perf_counter() - downloaded
            print(f"{args.runs} runs x {args.users:,} users x {len(keys)} metrics, B = 9,999, over HTTP:")
            print(f"  selection alone:                                  {selected - start:6.2f} s")
            print(f"  download + validation of per-user artifacts:      {downloaded - selected:6.2f} s")
            print(f"  compare_runs (select, download, stats, log back): {total:6.2f} s")


if __name__ == "__main__":
    main()
