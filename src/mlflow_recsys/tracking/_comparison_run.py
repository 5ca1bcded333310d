"""The life of a comparison run: which run it logs into (a new one, a nested one or the environment's), its
tags from the first moment, and its end (FAILED with the reason, KILLED when the process is killed)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import mlflow
from mlflow.entities import LifecycleStage, Run
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import PERMISSION_DENIED, ErrorCode

from mlflow_recsys import validation
from mlflow_recsys._digests import text_digest
from mlflow_recsys.errors import TrackingPermissionError
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.context import (
    check_step_run,
    entry_point_run,
    mark_failed,
)
from mlflow_recsys.tracking.limits import (
    MAX_TAG_LENGTH,
)
from mlflow_recsys.tracking.redact import redact
from mlflow_recsys.tracking.runs import RunSelectionError
from mlflow_recsys.tracking.server_errors import is_unreachable

_log = logging.getLogger(__name__)


class RunTarget:
    """Where the comparison run goes, by the one rule of :func:`~mlflow_recsys.tracking.context.check_step_run`:
    nested under the caller's active run, the entry point's run, or a new run."""

    def __init__(self, *, nested: bool, environment_run: bool, experiment_name: str | None):
        self.nested = nested
        self.environment_run = environment_run
        self.experiment_name = experiment_name

    @classmethod
    def find(cls, output_experiment: str | None) -> RunTarget:
        """Check, before anything is written, that the run to use may be used and the experiment may be made.

        Raises
        ------
        RunSelectionError
            If ``output_experiment`` is deleted or not a valid name.
        RunOwnershipError
            If ``MLFLOW_RUN_ID`` (or the active run) names a run this comparison must not log under.
        """
        target = check_step_run()
        if output_experiment is not None:
            try:
                validation.line(output_experiment, "output_experiment", longest=500)
            except ValueError as exc:
                raise RunSelectionError(str(exc)) from None
            exp = mlflow.get_experiment_by_name(output_experiment)
            if exp is not None and exp.lifecycle_stage != LifecycleStage.ACTIVE:
                raise RunSelectionError(
                    f"output_experiment: {output_experiment!r} is deleted; restore it or choose another name"
                )
        return cls(
            nested=target.parent_run_id is not None,
            environment_run=target.environment_run_id is not None,
            experiment_name=output_experiment,
        )

    def _open(self, source_experiment_id: str | None, run_name: str, made_with: dict[str, str]) -> mlflow.ActiveRun:
        """The run to log into (see :func:`~mlflow_recsys.tracking.context.entry_point_run`).

        It carries ``made_with`` from its first moment. A new run goes to ``output_experiment``, else (nested)
        the caller's run's experiment, else ``source_experiment_id``; None (no source runs) lets MLflow choose.
        """
        experiment_id = None if self.nested else source_experiment_id
        if self.experiment_name is not None:
            exp = mlflow.get_experiment_by_name(self.experiment_name)
            experiment_id = exp.experiment_id if exp else mlflow.create_experiment(self.experiment_name)
        return entry_point_run(run_name, experiment_id=experiment_id, tags=made_with)

    @contextmanager
    def run(self, runs: list[Run], run_name: str) -> Iterator[mlflow.ActiveRun]:
        """The comparison run of ``runs``, tagged with its role and source runs as it is made; ended FAILED with
        the reason on any exception, and always ended locally.

        Raises
        ------
        TrackingPermissionError
            If the tracking server refuses to create or tag the run (HTTP 403), naming the experiment.
        """
        experiment_id = runs[0].info.experiment_id
        made_with = {  # so even a run that fails, or a process killed at once, says what it was and compared
            tags.ROLE: tags.ROLE_COMPARISON,
            tags.SOURCE_RUNS: source_runs_tag([r.info.run_id for r in runs]),
            tags.N_SOURCE_RUNS: str(len(runs)),
        }
        try:
            run = self._open(experiment_id, run_name, made_with)
        except MlflowException as exc:
            self._raise_if_refused(exc, experiment_id)
            raise
        try:
            yield run
        except BaseException as exc:
            mark_failed(run.info.run_id, exc, end=True)
            raise
        else:
            mlflow.end_run()

    def _raise_if_refused(self, exc: MlflowException, experiment_id: str) -> None:
        """For MLflow's PERMISSION_DENIED (HTTP 403), a TrackingPermissionError saying where the comparison may not
        write and what to do; nothing for any other error."""
        if exc.error_code != ErrorCode.Name(PERMISSION_DENIED):
            return
        if self.experiment_name is not None:
            where = f"experiment {self.experiment_name!r} (output_experiment)"
        elif self.environment_run:
            where = "the entry point's run (MLFLOW_RUN_ID)"
        elif self.nested:
            where = "the experiment of the active run the comparison nests under"
        else:
            where = f"experiment {_experiment_name(experiment_id)!r} (id {experiment_id}), the first source run's"
        user = os.environ.get("MLFLOW_TRACKING_USERNAME")
        raise TrackingPermissionError(
            f"output_experiment: the tracking server refused to write the comparison run into {where}"
            + (f" for user {user!r}" if user else "")
            + "; nothing was computed. Ask the experiment's owner for EDIT permission, or write the comparison "
            "into an experiment you may write to: --output-experiment NAME (output_experiment= in Python; a new "
            "name is created)"
        ) from None

    def record_failure(self, exc: BaseException) -> None:
        """Mark the entry point's run (``MLFLOW_RUN_ID``), made for this comparison, FAILED with the reason of a
        failure before the comparison run was opened. Nothing else exists yet, so nothing else records it;
        nothing is recorded when the server cannot be reached."""
        if not self.environment_run or is_unreachable(exc):
            return
        try:
            run = self._open(None, "comparison (failed)", {tags.ROLE: tags.ROLE_COMPARISON, tags.N_SOURCE_RUNS: "0"})
        except Exception as again:
            _log.warning("could not record the failure in MLflow: %s", redact(str(again)))
            return
        mark_failed(run.info.run_id, exc, end=True)


def _experiment_name(experiment_id: str) -> str:
    """The name of experiment ``experiment_id``, or the id when it cannot be read."""
    try:
        return mlflow.get_experiment(experiment_id).name
    except Exception:  # noqa: BLE001 - a name for a message; the refusal is what matters
        return experiment_id


def source_runs_tag(run_ids: list[str]) -> str:
    """The ``recsys.source_runs`` tag: the comma-separated ids while they fit, else their count and digest.

    ``source_runs.json`` always lists them all.
    """
    listed = ",".join(run_ids)
    if len(listed) <= MAX_TAG_LENGTH:
        return listed
    return (
        f"{len(run_ids)} runs, sha256 {text_digest(listed, 16)} of their comma-separated ids; "
        "listed in source_runs.json"
    )
