"""Where a run's logging goes: the run `mlflow run` created, or a new one."""

from __future__ import annotations

import os

import mlflow


def entry_point_run(run_name: str, *, experiment_id: str | None = None):
    """Start the run to log into.

    Under ``mlflow run`` the run already exists (``MLFLOW_RUN_ID``) and is
    resumed; otherwise a new run is started. Used as a context manager: an
    exception inside marks the run FAILED.
    """
    if os.environ.get("MLFLOW_RUN_ID"):
        # `mlflow run` created this run without asking context providers, so add their tags here.
        from mlflow_recsys.tracking.plugin import RecsysRunContext

        run = mlflow.start_run()
        provider = RecsysRunContext()
        mlflow.set_tags({"mlflow.runName": run_name, **(provider.tags() if provider.in_context() else {})})
        return run
    return mlflow.start_run(run_name=run_name, experiment_id=experiment_id)


def log_params_once(params: dict) -> None:
    """Log ``params`` to the active run, leaving alone keys the run already has.

    ``mlflow run`` logs the entry point's parameters as given on the command
    line (``l2=500``), and MLflow forbids changing a param, so only keys it did
    not log are added here (``l2`` stays ``500``, ``dtype`` is added).
    """
    run = mlflow.active_run()
    existing = mlflow.get_run(run.info.run_id).data.params if run is not None else {}
    new = {k: "None" if v is None else v for k, v in params.items() if k not in existing}
    if new:
        mlflow.log_params(new)
