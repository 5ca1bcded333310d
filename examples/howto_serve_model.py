"""Load, serve and evaluate a logged recommender.

The how-to "Serving and evaluating a model" (docs/howto/serving.md) as one script: EASE trained by a
training run and loaded as a pyfunc model (raw item ids in, raw item ids out, unknown ids reported);
the same model behind `mlflow models serve`, asked over HTTP; and ELSA trained in plain Python, logged
with `log_recommender`, scored by the `recsys` evaluator and compared with the EASE training run. It
logs to the store MLFLOW_TRACKING_URI names, or to a SQLite file in a temporary folder when it is
unset. Run it with ``.venv/bin/python examples/howto_serve_model.py``.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.request
import warnings
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd

import mlflow_recsys as mr
from mlflow_recsys.models import ELSAConfig, ELSATrainer, UnknownItemsWarning
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import (
    SplitConfig,
    TrainConfig,
    compare_runs,
    local_model_server,
    log_recommender,
    run_split,
    run_train,
)

METRICS = ["ndcg@100", "recall@20"]


def serve_and_ask(model_dir: str, records: list[dict], log_path: Path) -> list[dict]:
    """Start `mlflow models serve` on a free loopback port, post ``records``, stop the server."""
    with local_model_server(model_dir, log_path) as url:
        request = urllib.request.Request(
            f"{url}/invocations",
            data=json.dumps({"dataframe_records": records}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["predictions"]


def main(workdir: Path) -> None:
    mlflow.set_experiment("serving")
    split_run = run_split("movielens-100k", SplitConfig(seed=42))
    checkpoint = f"runs:/{split_run}/checkpoint.zip"
    ease_run = run_train(checkpoint, TrainConfig("EASE", metrics=METRICS))

    model = mlflow.pyfunc.load_model(f"runs:/{ease_run}/model")
    request = pd.DataFrame({"user": [3], "items": [[50, 181, 258, 999999]], "k": [5]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownItemsWarning)
        answer = model.predict(request)
    print(
        "In Python:",
        answer.loc[0, "items"],
        "unknown:",
        answer.loc[0, "unknown_items"],
        "warnings:",
        [w.category.__name__ for w in caught],
    )

    folder = mlflow.artifacts.download_artifacts(f"runs:/{ease_run}/model", dst_path=str(workdir / "ease"))
    for row in serve_and_ask(
        folder,
        [{"user": 3, "items": [50, 181, 258, 999999], "k": 5}, {"user": 7, "items": [1, 2, 3], "k": 3}],
        workdir / "serve.log",
    ):
        print("Over HTTP:", row["user"], row["items"], "unknown:", row["unknown_items"])

    local = mlflow.artifacts.download_artifacts(checkpoint, dst_path=str(workdir / "checkpoint"))
    with mr.read_checkpoint(local) as root:
        split = mr.load_recsys_split(root)
    elsa = ELSATrainer(ELSAConfig(latent_dim=24, batch_size=64, epochs=20, lr=0.01, seed=0)).fit(split["x_train"])
    with mlflow.start_run(run_name="ELSA from a notebook"):
        elsa_model = log_recommender(elsa, split["item_ids"], eval_user_ids=split["test_eval_user_ids"])

    item_ids = split["item_ids"]

    def ids_per_row(matrix):
        return [item_ids[cols].tolist() for cols in np.split(matrix.indices, matrix.indptr[1:-1])]

    frame = pd.DataFrame(
        {
            "sample_id": split["test_eval_user_ids"],
            "items": ids_per_row(split["test_source_matrix"]),
            "targets": ids_per_row(split["test_target_matrix"]),
        }
    )
    with mlflow.start_run(run_name="ELSA evaluated") as evaluated:
        result = mlflow.models.evaluate(
            elsa_model.model_uri,
            data=frame,
            targets="targets",
            model_type="recommender",
            evaluators="recsys",
            evaluator_config={
                "metrics": METRICS,
                "model_name": "ELSA",
                "seed": 0,
                "item_ids": item_ids,
                "split_digest": split["split_digest"],
            },
        )
    print("Evaluator:", {name: round(value, 6) for name, value in result.metrics.items()})
    outcome = compare_runs(
        run_ids=[ease_run, evaluated.info.run_id], settings=ComparisonSettings(reference="EASE", n_resamples=999)
    )
    print(outcome.report.results_text("ndcg@100", "ELSA"))


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory(prefix="howto-serve-") as tmp:
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlruns.db")
        main(Path(tmp))
