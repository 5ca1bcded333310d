"""The main job: every step of one study run as its own MLflow project entry point."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

import mlflow
import mlflow.projects
from mlflow.exceptions import ExecutionException
from mlflow.tracking import MlflowClient

from mlflow_recsys.errors import StudyStepError
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.context import entry_point_run
from mlflow_recsys.tracking.redact import redact


def run_study(
    *,
    dataset: str,
    split_seed: int,
    seeds: Sequence[int],
    l2: float,
    latent_dim: int,
    batch_size: int,
    epochs: int,
    lr: float,
    metrics: str,
    primary: str,
    n_resamples: int,
    project_uri: str = ".",
    echo: Callable[[str], None] = print,
) -> str:
    """Split, train EASE once and ELSA under each seed, compare; returns the comparison run id.

    Each step runs through ``mlflow.projects.run`` (the ``split``, ``train`` and
    ``compare`` entry points of the ``MLproject`` at ``project_uri``) as a child
    of the main run, so the steps a user can run alone are exactly the steps
    the study ran.

    Raises
    ------
    RunOwnershipError
        If ``MLFLOW_RUN_ID`` names a run the study must not log into (see
        :func:`~mlflow_recsys.tracking.context.environment_run`); no step runs.
    ValueError
        If ``seeds`` holds fewer than two seeds (no seed spread could be measured),
        or a param the environment's run already holds with another value.
    StudyStepError
        If a step fails; MLflow marks its run FAILED, and the main run fails too.
    """
    if len(seeds) < 2:
        raise ValueError(f"seeds: expected at least 2 ELSA seeds to measure retraining spread, found {list(seeds)}")
    client = MlflowClient()
    params = {"dataset": dataset, "split_seed": split_seed, "seeds": ",".join(map(str, seeds)), "metrics": metrics,
              "primary": primary, "n_resamples": n_resamples}
    with entry_point_run(f"study {dataset}", params=params) as main_run:
        mlflow.set_tag(tags.ROLE, tags.ROLE_MAIN)
        experiment_id = main_run.info.experiment_id

        def step(entry_point: str, run_name: str, parameters: dict) -> str:
            echo(f"\n== {run_name} ==")
            try:
                submitted = mlflow.projects.run(
                    project_uri, entry_point=entry_point, parameters=parameters, env_manager="local",
                    experiment_id=experiment_id, run_name=run_name, synchronous=True,
                )
            except ExecutionException as exc:
                raise StudyStepError(redact(f"step {run_name!r} failed ({exc.message}); its output is above")) from None
            client.set_tag(submitted.run_id, "mlflow.parentRunId", main_run.info.run_id)
            return submitted.run_id

        split_id = step("split", f"split {dataset}", {"dataset": dataset, "seed": split_seed})
        checkpoint = f"runs:/{split_id}/checkpoint.zip"
        train_ids = [step("train", "EASE", {"checkpoint": checkpoint, "model": "EASE", "l2": l2})]
        for seed in seeds:
            train_ids.append(step("train", f"ELSA seed {seed}", {
                "checkpoint": checkpoint, "model": "ELSA", "seed": seed, "latent_dim": latent_dim,
                "batch_size": batch_size, "epochs": epochs, "lr": lr,
            }))
        compare_id = step("compare", "compare EASE vs ELSA", {
            "run_ids": ",".join(train_ids), "reference": "EASE", "metrics": metrics, "primary": primary,
            "n_resamples": n_resamples,
        })
        mlflow.set_tag("recsys.comparison_run", compare_id)

        note = client.get_run(compare_id).data.tags.get("mlflow.note.content", "")
        echo("\n== Result (the comparison run's notes) ==\n")
        echo(note)
        echo(_ui_hint(compare_id, experiment_id))
        return compare_id


def _ui_hint(compare_id: str, experiment_id: str) -> str:
    # Printed, so the password of a tracking server or database stays out; the user has it already.
    uri = redact(mlflow.get_tracking_uri())
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        # Absolute, so the command works from any folder.
        uri = "sqlite:///" + str(Path(uri[len("sqlite:///"):]).resolve())
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    if uri.startswith(("http://", "https://")):
        return f"\nOpen {uri}/#/experiments/{experiment_id}/runs/{compare_id} to see the runs."
    return (
        "\nTo see every run, its artifacts and the report in the MLflow UI, run:\n\n"
        f"    {mlflow_cli if mlflow_cli.exists() else 'mlflow'} ui --backend-store-uri {uri} --port 5000\n\n"
        f"then open http://127.0.0.1:5000/#/experiments/{experiment_id}/runs/{compare_id}"
    )
