"""Comparison and training runs read back as data.

:func:`load_comparison` gives back the :class:`~mlflow_recsys.stats.ComparisonReport` a comparison run reported
and :func:`load_comparison_settings` its settings; :func:`search_comparisons` puts every hypothesis of the
comparison runs of some experiments in one frame, and :func:`search_trainings` every training run (trained or
imported), so "which candidate beat which reference on nDCG@100" is a pandas query.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from mlflow.entities import LifecycleStage, Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from mlflow_recsys._parquet import ParquetRefused, read_columns
from mlflow_recsys._validation import expected
from mlflow_recsys.errors import ArtifactError, RunSelectionError
from mlflow_recsys.stats._comparison import COLUMNS, ComparisonReport
from mlflow_recsys.stats._settings import PRIMARY_ANALYSES, ComparisonSettings
from mlflow_recsys.stats._storage import COMPARISONS_FILE, REPORT_FILE, SAVED_FILES
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._comparison_files import REPORT_DIR, SEED_AVERAGED_REPORT_DIR, SETTINGS_FILE
from mlflow_recsys.tracking._downloads import download_each, download_files, download_threads
from mlflow_recsys.tracking._limits import CUT_VALUE
from mlflow_recsys.tracking._logged_models import CI_HIGH, CI_LOW
from mlflow_recsys.tracking._naming import logged_metric_keys, mlflow_metric_name
from mlflow_recsys.tracking._runs import FINISHED, find_experiment, missing, parsed_filter, search_training_runs
from mlflow_recsys.tracking._server_errors import translated_server_errors

#: The two analyses a comparison run may hold: the folder of each one's saved report and the file of its table.
_ANALYSES = {
    "representative-seed": (REPORT_DIR, "report.parquet"),
    "seed-averaged": (SEED_AVERAGED_REPORT_DIR, "seed_averaged.parquet"),
}

_RUN_INFO, _SPLIT = ("run_id", "run_name", "experiment_id", "start_time"), ("dataset", "split_digest")
#: :func:`search_comparisons`' columns: these describe the comparison run and the analysis, then come the report
#: table's :data:`~mlflow_recsys.stats.COLUMNS`.
RUN_COLUMNS = (*_RUN_INFO, *_SPLIT, "reference", "primary_metric", "correction", "analysis", "analysis_role")
COMPARISON_COLUMNS = RUN_COLUMNS + tuple(c for c in COLUMNS if c not in RUN_COLUMNS)
#: :func:`search_trainings`' columns before the metric columns.
TRAINING_COLUMNS = (*_RUN_INFO, "model", "configuration", "seed", *_SPLIT, "imported_from")

#: Most bytes one analysis table may take decoded: a report of 100,000 hypotheses is about 30 MB.
MAX_TABLE_BYTES = 256 * 2**20
#: Most bytes of a ``settings.json``: its longest fields (a reference name, the metric keys) hold a few thousand
#: characters.
MAX_SETTINGS_BYTES = 2**20


def load_comparison(run_id: str, *, analysis: str = "primary") -> ComparisonReport:
    """The report a comparison run logged, equal field by field to the one its comparison computed.

    Parameters
    ----------
    run_id : str
        A FINISHED comparison run (tag ``recsys.role`` = ``comparison``).
    analysis : ``"primary"``, ``"representative-seed"`` or ``"seed-averaged"``, default ``"primary"``
        Which of the run's reports: the analysis its conclusion rests on (its ``primary_analysis_used``
        param), the paired comparison of one trained run per model, or of each model's per-user values
        averaged over its seeds (only where a model has seeds).

    Returns
    -------
    ComparisonReport
        As :meth:`~mlflow_recsys.stats.ComparisonReport.load` reads the run's ``report/`` (or
        ``seed_averaged_report/``) artifact folder.

    Raises
    ------
    ValueError
        If ``analysis`` is not one of the three.
    RunSelectionError
        If ``run_id`` names no run, a run that is not a comparison run, or one that did not finish (a FAILED
        comparison run holds no results).
    ArtifactError
        If the run holds no such report (a comparison without seeds has no seed-averaged report) or the report's
        files are malformed.
    """
    if analysis not in ("primary", *PRIMARY_ANALYSES[1:]):
        raise ValueError(expected("analysis", "'primary', 'representative-seed' or 'seed-averaged'", analysis))
    with translated_server_errors():
        run = _comparison_run(run_id)
        kind = (
            run.data.params.get("primary_analysis_used", "representative-seed") if analysis == "primary" else analysis
        )
        folder = _ANALYSES[kind][0]
        with tempfile.TemporaryDirectory(prefix="mlflow-recsys-report-") as tmp:
            found = download_files(f"{run.info.artifact_uri}/{folder}", SAVED_FILES, tmp)
            if not {REPORT_FILE, COMPARISONS_FILE} <= set(found):
                raise ArtifactError(
                    f"run {run_id}: expected the {kind} report in {folder}/, found "
                    + ("only " + ", ".join(found) if found else "none")
                    + (" (the comparison had no seeded model)" if kind == "seed-averaged" and not found else "")
                )
            try:
                return ComparisonReport.load(tmp)
            except ValueError as exc:
                raise ArtifactError(f"run {run_id}: {folder}/ is not a saved report ({exc})") from None


def load_comparison_settings(run_id: str) -> ComparisonSettings:
    """The :class:`~mlflow_recsys.stats.ComparisonSettings` a comparison run was computed under, read
    from its ``settings.json`` (every field whole, where a param may be cut at MLflow's 6,000 characters).

    Raises
    ------
    RunSelectionError
        As :func:`load_comparison`.
    ArtifactError
        If the run holds no ``settings.json`` or it is not the settings' JSON.
    """
    with translated_server_errors():
        run = _comparison_run(run_id)
        with tempfile.TemporaryDirectory(prefix="mlflow-recsys-settings-") as tmp:
            return _read_settings(run_id, download_files(run.info.artifact_uri, [SETTINGS_FILE], tmp))


def _read_settings(run_id: str, found: dict[str, Path]) -> ComparisonSettings:
    """The settings in the downloaded ``settings.json`` of ``found``; ArtifactError naming the run otherwise."""
    if SETTINGS_FILE not in found:
        raise ArtifactError(f"run {run_id}: expected artifact {SETTINGS_FILE}, found none in the run")
    size = found[SETTINGS_FILE].stat().st_size
    if size > MAX_SETTINGS_BYTES:
        raise ArtifactError(
            f"run {run_id}: expected {SETTINGS_FILE} of at most {MAX_SETTINGS_BYTES:,} bytes, found {size:,}"
        )
    try:
        return ComparisonSettings(**json.loads(found[SETTINGS_FILE].read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise ArtifactError(f"run {run_id}: {SETTINGS_FILE} holds no comparison settings ({exc})") from None


def search_comparisons(experiments: str | Sequence[str], filter_string: str | None = None) -> pd.DataFrame:
    """Every hypothesis of the FINISHED comparison runs of ``experiments``, one row each, oldest run first.

    A comparison run of models with training seeds holds two analyses, each a row per hypothesis: the
    representative-seed and the seed-averaged comparison; ``analysis_role`` says which is the run's primary
    analysis and which the sensitivity analysis. The runs are read with paged ``search_runs`` queries, and each
    run's tables (``report.parquet``, ``seed_averaged.parquet``) downloaded by ``$MLFLOW_RECSYS_DOWNLOAD_THREADS``
    threads (default 8).

    Parameters
    ----------
    experiments : str or sequence of str
        Experiment names or ids.
    filter_string : str, optional
        An MLflow search filter, joined with ``and`` to the comparison-run filter (``tags.`recsys.role` =
        'comparison' and attributes.status = 'FINISHED'``), e.g. ``"tags.`recsys.dataset` = 'movielens-100k'"``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COMPARISON_COLUMNS`: ``run_id``, ``run_name``, ``experiment_id``, ``start_time``
        (``datetime64[ns, UTC]``), ``dataset`` and ``split_digest`` (the compared runs' tags), ``reference`` (missing
        when every pair was compared), ``primary_metric`` (missing when none was named), ``correction``,
        ``analysis`` (``"representative-seed"`` or ``"seed-averaged"``), ``analysis_role`` (``"primary"`` or
        ``"sensitivity"``), then the report's columns as :meth:`~mlflow_recsys.stats.ComparisonReport.to_frame`
        gives them: ``metric``, ``baseline``, ``candidate``, ``difference`` (candidate minus baseline, the
        metric's units), ``ci_low``/``ci_high`` (its interval at ``confidence_level``), ``p_value``,
        ``adjusted_p_value``, ``family``, ``significant``, ``direction``, ``mde``, ``wins``/``ties``/``losses``
        (users) and the rest. No runs: an empty frame with these columns.

    Raises
    ------
    RunSelectionError
        If an experiment does not exist or is deleted, or MLflow cannot parse ``filter_string``.
    ArtifactError
        If a FINISHED comparison run lacks its report table or the table is malformed, naming the run.
    TrackingServerError
        If the tracking server does not answer.
    ValueError
        If ``$MLFLOW_RECSYS_DOWNLOAD_THREADS`` is set to anything but a whole number from 1 to 64.
    """
    threads = download_threads()  # read once, and a bad setting is refused before any run is read
    with translated_server_errors():
        client = MlflowClient()
        runs = _search(client, experiments, filter_string, tags.ROLE_COMPARISON)
        frames = download_each(_hypotheses, runs, threads=threads, desc="comparison reports")
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(COMPARISON_COLUMNS)]


def search_trainings(experiments: str | Sequence[str], filter_string: str | None = None) -> pd.DataFrame:
    """The FINISHED training runs of ``experiments``, trained here or imported from another framework's lists, one
    row each, oldest first: what an experiment selection of ``compare`` takes.

    Parameters
    ----------
    experiments : str or sequence of str
        Experiment names or ids.
    filter_string : str, optional
        An MLflow search filter, joined with ``and`` to the training-run filter (``tags.`recsys.role` = 'train'
        and attributes.status = 'FINISHED'``), e.g. ``"tags.`recsys.model` = 'EASE'"``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TRAINING_COLUMNS` (``model``, ``configuration``: the ``recsys.config`` JSON of every
        hyper-parameter but the seed, ``seed``: the ``recsys.seed`` text, ``"none"`` for a deterministic model,
        ``imported_from``: the lists' format for an imported run, else missing; ``start_time`` in UTC), then a
        column per metric key any run logged (``ndcg@100``: the mean over the evaluated users) and, where
        logged, its bootstrap level interval (``ndcg@100.ci_low``, ``ndcg@100.ci_high``), NaN for a run that
        lacks it. No runs: an empty frame with :data:`TRAINING_COLUMNS`.

    Raises
    ------
    RunSelectionError
        If an experiment does not exist or is deleted, or MLflow cannot parse ``filter_string``.
    TrackingServerError
        If the tracking server does not answer.
    """
    with translated_server_errors():
        runs = _search(MlflowClient(), experiments, filter_string, tags.ROLE_TRAIN)
    names = {"model": tags.MODEL, "configuration": tags.CONFIG, "seed": tags.SEED, "imported_from": tags.IMPORTED_FROM}
    rows = [_run_columns(r) | {c: r.data.tags.get(tag) for c, tag in names.items()} for r in runs]
    frame = pd.DataFrame(rows, columns=list(TRAINING_COLUMNS))
    keys = logged_metric_keys({name for r in runs for name in r.data.metrics})
    for key in keys:
        for suffix in ("", CI_LOW, CI_HIGH):
            metric = mlflow_metric_name(key) + suffix
            values = [r.data.metrics.get(metric, float("nan")) for r in runs]
            if not suffix or any(metric in r.data.metrics for r in runs):
                frame[key + suffix] = pd.Series(values, dtype="float64")
    return frame


def _comparison_run(run_id: str) -> Run:
    """The FINISHED comparison run ``run_id``; RunSelectionError naming what it is otherwise."""
    if not isinstance(run_id, str) or not run_id:
        raise RunSelectionError(expected("run_id", "the id of a comparison run", run_id))
    try:
        run = MlflowClient().get_run(run_id)
    except MlflowException as exc:
        if not missing(exc):
            raise
        raise RunSelectionError(f"run_id: expected the id of a comparison run, found no run {run_id!r}") from None
    if run.info.lifecycle_stage != LifecycleStage.ACTIVE:
        raise RunSelectionError(f"run_id: expected an active comparison run, found run {run_id} deleted; restore it")
    role = run.data.tags.get(tags.ROLE)
    if role != tags.ROLE_COMPARISON:
        raise RunSelectionError(
            f"run_id: expected a comparison run ({tags.ROLE} = {tags.ROLE_COMPARISON}), found run {run_id} with "
            f"{tags.ROLE} = {role!r}"
        )
    if run.info.status != FINISHED:
        why = f" ({run.data.tags[tags.ERROR]})" if run.data.tags.get(tags.ERROR) else ""
        found = f"found run {run_id} {run.info.status}{why}"
        raise RunSelectionError(f"run_id: expected a FINISHED comparison run, {found}; it holds no results")
    return run


def _search(client: MlflowClient, experiments, filter_string: str | None, role: str) -> list[Run]:
    """The FINISHED active runs of ``role`` in ``experiments`` that ``filter_string`` selects, oldest first;
    RunSelectionError for experiments or a filter that are no such thing."""
    if not isinstance(experiments, (str, list, tuple)):
        raise RunSelectionError(expected("experiments", "an experiment name or id, or a list of them", experiments))
    names = [experiments] if isinstance(experiments, str) else list(experiments)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise RunSelectionError(expected("experiments", "experiment names or ids", experiments))
    if filter_string is not None and not isinstance(filter_string, str):
        raise RunSelectionError(expected("filter_string", "an MLflow search filter or None", filter_string))
    ids = list(dict.fromkeys(find_experiment(client, n, argument="experiments").experiment_id for n in names))
    with parsed_filter(filter_string):
        return search_training_runs(client, ids, filter_string or None, role=role)[0]


def _run_columns(run: Run) -> dict:
    return {
        "run_id": run.info.run_id,
        "run_name": run.info.run_name,
        "experiment_id": run.info.experiment_id,
        "start_time": pd.Timestamp(run.info.start_time, unit="ms", tz="UTC"),
        "dataset": run.data.tags.get(tags.DATASET) or None,
        "split_digest": run.data.tags.get(tags.SPLIT_DIGEST) or None,
    }


def _hypotheses(run: Run) -> pd.DataFrame:
    """The rows :func:`search_comparisons` gives for one comparison run: each analysis table it holds."""
    run_id = run.info.run_id
    primary = run.data.params.get("primary_analysis_used", "representative-seed")
    logged = run.data.params.get("reference", "None")
    # From settings.json, one request more, where "None" might be a model's name or the param was cut.
    exact = logged == "None" or CUT_VALUE.match(logged) is not None
    reference: str | None = logged
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-query-") as tmp:
        # The run's own artifact URI, not runs:/<id>: resolving that costs a get_run request per run.
        wanted = [file for _, file in _ANALYSES.values()] + ([SETTINGS_FILE] if exact else [])
        found = download_files(run.info.artifact_uri, wanted, tmp)
        if "report.parquet" not in found:
            raise ArtifactError(f"run {run_id}: expected artifact report.parquet, found none")
        if exact:
            reference = _read_settings(run_id, found).reference
        frames = []
        for kind, (_, file) in _ANALYSES.items():
            if file not in found:
                continue
            try:
                table = read_columns(found[file], COLUMNS, rows=None, max_bytes=MAX_TABLE_BYTES, name=file)
            except ParquetRefused as exc:
                raise ArtifactError(f"run {run_id}: {exc}") from None
            role = "primary" if kind == primary else "sensitivity"
            frames.append(table.to_pandas().assign(analysis=kind, analysis_role=role))
    out = pd.concat(frames, ignore_index=True)
    correction = run.data.params.get("correction", "None")
    described = _run_columns(run) | {"reference": reference, "correction": None if correction == "None" else correction}
    described["primary_metric"] = run.data.tags.get(tags.PRIMARY_METRIC) or None
    return out.assign(**{k: [v] * len(out) for k, v in described.items()})


__all__ = ["COMPARISON_COLUMNS", "TRAINING_COLUMNS", "load_comparison", "load_comparison_settings"]
__all__ += ["search_comparisons", "search_trainings"]
