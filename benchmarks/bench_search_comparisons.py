"""Time of search_comparisons over 200 comparison runs on a live ``mlflow server``.

One real comparison is computed on a SQLite store (EASE, Popularity and a two-seed copy of Popularity on
MovieLens-100k, every model against EASE, three metrics, so each run holds two analyses of 6 hypotheses).
Its artifacts, params and tags are then logged into 200 comparison runs on an `mlflow server` started on
127.0.0.1 with SQLite behind it (artifacts proxied through the server, as a team's server serves them). What
is timed is only the query: search_runs pages plus three downloads a run (report.parquet,
seed_averaged.parquet, settings.json), by $MLFLOW_RECSYS_DOWNLOAD_THREADS threads (default 8). The issue's
target is at most 10 s for 200 runs.

    python benchmarks/bench_search_comparisons.py [--runs 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import copy_training_run, ease_and_popularity  # noqa: E402
from mlflow_recsys import search_comparisons  # noqa: E402
from mlflow_recsys.stats import ComparisonSettings  # noqa: E402
from mlflow_recsys.tracking import compare_runs  # noqa: E402
from mlflow_recsys.tracking._local_server import local_tracking_server  # noqa: E402

METRICS = ("ndcg@100", "recall@20", "mrr@20")


def one_comparison(root: Path):
    """A real comparison run in a SQLite store under ``root``: its id, a folder of its artifacts and the run."""
    with ease_and_popularity(root, "bench", METRICS) as trained:
        seeded = [
            copy_training_run(
                trained["pop"],
                root / f"seed{s}",
                model="Seeded",
                tags={"recsys.seed": str(s)},
                edit_frame=lambda f, s=s: f.assign(**{m: f[m] * (0.9 - 0.1 * s) for m in METRICS}),
            )
            for s in (0, 1)
        ]
        settings = ComparisonSettings(reference="EASE", metrics=METRICS, primary="ndcg@100")
        outcome = compare_runs(run_ids=[trained["ease"], trained["pop"], *seeded], settings=settings)
        folder = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, dst_path=str(root / "copy")))
        return outcome.run_id, folder, MlflowClient().get_run(outcome.run_id)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    n_runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        _, folder, source = one_comparison(root / "local")
        print(f"one real comparison computed in {time.perf_counter() - started:.1f} s")
        with local_tracking_server(f"sqlite:///{root}/server.db", root / "artifacts") as url:
            mlflow.set_tracking_uri(url)
            client = MlflowClient()
            experiment_id = client.create_experiment("bench-search")
            started = time.perf_counter()
            for _ in range(n_runs):
                run = client.create_run(experiment_id)
                now = int(time.time() * 1000)
                client.log_batch(
                    run.info.run_id,
                    metrics=[Metric(k, v, now, 0) for k, v in source.data.metrics.items()],
                    params=[Param(k, v) for k, v in source.data.params.items()],
                    tags=[RunTag(k, v) for k, v in source.data.tags.items() if k.startswith("recsys.")],
                )
                client.log_artifacts(run.info.run_id, str(folder))
                client.set_terminated(run.info.run_id, "FINISHED")
            print(f"{n_runs} comparison runs logged to {url} in {time.perf_counter() - started:.1f} s (not timed)")
            for attempt in (1, 2):
                started = time.perf_counter()
                frame = search_comparisons("bench-search")
                took = time.perf_counter() - started
                print(
                    f"search_comparisons, call {attempt}: {len(frame):,} hypotheses of {frame['run_id'].nunique()} "
                    f"comparison runs in {took:.2f} s ({1000 * took / n_runs:.1f} ms a run)"
                )
            mlflow.set_tracking_uri(None)


if __name__ == "__main__":
    main()
