"""The life of a comparison run: which run it logs into (a new one, a nested one or the environment's), its
tags from the first moment and with its results, and its end (FAILED with the reason, KILLED when killed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import mlflow
from mlflow.entities import LifecycleStage, Run
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import PERMISSION_DENIED, ErrorCode
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

from mlflow_recsys import _validation as validation
from mlflow_recsys._digests import shorten, text_digest
from mlflow_recsys.errors import TrackingPermissionError
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._context import check_step_run, entry_point_run, mark_failed
from mlflow_recsys.tracking._limits import MAX_TAG_LENGTH
from mlflow_recsys.tracking._runs import RunSelectionError, lookup_experiment
from mlflow_recsys.tracking._server_page import recsys_page_url


class RunTarget:
    """Where the comparison run goes, by the one rule of :func:`~mlflow_recsys.tracking._context.check_step_run`:
    nested under the caller's active run, the entry point's run, or a new run."""

    def __init__(self, *, nested: bool, environment_run: bool, experiment_name: str | None):
        self.nested = nested
        self.environment_run = environment_run
        self.experiment_name = experiment_name

    @classmethod
    def find(cls, output_experiment: str | None) -> RunTarget:
        """Check, before anything is written, that the run to use may be used (RunOwnershipError) and the
        experiment may be made (RunSelectionError for a deleted or invalid ``output_experiment``)."""
        target = check_step_run()
        if output_experiment is not None and target.environment_run_id is not None:
            raise RunSelectionError(
                f"output_experiment: under `mlflow run` the comparison logs into the run it made, in the experiment "
                f"`mlflow run` chose, so it cannot go into {output_experiment!r}; give `mlflow run "
                "--experiment-name` instead"
            )
        if output_experiment is not None:
            try:
                validation.line(output_experiment, "output_experiment", longest=500)
            except ValueError as exc:
                raise RunSelectionError(str(exc)) from None
            exp = lookup_experiment(MlflowClient(), output_experiment)
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
        """The run to log into, with ``made_with`` from its first moment: a new one goes to ``output_experiment``,
        else (nested) the caller's run's experiment, else ``source_experiment_id`` (None: MLflow chooses)."""
        experiment_id = None if self.nested else source_experiment_id
        if self.experiment_name is not None:
            exp = lookup_experiment(MlflowClient(), self.experiment_name)
            experiment_id = exp.experiment_id if exp else mlflow.create_experiment(self.experiment_name)
        return entry_point_run(run_name, experiment_id=experiment_id, tags=made_with)

    @contextmanager
    def run(self, runs: list[Run], run_name: str) -> Iterator[mlflow.ActiveRun]:
        """The comparison run of ``runs``, tagged with its role and source runs as it is made; ended FAILED with
        the reason on any exception. TrackingPermissionError if the server refuses to make it (HTTP 403)."""
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
        """For PERMISSION_DENIED (HTTP 403), a TrackingPermissionError saying where and what to do."""
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


def _experiment_name(experiment_id: str) -> str:
    try:
        return mlflow.get_experiment(experiment_id).name
    except Exception:  # noqa: BLE001 - a name for a message; the refusal is what matters
        return experiment_id


def source_runs_tag(run_ids: list[str]) -> str:
    """The ``recsys.source_runs`` tag: the comma-separated ids while they fit, else their count and digest."""
    listed = ",".join(run_ids)
    if len(listed) <= MAX_TAG_LENGTH:
        return listed
    return (
        f"{len(run_ids)} runs, sha256 {text_digest(listed, 16)} of their comma-separated ids; "
        "listed in source_runs.json"
    )


def primary_declared_in_advance(runs: list[Run], primary: str | None) -> bool:
    """Whether ``primary`` was fixed before the compared models were trained: every compared run is a child of
    one study run that logged it as its ``primary`` param (as ``main`` does when it starts) before them all."""
    parents = {r.data.tags.get(MLFLOW_PARENT_RUN_ID) for r in runs}
    parent_id = parents.pop() if len(parents) == 1 else None  # None: several parents, or none
    if primary is None or parent_id is None:
        return False
    try:
        study = MlflowClient().get_run(parent_id)
    except Exception:  # a parent that is gone or unreadable declares nothing
        return False
    return study.data.params.get("primary") == primary and study.info.start_time <= min(r.info.start_time for r in runs)


def result_tags(first: dict, primary, headline: str, run_name: str, note: str) -> dict:
    """The tags a comparison run gets with its results: the split, targets and dataset of ``first`` (a source
    run's tags), the primary metric, the headline, its name and notes."""
    return {
        tags.SPLIT_DIGEST: first.get(tags.SPLIT_DIGEST, ""),
        tags.TARGETS_FINGERPRINT: first.get(tags.TARGETS_FINGERPRINT, ""),
        tags.DATASET: first.get(tags.DATASET, ""),
        tags.PRIMARY_METRIC: primary or "",
        tags.RESULT: shorten(headline, MAX_TAG_LENGTH),
        MLFLOW_RUN_NAME: run_name,
        MLFLOW_RUN_NOTE: note,
    }


def page_link_text(experiment_id: str) -> str:
    """The closing line of the notes and ``summary.txt``: where the server's recsys page shows these runs, or ''."""
    page = recsys_page_url(experiment_id)
    return f"\n\nCompare these and other runs on the server's page: {page}" if page else ""
