"""The main job: a study (:mod:`~mlflow_recsys.tracking._study_file`) run step by step, each step an MLflow run
under the study run: for each dataset its split, the trainings on an executor
(:mod:`~mlflow_recsys.tracking._executors`) and the comparison; then the table and the verdict across datasets
(:mod:`~mlflow_recsys.tracking._study_summary`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import mlflow
from mlflow.entities import LifecycleStage, Run
from mlflow.exceptions import ExecutionException, MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NOTE

from mlflow_recsys import _validation as validation
from mlflow_recsys._digests import shorten
from mlflow_recsys.data._split_config import SplitConfig
from mlflow_recsys.errors import RecsysError, StudyStepError, failure_text
from mlflow_recsys.report._escaping import visible_text
from mlflow_recsys.settings_schema import NONE_WORD, settings_of
from mlflow_recsys.stats._ranks import datasets_needed, p_value_floor
from mlflow_recsys.stats._results import significance_level
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._comparison import RunComparison, compare_runs
from mlflow_recsys.tracking._context import absolute_sqlite_uri, check_step_run, entry_point_run
from mlflow_recsys.tracking._downloads import download_threads
from mlflow_recsys.tracking._executors import (
    FAILED_PROJECT_RUN,
    Echo,
    EntryPoints,
    Executor,
    Training,
    TrainingOutcome,
    TrainingTarget,
    make_executor,
)
from mlflow_recsys.tracking._imports import log_recommendations
from mlflow_recsys.tracking._limits import MAX_TAG_LENGTH, fit_text
from mlflow_recsys.tracking._naming import mlflow_metric_name
from mlflow_recsys.tracking._redact import hide_run_links_with_credentials, redact
from mlflow_recsys.tracking._runs import FINISHED, RunSelectionError, search_all, version_of_run
from mlflow_recsys.tracking._server_page import recsys_page_url
from mlflow_recsys.tracking._study_file import StudyDataset, StudyModel, StudyPlan, candidate_names
from mlflow_recsys.tracking._study_summary import log_summary, summarize

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetOutcome:
    """What became of one dataset of a study: its split run, each training, the runs imported for it, and its
    comparison (None when fewer than two candidates finished, or when it failed: ``error`` says why)."""

    dataset: str
    split_id: str | None
    trainings: list[TrainingOutcome]
    imported: list[tuple[str, str]]  # (model, run id)
    comparison: RunComparison | None = None
    error: str | None = None
    import_errors: tuple[str, ...] = ()


def run_study(
    plan: StudyPlan,
    *,
    executor: Executor | None = None,
    project_uri: str = ".",
    echo: Callable[[str], None] = _log.info,
    study_file: str | os.PathLike | None = None,
) -> str:
    """Run a study: for each dataset its split, every training, and the comparison of what finished; then the study
    run's summary across datasets. Returns the study run's id.

    The split of each dataset is the ``split`` entry point of the ``MLproject`` at ``project_uri``
    (``mlflow.projects.run``), the trainings run on ``executor``, and each comparison is
    :func:`~mlflow_recsys.tracking.compare_runs` nested under the study run, as every step is. FINISHED training runs
    of earlier studies on the same split with the same model, configuration (``recsys.config``) and seed are reused,
    not retrained, and the output names them. A relative SQLite tracking URI is made absolute first, so every step
    logs to the one database the caller meant. Where two or more datasets were compared, the study run holds the
    paper's table and the verdict across datasets (``study/``: ``table.md``, ``table.tex``, ``table.csv``,
    ``effects.csv``, ``ranks.csv``, ``report.html`` and the figures); with one, its table.

    Parameters
    ----------
    plan : StudyPlan
        What to run (:func:`~mlflow_recsys.tracking._study_file.read_study` of a study file, or
        :func:`~mlflow_recsys.tracking._study_file.shorthand_plan`).
    executor : executor object, optional
        Where the trainings run; default the plan's (``SequentialExecutor`` or a ``RayExecutor`` at its address).
    echo : callable, default the ``mlflow_recsys.tracking._study`` logger at INFO
        Takes the study's own progress lines and the result. What the steps (``mlflow run`` processes) print goes to
        this process's standard output and error, whatever ``echo`` is.
    study_file : path, optional
        The file the plan was read from, logged with the study run.

    Raises
    ------
    RunOwnershipError
        If the caller's active run or ``MLFLOW_RUN_ID`` names a run the study must not log under
        (:func:`~mlflow_recsys.tracking._context.check_step_run`); no step runs.
    TypeError
        If ``plan`` is not a StudyPlan or ``echo`` is not callable; no run is made.
    ValueError
        If a device this machine lacks is asked for by the sequential executor, or ``$MLFLOW_RECSYS_DOWNLOAD_THREADS``
        is anything but a whole number from 1 to 64; no run is made.
    ImportError
        If the plan's executor is ``"ray"`` and Ray is not installed; the message says how to install it.
    ConnectionError
        If the executor joins a Ray cluster and none answers at its address; no run is made.
    StudyStepError
        If a split fails, or any training or comparison failed. The study run ends FAILED, its ``recsys.error`` tag
        and notes name each failure and why; what finished stays FINISHED and is compared and summarised first.
    """
    if not isinstance(plan, StudyPlan):
        raise TypeError(validation.expected("plan", "a StudyPlan (read_study or shorthand_plan)", plan))
    if not callable(echo):
        raise TypeError(validation.expected("echo", "a callable that takes one line of text", echo))
    if executor is None:
        name, address = plan.settings.executor, plan.settings.ray_address
        executor = make_executor(name, ray_address=address, project_uri=project_uri)
    trainings = plan.trainings()
    check_project(project_uri)
    download_threads()  # the comparisons' setting, refused now rather than after every training has run
    check_step_run()  # refuse a run we must not log into before Ray starts or anything is written
    _pin_tracking_uri()
    if any(m.runs for m in plan.models):  # a store read only when there is something to check in it
        check_imported_runs(plan, MlflowClient())
    name = plan.settings.name
    params = study_params(plan, executor)
    with (
        executor.started(trainings, echo=echo),
        entry_point_run(name, params=params, whole_params_in="plan.txt") as main,
    ):
        mlflow.set_tag(tags.ROLE, tags.ROLE_MAIN)
        mlflow.log_text(plan_text(plan), "plan.txt")  # what the study set out to do, reuse included
        if study_file is not None:
            mlflow.log_artifact(str(study_file))
        steps = EntryPoints(project_uri, main.info.experiment_id, main.info.run_id, echo)
        outcomes = [_run_dataset(d, plan, steps, executor) for d in plan.datasets]
        failures = _failures(outcomes)
        if failures:
            mlflow.set_tag(tags.ERROR, shorten("; ".join(failures), MAX_TAG_LENGTH))
        mlflow.set_tag(MLFLOW_RUN_NOTE, _study_note(outcomes, executor.name))
        compared = {o.dataset: o.comparison for o in outcomes if o.comparison is not None}
        if compared:
            _show_results(plan, compared, _missing(outcomes), echo)
        if failures:
            done = [
                f"{d}: the {sum(map(len, c.source_runs.values()))} finished were compared in run {c.run_id}"
                for d, c in compared.items()
            ]
            rerun = _RERUN if any(not t.usable for o in outcomes for t in o.trainings) else ""
            raise StudyStepError(redact(shorten("study: " + "; ".join(failures + done), 4000)) + rerun)
        return main.info.run_id


_RERUN = ". Rerun the study to train only what did not finish"


def check_project(project_uri: str | os.PathLike) -> None:
    """A ValueError unless ``project_uri`` is a folder holding an ``MLproject`` (or a URI MLflow fetches): the
    splits run its ``split`` entry point."""
    text = os.fspath(project_uri)
    if "://" not in text and not (Path(text) / "MLproject").is_file():
        raise ValueError(
            f"project_uri: expected the folder of mlflow-recsys's MLproject (a checkout of the repository), found "
            f"{text!r} without one; run from the checkout or give --project-uri"
        )


def check_imported_runs(plan: StudyPlan, client: MlflowClient) -> None:
    """A RunSelectionError unless every run a study imports by id is a FINISHED training run of the model the
    study file names it under, checked before the study makes any run."""
    for model in plan.models:
        for run_id in (r for ids in model.runs.values() for r in ids):
            try:
                run = client.get_run(run_id)
            except MlflowException as exc:
                raise RunSelectionError(
                    f"{model.name} runs: expected a run id of this store, found {run_id!r} ({exc.message})"
                ) from None
            found = {k: run.data.tags.get(k) for k in (tags.ROLE, tags.MODEL)}
            if found[tags.ROLE] != tags.ROLE_TRAIN or run.info.status != FINISHED:
                raise RunSelectionError(
                    f"{model.name} runs: expected a FINISHED training run, found run {run_id} with "
                    f"{tags.ROLE}={found[tags.ROLE]!r} and status {run.info.status}"
                )
            if found[tags.MODEL] != model.name:
                raise RunSelectionError(
                    f"{model.name} runs: run {run_id} is the model {found[tags.MODEL]!r} (its {tags.MODEL} tag), not "
                    f"{model.name!r}; name the [[model]] as its runs name their model"
                )


def study_params(plan: StudyPlan, executor: Executor) -> dict[str, object]:
    """What the study run logs before any step: its datasets, models and trainings, and every comparison setting
    (``primary`` among them, so a comparison can say it was declared before the models were trained)."""
    compared = {
        name: declared.text(getattr(plan.comparison, name))
        for name, (default, declared) in settings_of(ComparisonSettings).items()
        if getattr(plan.comparison, name) != default
    }
    return {
        "datasets": ",".join(d.name for d in plan.datasets),
        "models": "; ".join(_model_text(m) for m in plan.models),
        "trainings_per_dataset": len(plan.trainings()),
        "metrics": ",".join(plan.metrics),
        "executor": executor.name,
        "scale": plan.settings.scale,
        "posthoc": plan.settings.posthoc,
        **compared,
    }


def _model_text(model: StudyModel) -> str:
    """``ELSA(latent_dim=24, epochs=20) seeds 0,1,2``; a grid's configurations joined by `` | ``."""
    if not model.configurations:
        return f"{model.name} (imported)"
    shown = " | ".join(", ".join(f"{k}={v}" for k, v in c.items()) for c in model.configurations)
    seeds = f" seeds {','.join(map(str, model.seeds))}" if model.seeds else ""
    return f"{model.name}({shown}){seeds}" if shown else f"{model.name}{seeds}"


def _run_dataset(dataset: StudyDataset, plan: StudyPlan, steps: EntryPoints, executor: Executor) -> DatasetOutcome:
    """One dataset's split, trainings and comparison; a failed training or comparison is an outcome."""
    steps.echo(f"\n=== {dataset.name} ===")
    try:
        split_id = _step(steps, "split", f"split {dataset.name}", split_parameters(dataset))
    except StudyStepError as exc:  # the split run ended FAILED and its output says why; the other datasets go on
        return DatasetOutcome(dataset.name, None, [], [], error=str(exc))
    digest = MlflowClient().get_run(split_id).data.tags[tags.SPLIT_DIGEST]
    target = TrainingTarget(
        f"runs:/{split_id}/checkpoint.zip", steps.experiment_id, steps.parent_run_id, tuple(plan.metrics)
    )
    outcomes = _train(executor, plan, target, split_digest=digest, echo=steps.echo)
    imported, import_errors = _imports(dataset.name, plan, target, steps.echo)
    usable = [cast(str, o.run_id) for o in outcomes if o.usable] + list(imported.values())
    runs = [(model, run_id) for (model, _), run_id in imported.items()]
    outcome = DatasetOutcome(dataset.name, split_id, outcomes, runs, import_errors=import_errors)
    candidates = {o.training.candidate for o in outcomes if o.usable} | {m for m, _ in imported}
    if len(candidates) < 2:
        return outcome  # nothing to compare
    try:
        comparison = compare_runs(run_ids=usable, settings=plan.comparison)
    except (RecsysError, ValueError, OSError) as exc:  # its run ended FAILED with the reason; the others go on
        steps.echo(f"comparison on {dataset.name} FAILED: {redact(failure_text(exc))}")
        return dataclasses.replace(outcome, error=redact(failure_text(exc)))
    return dataclasses.replace(outcome, comparison=comparison)


def _imports(
    dataset: str, plan: StudyPlan, target: TrainingTarget, echo: Callable[[str], None]
) -> tuple[dict[tuple[str, str], str], tuple[str, ...]]:
    """The runs a dataset imports, (model, what) -> run id: those named by id, and the lists of a file scored on
    the dataset's split (a run each, under the study run); and why an import failed, a text each."""
    imported = {(m.name, run_id): run_id for m in plan.models for run_id in m.runs.get(dataset, ())}
    errors = []
    for model in plan.models:
        path = model.recommendations.get(dataset)
        if path is None:
            continue
        echo(f"\n== import {model.name} ({path}) ==")
        try:
            run_id = log_recommendations(path, checkpoint=target.checkpoint, model=model.name, metrics=target.metrics)
        except (RecsysError, ValueError, OSError) as exc:  # the other candidates are compared without it
            errors.append(f"{model.name}: {redact(failure_text(exc))}")
            echo(f"import of {model.name} FAILED: {errors[-1]}")
            continue
        imported[model.name, path] = run_id
    return imported, tuple(errors)


def split_parameters(dataset: StudyDataset) -> dict[str, object]:
    """The ``split`` entry point's parameters of a dataset: its name or file, every split setting that is set
    (``none`` for a minimum rating of none), and its columns (``none`` for an absent value or time column)."""
    declared = settings_of(SplitConfig)
    settings = {
        name: declared[name][1].text(value)
        for name in declared
        if (value := getattr(dataset.split, name)) is not None or name == "min_rating"
    }
    columns = {f"{role}_col": column or NONE_WORD for role, column in dataset.columns.items()}
    return {"dataset": dataset.path or dataset.name, **settings, **columns}


def plan_text(plan: StudyPlan) -> str:
    """What :func:`run_study` would do, for ``--dry-run``: each dataset's split, the trainings it would run and those
    it would reuse (FINISHED by an earlier study on the same split, found by the split's settings), the runs it
    imports, the comparison, and the smallest p-value the number of datasets allows the ranks. Reads the tracking
    store, writes nothing."""
    uri = absolute_sqlite_uri(mlflow.get_tracking_uri())
    missing = uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists()
    client = None if missing else MlflowClient()  # a client of a SQLite file that is not there would make it
    experiment_id = None if client is None else _current_experiment(client)
    if client is not None:
        check_imported_runs(plan, client)
    trainings = plan.trainings()
    lines = [
        f"study {visible_text(plan.settings.name)}: {len(plan.datasets)} datasets x {len(trainings)} trainings each, "
        f"on the {plan.settings.executor} executor"
    ]
    for dataset in plan.datasets:
        digest = _earlier_split(client, experiment_id, dataset) if client and experiment_id else None
        reused = (
            finished_trainings(client, experiment_id, digest, trainings, plan.compared_metrics)
            if client and experiment_id and digest
            else {}
        )
        sources = {m.name: [*m.runs.get(dataset.name, ()), *_listed(m, dataset.name)] for m in plan.models}
        imported = [f"{name}: {', '.join(given)}" for name, given in sources.items() if given]
        imported += [
            f"{m.name}: {m.recommendations[dataset.name]}" for m in plan.models if dataset.name in m.recommendations
        ]
        to_train = [t.run_name for t in trainings if t.key not in reused]
        reusing = [f"{t.run_name} (run {reused[t.key].info.run_id})" for t in trainings if t.key in reused]
        lines += [
            f"\n{dataset.name} ({dataset.path or 'registered'}): split {_settings_line(dataset.split)}",
            f"  train {len(to_train)}: {', '.join(to_train) or '-'}",
            f"  reuse {len(reusing)}: {', '.join(reusing) or '-'}",
            f"  import: {'; '.join(imported) or '-'}",
            f"  compare: {', '.join(candidate_names(plan))} ({_settings_line(plan.comparison)})",
        ]
    lines.append("\n" + _floor_line(plan))
    return "\n".join(lines)


def _listed(model: StudyModel, dataset: str) -> list[str]:
    return [model.recommendations[dataset]] if dataset in model.recommendations else []


def _floor_line(plan: StudyPlan) -> str:
    k, n = len(candidate_names(plan)), len(plan.datasets)
    if n < 2:
        return "across datasets: one dataset, so nothing is pooled or ranked"
    posthoc, alpha = plan.settings.posthoc, significance_level(plan.comparison.confidence_level)
    floor = p_value_floor(k, n, posthoc)
    verdict = "alpha allows" if floor <= alpha else "rules out every pair"
    if floor > alpha:
        verdict += f" at alpha {alpha:g}: {datasets_needed(k, posthoc, alpha)} datasets would be needed"
    return (
        f"across datasets: with {n} datasets and {k} candidates the smallest {posthoc} p-value of a pair of ranks is "
        f"{floor:.4g}, which {verdict}"
    )


def _current_experiment(client: MlflowClient) -> str | None:
    """The experiment the study would log to (``MLFLOW_EXPERIMENT_ID``, ``MLFLOW_EXPERIMENT_NAME``, else the
    default), or None when it does not exist yet."""
    if os.environ.get("MLFLOW_EXPERIMENT_ID"):
        return os.environ["MLFLOW_EXPERIMENT_ID"]
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if name:
        experiment = client.get_experiment_by_name(name)
        return experiment.experiment_id if experiment else None
    return "0"


def _earlier_split(client: MlflowClient, experiment_id: str, dataset: StudyDataset) -> str | None:
    """The split digest of the newest FINISHED split run of ``dataset`` with the same settings, or None."""
    declared = settings_of(SplitConfig)
    wanted = {"dataset": dataset.path or dataset.name, **{k: getattr(dataset.split, k) for k in declared}}
    query = f"tags.`{tags.ROLE}` = '{tags.ROLE_SPLIT}' AND attributes.status = '{FINISHED}'"
    for run in search_all(client.search_runs, [experiment_id], query, order_by=["attributes.start_time DESC"]):
        params = run.data.params
        try:
            found = {k: declared[k][1].parse(params.get(k, NONE_WORD), k) for k in declared}
        except ValueError:
            continue
        if {"dataset": params.get("dataset"), **found} == wanted and params.get("columns", "{}") == _columns(dataset):
            return run.data.tags.get(tags.SPLIT_DIGEST)
    return None


def _columns(dataset: StudyDataset) -> str:
    return json.dumps(dict(dataset.columns), sort_keys=True) if dataset.columns else "{}"


def _settings_line(settings: object) -> str:
    declared = settings_of(type(settings))
    return (
        ", ".join(f"{k}={s.text(getattr(settings, k))}" for k, (d, s) in declared.items() if getattr(settings, k) != d)
        or "defaults"
    )


def _missing(outcomes: list[DatasetOutcome]) -> list[str]:
    """What the study's table lacks, one short text a dataset: a failed split, failed trainings, no comparison."""
    out = []
    for o in outcomes:
        failed = [t.training.run_name for t in o.trainings if not t.usable]
        if o.split_id is None:
            out.append(f"{o.dataset} (its split failed)")
        elif o.comparison is None:
            out.append(
                f"{o.dataset} (not compared: {'the comparison failed' if o.error else 'fewer than two candidates'})"
            )
        elif failed or o.import_errors:
            lost = failed + [e.split(":", 1)[0] for e in o.import_errors]
            out.append(f"{o.dataset}: {', '.join(lost)} (training or import failed)")
    return out


def _failures(outcomes: list[DatasetOutcome]) -> list[str]:
    """Each dataset's failed trainings and failed comparison, as one text each."""
    out = []
    for o in outcomes:
        failed = [t for t in o.trainings if not t.usable]
        if failed:
            out.append(f"{o.dataset}: {_failure_text(failed, len(o.trainings), limit=2000)}")
        if o.error:
            out.append(f"{o.dataset}: {'the comparison' if o.split_id else 'the split'} failed: {o.error}")
        out += [f"{o.dataset}: the import of {e}" for e in o.import_errors]
    return out


def _pin_tracking_uri() -> None:
    """The steps run in the project's folder (--project-uri), where a relative SQLite URI names another database."""
    uri = mlflow.get_tracking_uri()
    if absolute_sqlite_uri(uri) != uri:
        mlflow.set_tracking_uri(absolute_sqlite_uri(uri))
    hide_run_links_with_credentials(uri)


def _show_results(
    plan: StudyPlan, compared: Mapping[str, RunComparison], missing: list[str], echo: Callable[[str], None]
) -> None:
    """Print each comparison run's summary.txt (its notes as plain text), log the study's summary (which names what
    is ``missing``) and print it, and say where to see the runs."""
    for dataset, comparison in compared.items():
        print_result(comparison.run_id, dataset, echo)
    mlflow.set_tag(tags.COMPARISON_RUN, ",".join(c.run_id for c in compared.values()))
    started = time.perf_counter()
    summary = summarize(plan, compared, missing)
    log_summary(summary)
    if len(compared) > 1:
        seconds = time.perf_counter() - started
        echo(f"\n== Across datasets (the study run's study/report.html, made in {seconds:.1f} s) ==\n")
        echo(summary.text())
    study = cast(mlflow.ActiveRun, mlflow.active_run()).info
    (only,) = compared.values() if len(compared) == 1 else (None,)
    echo(_ui_hint(only.run_id if only else study.run_id, study.experiment_id))


def print_result(comparison_run_id: str, dataset: str, echo: Callable[[str], None]) -> None:
    """Print a comparison run's ``summary.txt``: its notes as plain text, not markdown."""
    echo(f"\n== Result on {dataset} (the comparison run's summary.txt) ==\n")
    echo(mlflow.artifacts.load_text(f"runs:/{comparison_run_id}/summary.txt").rstrip("\n"))


def _step(steps: EntryPoints, entry_point: str, run_name: str, parameters: dict) -> str:
    """The step's run id; a StudyStepError if it fails."""
    try:
        return steps.run(entry_point, run_name, parameters)
    except ExecutionException as exc:
        # The step's run says why in recsys.error when the step got as far as recording it.
        found = FAILED_PROJECT_RUN.search(exc.message)
        reason = MlflowClient().get_run(found.group(1)).data.tags.get(tags.ERROR) if found else None
        why = f"run {found.group(1)}: {reason}" if found and reason else f"{exc.message}; its output is above"
        raise StudyStepError(redact(f"step {run_name!r} failed ({why})")) from None


def _train(
    executor: Executor, plan: StudyPlan, target: TrainingTarget, *, split_digest: str, echo: Echo
) -> list[TrainingOutcome]:
    """Reuse what earlier studies finished, train the rest on ``executor``; one outcome per training, in order."""
    trainings = plan.trainings()
    client = MlflowClient()
    earlier = finished_trainings(client, target.experiment_id, split_digest, trainings, plan.compared_metrics)
    outcomes = {}
    for training in trainings:
        run = earlier.get(training.key)
        if run is not None:
            outcomes[training.key] = TrainingOutcome(training, "reused", run.info.run_id)
            echo(
                f"reusing {training.run_name}: run {run.info.run_id}, FINISHED in study "
                f"{run.data.tags[MLFLOW_PARENT_RUN_ID]}"
            )
    to_train = [t for t in trainings if t.key not in outcomes]
    echo(f"\n== {len(to_train)} trainings on the {executor.name} executor, {len(outcomes)} reused ==")
    if to_train:
        for outcome in executor.run(to_train, target, echo=echo):
            outcomes[outcome.training.key] = outcome
    return [outcomes[t.key] for t in trainings]


def finished_trainings(
    client: MlflowClient,
    experiment_id: str,
    split_digest: str,
    trainings: Sequence[Training],
    metrics: Sequence[str] = (),
) -> dict[tuple[str, str, str], Run]:
    """FINISHED training runs that earlier studies (a parent with ``recsys.role=main``, not deleted) made of
    ``trainings`` on this split and that scored every key of ``metrics``, by training key; of several, the
    newest. A run that lacks a metric the study compares, or that is no version of the registered model its training
    registers under, is trained again, not reused."""
    wanted = {t.key: t.register for t in trainings}
    logged = [mlflow_metric_name(m) for m in metrics]
    query = (
        f"tags.`{tags.ROLE}` = '{tags.ROLE_TRAIN}' AND tags.`{tags.SPLIT_DIGEST}` = '{split_digest}' "
        f"AND attributes.status = '{FINISHED}'"
    )
    found: dict[tuple[str, str, str], Run] = {}
    studies: dict[str, bool] = {}
    newest_first = search_all(client.search_runs, [experiment_id], query, order_by=["attributes.start_time DESC"])
    for run in newest_first:
        run_tags = run.data.tags
        key = (run_tags.get(tags.MODEL), run_tags.get(tags.CONFIG), run_tags.get(tags.SEED))
        if key not in wanted or key in found or any(m not in run.data.metrics for m in logged):
            continue
        register = wanted[key]
        if register is not None and version_of_run(client, register, run.info.run_id) is None:
            continue
        if _is_study(client, run_tags.get(MLFLOW_PARENT_RUN_ID), studies):
            found[key] = run
    return found


def _is_study(client: MlflowClient, run_id: str | None, seen: dict[str, bool]) -> bool:
    if not run_id:
        return False
    if run_id not in seen:
        try:
            parent = client.get_run(run_id)
        except MlflowException:  # removed for good
            seen[run_id] = False
        else:
            main = parent.data.tags.get(tags.ROLE) == tags.ROLE_MAIN
            seen[run_id] = main and parent.info.lifecycle_stage == LifecycleStage.ACTIVE
    return seen[run_id]


def _failure_text(failed: list[TrainingOutcome], total: int, *, limit: int) -> str:
    """``2 of 4 trainings failed: ELSA seed 1 (run <id>): <reason>; ...``, cut to ``limit`` characters."""
    items = [f"{o.training.run_name} (run {o.run_id or 'not started'}): {o.reason}" for o in failed]
    return shorten(f"{len(failed)} of {total} trainings failed: " + "; ".join(items), limit)


def _study_note(outcomes: list[DatasetOutcome], executor: str) -> str:
    """The study run's notes: each dataset's trainings, what became of them, their runs and, for a failure, why."""
    from mlflow_recsys.report._escaping import escape_markdown

    def row(d: DatasetOutcome, o: TrainingOutcome, reasons: bool) -> str:
        status = {"trained": "trained", "reused": "reused (an earlier study's run)", "failed": "**FAILED**"}[o.status]
        seconds = f"{o.seconds:.1f}" if o.seconds is not None else ""
        reason = escape_markdown(o.reason) if reasons and o.reason else ""
        name = escape_markdown(o.training.run_name)
        return f"| {escape_markdown(d.dataset)} | {name} | {status} | {o.run_id or ''} | {seconds} | {reason} |"

    splits = ", ".join(f"{escape_markdown(d.dataset)}: {d.split_id or 'FAILED'}" for d in outcomes)
    head = (
        f"Trainings of this study on the {executor} executor (split runs {splits}); a rerun reuses the finished "
        "ones. Seconds: from the start (sequential) or the submission (Ray) to the end. The table across datasets "
        "and the verdict are in the artifacts' study/ folder."
        "\n\n| dataset | training | outcome | run | seconds | reason |\n|---|---|---|---|---|---|\n"
    )
    imports = [
        f"| {escape_markdown(d.dataset)} | {escape_markdown(model)} | imported | {run_id} |  |  |"
        for d in outcomes
        for model, run_id in d.imported
    ]
    rows = [[row(d, o, reasons) for d in outcomes for o in d.trainings] + imports for reasons in (True, False)]
    return fit_text(["".join(head) + "\n".join(r) for r in rows] + [shorten(head, MAX_TAG_LENGTH)])


def _ui_hint(run_id: str, experiment_id: str) -> str:
    # Printed, so the password of a tracking server or database stays out; the user has it already.
    uri = redact(absolute_sqlite_uri(mlflow.get_tracking_uri()))  # absolute: the command works from any folder
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    if uri.startswith(("http://", "https://")):
        page = recsys_page_url(experiment_id)
        return f"\nOpen {uri}/#/experiments/{experiment_id}/runs/{run_id} to see the runs." + (
            f"\nPick runs and compare them again on {page}" if page else ""
        )
    mlflow_cli = mlflow_cli if mlflow_cli.exists() else Path("mlflow")
    return (
        "\nTo see every run, its artifacts and the report in the MLflow UI, run:\n\n"
        f"    {mlflow_cli} ui --backend-store-uri {uri} --port 5000\n\n"
        f"then open http://127.0.0.1:5000/#/experiments/{experiment_id}/runs/{run_id}\n\n"
        "To tick runs and compare them from the browser as well, serve the same store with the recsys pages (the\n"
        "key signs their forms, as MLflow's basic-auth requires one):\n\n"
        "    export MLFLOW_FLASK_SERVER_SECRET_KEY=\"$(python -c 'import secrets; print(secrets.token_hex(32))')\"\n"
        f"    {mlflow_cli} server --app-name recsys --backend-store-uri {uri} --port 5000\n\n"
        f"then open http://127.0.0.1:5000/recsys/experiments/{experiment_id}"
    )
