"""What a training run holds, and how to log a model trained elsewhere so that `compare` accepts it.

The how-to "Run conventions" (docs/howto/run-conventions.md) as one script. It logs to the store
MLFLOW_TRACKING_URI names, or to a SQLite file in a temporary folder when it is unset. Run it with
``.venv/bin/python examples/howto_run_conventions.py``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from mlflow.tracking import MlflowClient

import mlflow_recsys as mr
from mlflow_recsys.evaluation import evaluate_rankings
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import (
    SplitConfig,
    TrainConfig,
    compare_runs,
    mlflow_metric_name,
    run_split,
    run_train,
    write_evaluation_artifacts,
)

METRICS = ["ndcg@100", "recall@20"]


def main(workdir: Path) -> None:
    mlflow.set_experiment("conventions")
    split_run = run_split("movielens-100k", SplitConfig(seed=42))
    checkpoint = f"runs:/{split_run}/checkpoint.zip"
    ease_run = run_train(checkpoint, TrainConfig("EASE", metrics=METRICS), log_model=False)

    run = MlflowClient().get_run(ease_run)
    print("Tags of the EASE training run")
    for name, value in sorted(run.data.tags.items()):
        if name.startswith("recsys."):
            print(f"  {name:<28} {value[:48]}")
    print("Metrics:", sorted(run.data.metrics))

    folder = Path(mlflow.artifacts.download_artifacts(run_id=ease_run, dst_path=str(workdir / "ease")))
    per_user = pd.read_parquet(folder / "per_user.parquet")
    meta = json.loads((folder / "evaluation.json").read_text())
    print(f"per_user.parquet: {len(per_user)} rows, columns {list(per_user.columns)}")
    print(f"evaluation.json: format {meta['format']} v{meta['format_version']}, {meta['n_units']} users")

    # A model trained outside the package: item-to-item co-occurrence, ranked and scored by hand.
    local = mlflow.artifacts.download_artifacts(checkpoint, dst_path=str(workdir / "checkpoint"))
    with mr.read_checkpoint(local) as root:
        split = mr.load_recsys_split(root)
    x = split["x_train"]
    similarity = (x.T @ x).toarray().astype(np.float64)
    np.fill_diagonal(similarity, 0.0)
    source = split["test_source_matrix"]
    scores = np.asarray(source @ similarity)
    scores[source.nonzero()] = -np.inf
    rankings = np.argsort(-scores, axis=1, kind="stable")[:, :100]
    result = evaluate_rankings(
        rankings,
        targets=split["test_target_matrix"],
        metrics=METRICS,
        sample_ids=split["test_eval_user_ids"],
        source=source,
    )

    with mlflow.start_run(run_name="CoOccurrence") as own:
        mlflow.set_tags(
            {
                "recsys.role": "train",
                "recsys.model": "CoOccurrence",
                "recsys.seed": "none",
                "recsys.split_digest": split["split_digest"],
                "recsys.targets_fingerprint": result.targets_fingerprint,
                "recsys.config": json.dumps({"similarity": "co-occurrence"}),
            }
        )
        mlflow.log_metrics({mlflow_metric_name(k): v for k, v in result.metrics.items()})
        with tempfile.TemporaryDirectory() as tmp:
            write_evaluation_artifacts(result, tmp, split_digest=split["split_digest"])
            mlflow.log_artifacts(tmp)

    outcome = compare_runs(
        run_ids=[ease_run, own.info.run_id],
        settings=ComparisonSettings(reference="EASE", primary="ndcg@100", n_resamples=999),
    )
    print("\nHand-logged run compared with the EASE training run")
    print(outcome.report.results_text("ndcg@100", "CoOccurrence"))


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory(prefix="howto-conventions-") as tmp:
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlruns.db")
        main(Path(tmp))
