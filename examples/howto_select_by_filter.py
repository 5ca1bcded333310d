"""Select the training runs to compare with MLflow filter strings.

The how-to "Selecting runs by filter" (docs/howto/select-runs.md) as one script: two splits of
MovieLens-100k with runs on each, the filters that pick runs apart, the refusal to pair runs scored on
different splits, and a comparison of the runs one filter selects. It logs to the store
MLFLOW_TRACKING_URI names, or to a SQLite file in a temporary folder when it is unset. Run it with
``.venv/bin/python examples/howto_select_by_filter.py``.
"""

from __future__ import annotations

import os
import tempfile

import mlflow

from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import (
    RunSelectionError,
    SplitConfig,
    TrainConfig,
    compare_runs,
    run_split,
    run_train,
    select_runs,
)

EXPERIMENT = "selection"


def names(filter_string: str) -> list[str]:
    runs = select_runs(experiment=EXPERIMENT, filter_string=filter_string)
    return sorted(f"{r.data.tags['recsys.model']}/{r.data.tags['recsys.seed']}" for r in runs)


def main() -> None:
    mlflow.set_experiment(EXPERIMENT)
    elsa = {"latent_dim": 16, "batch_size": 128, "epochs": 5}
    metrics = ("ndcg@100", "recall@20")
    digests = {}
    for split_seed in (42, 7):
        split_run = run_split("movielens-100k", SplitConfig(seed=split_seed))
        digests[split_seed] = mlflow.get_run(split_run).data.tags["recsys.split_digest"]
        checkpoint = f"runs:/{split_run}/checkpoint.zip"
        trainings = [TrainConfig("EASE"), TrainConfig("ELSA", {"seed": 0, **elsa})]
        if split_seed == 42:
            trainings += [TrainConfig("Popularity"), TrainConfig("ELSA", {"seed": 1, **elsa})]
        for config in trainings:
            run_train(checkpoint, config.replace(metrics=metrics), log_model=False)

    first = digests[42]
    print("Filters")
    for filter_string in [
        f"tags.`recsys.split_digest` = '{first}'",
        "tags.`recsys.model` = 'ELSA'",
        "tags.`recsys.model` != 'Popularity'",
        "params.epochs = '5'",
        "metrics.ndcg_at_100 > 0.3",
    ]:
        print(f"  {filter_string.replace(first, '<digest>'):<46} {names(filter_string)}")

    try:
        compare_runs(experiment=EXPERIMENT, settings=ComparisonSettings(reference="EASE", n_resamples=999))
    except RunSelectionError as error:
        print("\nRefused:", str(error).split(":")[0])

    outcome = compare_runs(
        experiment=EXPERIMENT,
        filter_string=f"tags.`recsys.split_digest` = '{first}' and tags.`recsys.model` != 'Popularity'",
        settings=ComparisonSettings(reference="EASE", primary="ndcg@100", n_resamples=999),
    )
    print("\nCompared:", sorted(outcome.source_runs), "with seed tables", list(outcome.seed_spreads))
    print(outcome.report.results_text("ndcg@100", "ELSA"))


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory(prefix="howto-select-") as tmp:
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlruns.db")
        main()
