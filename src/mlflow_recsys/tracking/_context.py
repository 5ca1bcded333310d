"""Where a step's run goes, one rule for every step (:func:`check_step_run`): nested under the caller's active
run, the run `mlflow run` created, or a new one; and each param logged once, by one writer."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

import mlflow
from mlflow.entities import LifecycleStage, Run, RunTag
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

from mlflow_recsys._digests import shorten
from mlflow_recsys.errors import RunOwnershipError, failure_text
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._limits import MAX_PARAM_LENGTH, MAX_RUN_NAME_LENGTH, MAX_TAG_LENGTH, fit_values, storable
from mlflow_recsys.tracking._plugin import RecsysRunContext
from mlflow_recsys.tracking._redact import redact
from mlflow_recsys.tracking._runs import FAILED, RUNNING
from mlflow_recsys.tracking._server_errors import is_unreachable

_log = logging.getLogger(__name__)

#: The variable ``mlflow run`` sets to the run it created for the entry point.
RUN_ID_ENV = "MLFLOW_RUN_ID"


def absolute_sqlite_uri(uri: str) -> str:
    """``uri`` with a relative SQLite path made absolute: ``mlflow run`` starts each step in the project's
    folder, and a Ray worker in its own, where a relative ``sqlite:///mlruns.db`` names another database."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/") and ":memory:" not in uri:
        return prefix + str(Path(uri[len(prefix) :]).resolve())
    return uri


def mark_training_experiment(experiment_id: str) -> None:
    """Tag the experiment as one holding training runs (the server's run lists look for the tag). Trainings that
    start together (on Ray, say) race to insert the same tag and SQLite refuses all but the first with a
    unique-constraint error: a loser that finds the tag set has nothing left to do.

    Raises
    ------
    MlflowException
        When the tag could not be set and is not there.
    """
    client = MlflowClient()
    try:
        client.set_experiment_tag(experiment_id, tags.HAS_TRAINING_RUNS, "true")
    except MlflowException:
        if client.get_experiment(experiment_id).tags.get(tags.HAS_TRAINING_RUNS) != "true":
            raise


def check_run_is_free(run: Run) -> None:
    """A RunOwnershipError unless a step may take the run of ``MLFLOW_RUN_ID`` over: RUNNING, not deleted,
    without a ``recsys.role`` tag. The message names the run id, its status and role, and what to do instead."""
    role = run.data.tags.get(tags.ROLE)
    deleted = run.info.lifecycle_stage != LifecycleStage.ACTIVE
    if run.info.status == RUNNING and role is None and not deleted:
        return
    found_role = f"{tags.ROLE}={role!r}" if role is not None else f"no {tags.ROLE} tag"
    raise RunOwnershipError(
        f"{RUN_ID_ENV}: expected a RUNNING run without a {tags.ROLE} tag (the run `mlflow run` creates for an entry "
        f"point), found run {run.info.run_id} with status {run.info.status}, {found_role}"
        f"{', deleted' if deleted else ''}; nothing was logged to it. To log to a new run, {_ENV_ADVICE}"
    )


_ENV_ADVICE = (
    f"unset {RUN_ID_ENV} (it is inherited from an enclosing `mlflow run`) so that this step logs to a "
    "new run of its own"
)


def _environment_run() -> Run | None:
    """The run of ``MLFLOW_RUN_ID`` once :func:`check_run_is_free` accepts it; None when the variable is unset."""
    run_id = os.environ.get(RUN_ID_ENV, "").strip()
    if not run_id:
        return None
    try:
        run = MlflowClient().get_run(run_id)
    except MlflowException as exc:
        if exc.error_code != ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            raise
        raise RunOwnershipError(
            f"{RUN_ID_ENV}: expected the id of a run in the tracking store {redact(mlflow.get_tracking_uri())}, "
            f"found {run_id!r}, which it does not hold; {_ENV_ADVICE}"
        ) from None
    check_run_is_free(run)
    return run


class StepTarget(NamedTuple):
    """Where a step's run goes (see :func:`check_step_run`): at most one of the two ids is set."""

    parent_run_id: str | None  # the caller's active run, which the step's new run is nested under
    environment_run_id: str | None  # the run of MLFLOW_RUN_ID (mlflow run's), which the step adopts


def check_step_run() -> StepTarget:
    """Check, writing nothing, where every step's run goes: nested under the caller's active run (which wins over
    ``MLFLOW_RUN_ID``), else the run of ``MLFLOW_RUN_ID`` (``mlflow run``'s) once :func:`check_run_is_free` accepts
    it (a ``recsys.role`` means an enclosing step's, inherited), else a new run. RunOwnershipError otherwise."""
    parent_id, existing = _step_target()
    return StepTarget(parent_id, None if existing is None else existing.info.run_id)


def _step_target() -> tuple[str | None, Run | None]:
    active = mlflow.active_run()
    if active is None:
        return None, _environment_run()
    parent = MlflowClient().get_run(active.info.run_id)
    if parent.info.status != RUNNING or parent.info.lifecycle_stage != LifecycleStage.ACTIVE:
        deleted = ", deleted" if parent.info.lifecycle_stage != LifecycleStage.ACTIVE else ""
        raise RunOwnershipError(
            f"the active run: expected a RUNNING run to nest this step's run under, found run "
            f"{parent.info.run_id} with status {parent.info.status}{deleted}; end it (mlflow.end_run()) so that "
            "this step starts a run of its own"
        )
    return parent.info.run_id, None


def entry_point_run(
    run_name: str,
    *,
    experiment_id: str | None = None,
    params: dict | None = None,
    whole_params_in: str = "artifacts",
    tags: dict[str, str] | None = None,
):
    """Start the step's run by the rule of :func:`check_step_run` and log ``params`` first; a :class:`StepRun`.

    A param too long for MLflow (which would cut it silently) is logged as its digest pointing at
    ``whole_params_in``. ``tags`` are on a new run from its first moment, so a SIGKILLed process still leaves a run
    that says what it is."""
    parent_id, existing = _step_target()
    run_name = shorten(storable(run_name), MAX_RUN_NAME_LENGTH)
    texts = fit_values(_param_texts(params or {}), MAX_PARAM_LENGTH, f"the whole value is in {whole_params_in}")
    if existing is None:
        run, to_log = _start_new_run(run_name, experiment_id, parent_id, tags or {}), texts
    else:
        run = mlflow.start_run(run_id=existing.info.run_id)
        to_log = {k: v for k, v in texts.items() if k not in existing.data.params}
    try:
        if existing is not None:
            mlflow.set_tags({MLFLOW_RUN_NAME: run_name, **_context_tags(), **(tags or {})})
        if to_log:
            mlflow.log_params(to_log)
    except BaseException:
        mlflow.end_run(status=FAILED)
        raise
    return StepRun(run)


def _start_new_run(
    run_name: str, experiment_id: str | None, parent_id: str | None, tags: dict[str, str]
) -> mlflow.ActiveRun:
    if parent_id is None:
        return mlflow.start_run(run_name=run_name, experiment_id=experiment_id, tags=tags)
    if experiment_id is None:
        experiment_id = MlflowClient().get_run(parent_id).info.experiment_id
    # mlflow.start_run resumes MLFLOW_RUN_ID whenever it is set, nested or not; the caller's run wins here.
    inherited = os.environ.pop(RUN_ID_ENV, None)
    try:
        return mlflow.start_run(
            run_name=run_name, experiment_id=experiment_id, nested=True, parent_run_id=parent_id, tags=tags
        )
    finally:
        if inherited is not None:
            os.environ[RUN_ID_ENV] = inherited


def _context_tags() -> dict[str, str]:
    """The tags :class:`RecsysRunContext` gives the runs MLflow starts: `mlflow run` made the entry point's run
    without asking context providers, so a step that takes it over adds them."""
    provider = RecsysRunContext()
    return provider.tags() if provider.in_context() else {}


class StepRun(mlflow.ActiveRun):
    """The run of one step, as a context manager: on an exception it ends FAILED and says why in ``recsys.error``."""

    def __exit__(self, exc_type, exc_val, exc_tb):
        active = mlflow.active_run()
        if exc_val is not None and active is not None and active.info.run_id == self.info.run_id:
            mark_failed(self.info.run_id, exc_val, end=True, keep_reason=True)
        return super().__exit__(exc_type, exc_val, exc_tb)


def mark_failed(run_id: str, exc: BaseException, *, end: bool, keep_reason: bool = False) -> None:
    """Record why run ``run_id`` failed in ``recsys.error`` (:func:`~mlflow_recsys.errors.failure_text`,
    redacted) and, with ``end``, end the active run FAILED. Never raises: the first error is the one the user
    must see. Nothing is recorded when the server is unreachable (the cause itself), or with ``keep_reason``
    when the run already holds a reason (a study names each failed training before it raises)."""
    if not is_unreachable(exc):
        reason = redact(failure_text(exc))
        try:
            client = MlflowClient()
            if not (keep_reason and tags.ERROR in client.get_run(run_id).data.tags):
                client.set_tag(run_id, tags.ERROR, shorten(reason, MAX_TAG_LENGTH))
        except Exception as again:  # the original error matters more than this one
            _log.warning("could not tag run %s with its error: %s", run_id, redact(str(again)))
    if end:
        try:
            mlflow.end_run(status=FAILED)
        except Exception as again:
            # mlflow.end_run leaves the local active run before telling the server, so it is ended here anyway.
            _log.warning("could not mark run %s FAILED: %s", run_id, redact(str(again)))


def record_failure_on_environment_run(exc: BaseException, role: str) -> None:
    """Say why a step failed on the run ``mlflow run`` made for it, whatever refused it (an option click
    refused, a setting, the selection, a bug): the same tags each time, ``recsys.role`` = ``role``, the run context
    provider's (package version, command) and ``recsys.error``; then end it FAILED. Only a run
    :func:`check_run_is_free` accepts, so an inherited ``MLFLOW_RUN_ID`` of another run (or one a step already
    ended) is never touched. Never raises."""
    run_id = os.environ.get(RUN_ID_ENV, "").strip()
    if not run_id or is_unreachable(exc):
        return
    client = MlflowClient()
    try:
        check_run_is_free(client.get_run(run_id))
        made_with = {tags.ROLE: role, **_context_tags()}  # its name stays the one `mlflow run` gave it
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in made_with.items()])
    except Exception:  # not ours to write to, or not there
        return
    mark_failed(run_id, exc, end=False)
    try:
        client.set_terminated(run_id, FAILED)
    except Exception as again:
        _log.warning("could not mark run %s FAILED: %s", run_id, redact(str(again)))


def log_params_once(params: dict) -> None:
    """Log to the active run the ``params`` it does not hold yet, as ``str(value)`` (``"None"`` for ``None``),
    credentials redacted. Each param has one writer: one that ``mlflow run -P`` logged before the step started
    (in its command-line form) is left as it is, since ``mlflow run`` handed the step the same value."""
    run = mlflow.active_run()
    existing = {} if run is None else MlflowClient().get_run(run.info.run_id).data.params
    to_log = {k: v for k, v in _param_texts(params).items() if k not in existing}
    if to_log:
        mlflow.log_params(to_log)


def _param_texts(params: dict) -> dict[str, str]:
    return {key: "None" if value is None else storable(redact(str(value))) for key, value in params.items()}
