"""Log, train and compare over HTTP against an `mlflow server`.

The how-to "Using a tracking server" (docs/howto/tracking-server.md) as one script. With
MLFLOW_TRACKING_URI set to an http(s) server it uses that server; otherwise it starts one on
127.0.0.1 for the duration of the script, exactly as `mlflow server --backend-store-uri sqlite:///...
--artifacts-destination ...` would, and stops it at the end. Run it with
``.venv/bin/python examples/howto_tracking_server.py``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import mlflow

from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import SplitConfig, TrainConfig, compare_runs, local_tracking_server, run_split, run_train


def main(url: str) -> None:
    mlflow.set_tracking_uri(url)
    mlflow.set_experiment("howto-tracking-server")
    print(f"tracking server: {url}")

    split_run = run_split("movielens-100k", SplitConfig(seed=42))
    checkpoint = f"runs:/{split_run}/checkpoint.zip"
    runs = [
        run_train(checkpoint, TrainConfig(model, metrics=["ndcg@100", "recall@20"]), log_model=False)
        for model in ("EASE", "Popularity")
    ]
    # The server proxies every artifact: nothing here depends on a local artifact path.
    print("artifact URI scheme:", mlflow.get_run(split_run).info.artifact_uri.split("/")[0])

    outcome = compare_runs(
        run_ids=runs, settings=ComparisonSettings(reference="EASE", primary="ndcg@100", n_resamples=999)
    )
    comparison = mlflow.get_run(outcome.run_id)
    names = sorted(a.path for a in mlflow.artifacts.list_artifacts(run_id=outcome.run_id))
    print(
        f"comparison run {outcome.run_id}: {comparison.info.status}, {len(names)} artifacts on the server: "
        + ", ".join(names)
    )
    print(outcome.report.results_text("ndcg@100", "Popularity"))


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    given = os.environ.get("MLFLOW_TRACKING_URI", "")
    with contextlib.ExitStack() as stack:
        if given.startswith(("http://", "https://")):
            url = given
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="howto-server-")))
            url = stack.enter_context(local_tracking_server(f"sqlite:///{root}/server.db", root / "artifacts"))
        main(url)
