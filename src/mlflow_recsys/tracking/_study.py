"""The main job: split, train EASE and ELSA under each seed, compare; every step an MLflow run under the study
run, the trainings on an executor (:mod:`~mlflow_recsys.tracking._executors`)."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import mlflow
from mlflow.entities import LifecycleStage, Run
from mlflow.exceptions import ExecutionException, MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NOTE

from mlflow_recsys import _validation as validation
from mlflow_recsys._digests import shorten
from mlflow_recsys.errors import StudyStepError
from mlflow_recsys.models._registry import model_spec
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._context import absolute_sqlite_uri, check_step_run, entry_point_run
from mlflow_recsys.tracking._executors import (
    Echo,
    EntryPoints,
    Executor,
    Training,
    TrainingOutcome,
    TrainingTarget,
    make_executor,
)
from mlflow_recsys.tracking._limits import MAX_TAG_LENGTH, duplicates, fit_text
from mlflow_recsys.tracking._redact import hide_run_links_with_credentials, redact
from mlflow_recsys.tracking._runs import FINISHED, search_all
from mlflow_recsys.tracking._server_page import recsys_page_url
from mlflow_recsys.tracking._training import configuration_tag

#: Hyper-parameters each training checks where it runs: the seed is its own, and the device is the machine's
#: that trains it (a cluster's driver may have no GPU). The study checks the others before any run.
_CHECKED_BY_TRAINING = ("seed", "device")

_log = logging.getLogger(__name__)


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
    device: str = "cpu",
    executor: str | Executor = "sequential",
    project_uri: str = ".",
    echo: Callable[[str], None] = _log.info,
) -> str:
    """Split, train EASE once and ELSA under each seed, compare; returns the comparison run id.

    The split and the comparison are the ``split`` and ``compare`` entry points of the ``MLproject`` at
    ``project_uri`` (``mlflow.projects.run``), the trainings run on ``executor``; every step is a child run of the
    study run. FINISHED training runs of earlier studies on the same split with the same model, configuration
    (``recsys.config``) and seed are reused, not retrained, and the output names them. A relative SQLite tracking
    URI is made absolute first, so every step logs to the one database the caller meant.

    Parameters
    ----------
    device : str, default ``"cpu"``
        ELSA's torch device. On Ray, a CUDA device makes each ELSA task ask Ray for one GPU.
    executor : ``"sequential"``, ``"ray"`` or an executor object, default ``"sequential"``
        One ``train`` entry point after another, or one Ray task each on a local Ray started for the study; to
        join a cluster, pass ``RayExecutor(address="auto")`` (or an address) from
        :mod:`mlflow_recsys.tracking._executors`.
    echo : callable, default the ``mlflow_recsys.tracking._study`` logger at INFO
        Takes the study's own progress lines and the result. What the steps (``mlflow run`` processes) print
        goes to this process's standard output and error, whatever ``echo`` is.

    Raises
    ------
    RunOwnershipError
        If the caller's active run or ``MLFLOW_RUN_ID`` names a run the study must not log under
        (:func:`~mlflow_recsys.tracking._context.check_step_run`); no step runs.
    TypeError
        If ``echo`` is not callable; no run is made.
    ValueError
        If ``seeds`` is not an ordered collection of integers, holds fewer than two seeds or one twice, or a
        hyper-parameter other than a seed or the device is invalid; no run is made. A seed or a device the model
        refuses fails that training alone.
    ImportError
        If ``executor`` is ``"ray"`` and Ray is not installed; the message says how to install it.
    ConnectionError
        If the executor joins a Ray cluster and none answers at its address; no run is made.
    StudyStepError
        If the split or the comparison fails, or any training failed. The study run ends FAILED, its
        ``recsys.error`` tag and notes name each failed training, its run and why; the trainings that finished
        stay FINISHED and, when at least two models finished, are compared first.
    """
    seeds = _seeds_iv(seeds)
    if not callable(echo):
        raise TypeError(validation.expected("echo", "a callable that takes one line of text", echo))
    if isinstance(executor, str):
        executor = make_executor(executor, project_uri=project_uri)
    trainings = study_trainings(
        l2=l2, seeds=seeds, latent_dim=latent_dim, batch_size=batch_size, epochs=epochs, lr=lr, device=device
    )
    check_step_run()  # refuse a run we must not log into before Ray starts or anything is written
    _pin_tracking_uri()
    asked = {"dataset": dataset, "split_seed": split_seed, "seeds": ",".join(map(str, seeds)), "metrics": metrics}
    params = {**asked, "primary": primary, "n_resamples": n_resamples, "device": device, "executor": executor.name}
    with executor.started(trainings, echo=echo), entry_point_run(f"study {dataset}", params=params) as main_run:
        mlflow.set_tag(tags.ROLE, tags.ROLE_MAIN)
        client = MlflowClient()
        experiment_id, study_id = main_run.info.experiment_id, main_run.info.run_id
        step = functools.partial(_step, EntryPoints(project_uri, experiment_id, study_id, echo))
        split_id = step("split", f"split {dataset}", {"dataset": dataset, "seed": split_seed})
        outcomes = _train(
            executor,
            trainings,
            TrainingTarget(f"runs:/{split_id}/checkpoint.zip", experiment_id, study_id),
            split_digest=client.get_run(split_id).data.tags[tags.SPLIT_DIGEST],
            echo=echo,
        )
        failed = [o for o in outcomes if not o.usable]
        usable = [o for o in outcomes if o.usable]
        if failed:
            mlflow.set_tag(tags.ERROR, _failure_text(failed, len(outcomes), limit=MAX_TAG_LENGTH))
        mlflow.set_tag(MLFLOW_RUN_NOTE, _study_note(outcomes, executor.name, split_id))

        compare_id = None
        if len({o.training.model for o in usable}) >= 2:  # else there is nothing to compare
            run_ids = ",".join(cast(str, o.run_id) for o in usable)  # a usable outcome has a run
            compared = {"run_ids": run_ids, "reference": "EASE", "metrics": metrics, "primary": primary}
            compare_id = step("compare", "compare EASE vs ELSA", {**compared, "n_resamples": n_resamples})
            _show_result(compare_id, experiment_id, echo)
        if failed:
            raise _study_failure(failed, len(outcomes), len(usable), compare_id)
        return cast(str, compare_id)  # nothing failed, so both models finished and were compared


def _pin_tracking_uri() -> None:
    """The steps run in the project's folder (--project-uri), where a relative SQLite URI names another database."""
    uri = mlflow.get_tracking_uri()
    if absolute_sqlite_uri(uri) != uri:
        mlflow.set_tracking_uri(absolute_sqlite_uri(uri))
    hide_run_links_with_credentials(uri)


def _study_failure(failed: list, n_trainings: int, n_usable: int, compare_id: str | None) -> StudyStepError:
    compared = (
        f"the {n_usable} finished were compared in run {compare_id}"
        if compare_id
        else f"the {n_usable} finished were not compared (fewer than two models finished)"
    )
    return StudyStepError(
        f"study: {_failure_text(failed, n_trainings, limit=2000)}; {compared}. Rerun the study to train only what "
        "did not finish"
    )


def _show_result(compare_id: str, experiment_id: str, echo: Callable[[str], None]) -> None:
    """Tag the study run with its comparison run; print that run's summary.txt (its notes, which are markdown,
    as plain text) and where to see it."""
    mlflow.set_tag(tags.COMPARISON_RUN, compare_id)
    echo("\n== Result (the comparison run's summary.txt) ==\n")
    echo(mlflow.artifacts.load_text(f"runs:/{compare_id}/summary.txt").rstrip("\n"))
    echo(_ui_hint(compare_id, experiment_id))


def _step(steps: EntryPoints, entry_point: str, run_name: str, parameters: dict) -> str:
    """The step's run id; a StudyStepError if it fails."""
    try:
        return steps.run(entry_point, run_name, parameters)
    except ExecutionException as exc:
        raise StudyStepError(redact(f"step {run_name!r} failed ({exc.message}); its output is above")) from None


def _seeds_iv(seeds: object) -> list[int]:
    """``seeds`` as a list of at least two ints; a seed's range is the training's own check, so a refused seed
    fails that training alone."""
    listed = validation.ordered(seeds, "seeds", "a list of integer seeds")
    checked = [validation.integer(seed, "seeds") for seed in listed]
    if len(checked) < 2:
        raise ValueError(f"seeds: expected at least 2 ELSA seeds to measure retraining spread, found {checked}")
    return checked


def study_trainings(
    *, l2: float, seeds: Sequence[int], latent_dim: int, batch_size: int, epochs: int, lr: float, device: str = "cpu"
) -> list[Training]:
    """The study's trainings: EASE, then ELSA under each seed. A ValueError for a repeated seed, or a
    hyper-parameter other than the seed or the device the model's config refuses."""
    repeated = duplicates([str(seed) for seed in seeds])
    if repeated:
        raise ValueError(f"seeds: expected each seed once, found {', '.join(repeated)} more than once in {list(seeds)}")
    elsa = {"latent_dim": latent_dim, "batch_size": batch_size, "epochs": epochs, "lr": lr, "device": device}
    return [_training("EASE", {"l2": l2}), *(_training("ELSA", {"seed": seed, **elsa}) for seed in seeds)]


def _training(model: str, hyperparameters: dict) -> Training:
    spec = model_spec(model)
    shared = {k: v for k, v in hyperparameters.items() if k not in _CHECKED_BY_TRAINING}
    config = configuration_tag(spec.build(shared).config)  # the same for every seed and on every machine
    seed = str(hyperparameters["seed"]) if spec.seeded else tags.NO_SEED
    run_name = f"{model} seed {seed}" if spec.seeded else model  # as run_train names its run
    return Training(model=model, hyperparameters=hyperparameters, run_name=run_name, config=config, seed=seed)


def _train(
    executor: Executor, trainings: list[Training], target: TrainingTarget, *, split_digest: str, echo: Echo
) -> list[TrainingOutcome]:
    """Reuse what earlier studies finished, train the rest on ``executor``; one outcome per training, in order."""
    earlier = finished_trainings(MlflowClient(), target.experiment_id, split_digest, trainings)
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
    client: MlflowClient, experiment_id: str, split_digest: str, trainings: Sequence[Training]
) -> dict[tuple[str, str, str], Run]:
    """FINISHED training runs that earlier studies (a parent with ``recsys.role=main``, not deleted) made of
    ``trainings`` on this split, by training key; of several, the newest."""
    wanted = {t.key for t in trainings}
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
        if key in wanted and key not in found and _is_study(client, run_tags.get(MLFLOW_PARENT_RUN_ID), studies):
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


def _study_note(outcomes: list[TrainingOutcome], executor: str, split_id: str) -> str:
    """The study run's notes: each training, what became of it, its run and, for a failure, why."""
    from mlflow_recsys.report._escaping import escape_markdown

    def row(o: TrainingOutcome, reasons: bool) -> str:
        status = {"trained": "trained", "reused": "reused (an earlier study's run)", "failed": "**FAILED**"}[o.status]
        seconds = f"{o.seconds:.1f}" if o.seconds is not None else ""
        reason = escape_markdown(o.reason) if reasons and o.reason else ""
        return f"| {escape_markdown(o.training.run_name)} | {status} | {o.run_id or ''} | {seconds} | {reason} |"

    head = (
        f"Trainings of this study on the {executor} executor (split run {split_id}); a rerun reuses the "
        "finished ones. Seconds: from the start (sequential) or the submission (Ray) to the end."
        "\n\n| training | outcome | run | seconds | reason |\n|---|---|---|---|---|\n"
    )
    return fit_text(
        [head + "\n".join(row(o, reasons) for o in outcomes) for reasons in (True, False)]
        + [shorten(head, MAX_TAG_LENGTH)]
    )


def _ui_hint(compare_id: str, experiment_id: str) -> str:
    # Printed, so the password of a tracking server or database stays out; the user has it already.
    uri = redact(absolute_sqlite_uri(mlflow.get_tracking_uri()))  # absolute: the command works from any folder
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    if uri.startswith(("http://", "https://")):
        page = recsys_page_url(experiment_id)
        return f"\nOpen {uri}/#/experiments/{experiment_id}/runs/{compare_id} to see the runs." + (
            f"\nPick runs and compare them again on {page}" if page else ""
        )
    mlflow_cli = mlflow_cli if mlflow_cli.exists() else Path("mlflow")
    return (
        "\nTo see every run, its artifacts and the report in the MLflow UI, run:\n\n"
        f"    {mlflow_cli} ui --backend-store-uri {uri} --port 5000\n\n"
        f"then open http://127.0.0.1:5000/#/experiments/{experiment_id}/runs/{compare_id}\n\n"
        "To tick runs and compare them from the browser as well, serve the same store with the recsys pages (the\n"
        "key signs their forms, as MLflow's basic-auth requires one):\n\n"
        "    export MLFLOW_FLASK_SERVER_SECRET_KEY=\"$(python -c 'import secrets; print(secrets.token_hex(32))')\"\n"
        f"    {mlflow_cli} server --app-name recsys --backend-store-uri {uri} --port 5000\n\n"
        f"then open http://127.0.0.1:5000/recsys/experiments/{experiment_id}"
    )
