"""Compare training runs and log the report back to MLflow as a comparison run."""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pandas as pd
import scipy
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from mlflow_recsys import _validation as validation
from mlflow_recsys._digests import shorten
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.settings_schema import settings_of
from mlflow_recsys.stats import (
    ComparisonReport,
    LowResamplesWarning,
    SeedSpread,
    Slice,
    UnverifiedPairingWarning,
    compare_models,
    compare_seed_averaged,
    seed_spread,
)
from mlflow_recsys.stats._comparison import check_replicate_memory, stratum_columns
from mlflow_recsys.stats._settings import ComparisonSettings, resolve_primary_analysis
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._artifacts import EvaluationArtifacts
from mlflow_recsys.tracking._candidates import (
    REPORT_FIELDS,
    SEED_FIELDS,
    CandidatePlan,
    artifact_metric_keys,
    check_paired_seeds,
    pair_metric_names,
    plan_candidates,
    seed_side,
    verify_same_evaluation,
)
from mlflow_recsys.tracking._comparison_files import ComparisonFiles, write_json_files
from mlflow_recsys.tracking._comparison_run import RunTarget, page_link_text, primary_declared_in_advance, result_tags
from mlflow_recsys.tracking._context import log_params_once, record_failure_on_environment_run
from mlflow_recsys.tracking._downloads import download_threads
from mlflow_recsys.tracking._limits import MAX_PARAM_LENGTH, MAX_RUN_NAME_LENGTH, fit_values
from mlflow_recsys.tracking._naming import is_metric_key, pair_label
from mlflow_recsys.tracking._provenance import collect_provenance
from mlflow_recsys.tracking._runs import RunSelectionError, checked_run_ids, load_many, select_runs
from mlflow_recsys.tracking._server_errors import translated_server_errors
from mlflow_recsys.tracking._split_slices import runs_slices

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunComparison:
    """What :func:`compare_runs` produced.

    Attributes
    ----------
    report:
        The paired comparison, one trained run per candidate (its lowest seed, or ``representative_seed``).
    seed_spreads:
        ``(baseline, candidate)`` -> :class:`SeedSpread` for every pair where a side has seeds, in the order of
        the pairs. Keyed by the pair, not by a joined text, so no names can make two tables one;
        :func:`~mlflow_recsys.tracking._naming.pair_label` gives the text the files show.
    run_id:
        The comparison run's id.
    source_runs:
        Candidate name -> {seed tag -> run id} of the runs compared. A candidate is a model, or, when the
        selected runs of a model hold several configurations, one of them (``EASE(l2=50)``).
    representative_seed:
        The seed asked for as each model's representative, or ``None`` for the lowest.
    seed_averaged:
        When a model has two or more seeds: the same hypotheses on each model's per-user values averaged
        over all its seeds (:func:`~mlflow_recsys.stats.compare_seed_averaged`), adjusted in families of
        their own; otherwise ``None``.
    primary_analysis:
        ``"seed-averaged"`` or ``"representative-seed"``: the analysis the conclusion rests on
        (``settings.primary_analysis`` resolved); the other one, when there is one, is a sensitivity analysis.
    results:
        Candidate name -> {seed tag -> :class:`~mlflow_recsys.evaluation.EvaluationResult`}: the per-user values of
        the runs compared, as read once for the comparison (a study's summary builds on them).
    """

    report: ComparisonReport
    seed_spreads: dict[tuple[str, str], SeedSpread]
    run_id: str
    source_runs: dict[str, dict[str, str]]
    representative_seed: str | None = None
    seed_averaged: ComparisonReport | None = None
    primary_analysis: str = "representative-seed"
    results: dict[str, dict[str, EvaluationResult]] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def primary_report(self) -> ComparisonReport:
        """The report of the primary analysis: :attr:`seed_averaged` or :attr:`report`."""
        return self.seed_averaged if self.primary_analysis == "seed-averaged" and self.seed_averaged else self.report

    @property
    def representative_seed_rule(self) -> str:
        """Which run represented each seeded model in the report."""
        return f"seed {self.representative_seed}" if self.representative_seed is not None else "its lowest seed"

    def seed_frame(self) -> pd.DataFrame:
        """All seed-spread rows in one frame (empty if no model had seeds)."""
        frames = [s.to_frame() for s in self.seed_spreads.values()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_runs(
    *,
    run_ids: Sequence[str] | None = None,
    compare_url: str | None = None,
    experiment: str | None = None,
    filter_string: str | None = None,
    settings: ComparisonSettings | None = None,
    model_tag: str = tags.MODEL,
    output_experiment: str | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> RunComparison:
    """Select training runs, verify they are comparable, compare them and log a comparison run.

    Runs are grouped into candidates, then by seed (``recsys.seed``). A candidate is a model (the ``model_tag`` tag,
    ``recsys.model`` by default) in one configuration (the ``recsys.config`` tag: every hyper-parameter but the
    seed). A model whose selected runs share one configuration is one candidate under its own name; one whose runs
    hold several is a candidate per configuration, named by the hyper-parameters that differ among them
    (``EASE(l2=50)``, ``ELSA(latent_dim=64, lr=0.001)``), and ``reference`` must then name one of those. Seeds are
    pooled within a candidate only. The paired report compares one trained instance per candidate, its lowest seed
    unless ``representative_seed`` names another, so its family stays pairs x metrics. When a candidate has two or
    more seeds, a second, seed-averaged report compares each candidate's per-user values averaged over all its seeds
    (:func:`~mlflow_recsys.stats.compare_seed_averaged`, same settings), and for every pair where a candidate has
    seeds a seed-spread table (descriptive, no p-values) puts the retraining spread beside the spread across users.

    Everything that settings, run metadata and tags can show is checked before any run or experiment is created, so
    a mistake leaves nothing behind. Then, before any artifact is read, the comparison run is created (RUNNING,
    tagged with its role and source runs), so a tracking server that refuses the write (a user with READ permission
    only) stops the comparison before any work. Once the report is computed the run receives its artifacts first,
    then tags, params and metrics, and ends FINISHED. If anything fails after it was created (a check that needs the
    per-user artifacts, an interruption, a failed upload), the run ends FAILED with the reason (tag
    ``recsys.error``) and holds no results. The run goes to ``output_experiment`` or, by default, the experiment of
    the first source run; inside the caller's active run it is nested under it, and under the ``compare`` entry
    point of ``mlflow run`` that run is used (:func:`~mlflow_recsys.tracking._context.check_step_run`).

    Parameters
    ----------
    run_ids, compare_url, experiment, filter_string
        The selection, one way: see :func:`~mlflow_recsys.tracking._runs.select_runs`.
    settings : ComparisonSettings, optional
        Every statistical setting (:class:`~mlflow_recsys.stats.ComparisonSettings`; its defaults when
        omitted). ``settings.metrics`` ``None`` compares every metric the runs share;
        ``settings.representative_seed`` picks the run that stands for each seeded model in the paired report.
    model_tag : str, default ``"recsys.model"``
        The run tag that names the model.
    output_experiment : str, optional
        Name or id of the comparison run's experiment, made if no experiment has that name or id (default:
        the first source run's).
    on_stage : callable, optional
        Called with each stage's name as it begins, in the order of :data:`STAGES` (``"selecting"``, ``"loading
        artifacts"``, ``"comparing"``, ``"logging"``); the server's page shows them as progress.

    Raises
    ------
    RunSelectionError
        If the selection is invalid, runs were scored on different splits, targets or users (naming each run and its
        value), two runs share a model, configuration and seed, ``reference`` names a model that is several
        candidates, or ``reference`` / ``primary`` / ``metrics`` / ``representative_seed`` name nothing compared, or
        model names would collide in MLflow metric names.
    TypeError
        If ``settings`` is not a :class:`~mlflow_recsys.stats.ComparisonSettings`.
    ValueError
        If ``$MLFLOW_RECSYS_DOWNLOAD_THREADS`` (runs whose artifacts are downloaded at once, default 8) is set to
        anything but a whole number from 1 to 64.
    ArtifactError
        If a run's per-user artifacts are missing or malformed.
    TrackingServerError
        If the tracking server does not answer within the bounded wait.
    TrackingPermissionError
        If the tracking server refuses to create or write the comparison run, naming the experiment and what
        to do; raised before any artifact is read.
    """
    if on_stage is not None and not callable(on_stage):
        raise TypeError(validation.expected("on_stage", "a callable taking the stage's name, or None", on_stage))
    stage = on_stage or (lambda name: None)
    settings = _settings_iv(settings)
    threads = download_threads()  # read once, and a bad setting is refused before any run is made
    checked_run_ids(run_ids, compare_url, experiment, filter_string)  # before the store is opened (or created)
    with translated_server_errors():
        target = RunTarget.find(output_experiment)
        selection = dict(run_ids=run_ids, compare_url=compare_url, experiment=experiment, filter_string=filter_string)
        try:
            stage("selecting")
            runs, plan, slices = _preflight(selection, settings, model_tag)
        except BaseException as exc:
            if target.environment_run:  # the one run that exists already
                record_failure_on_environment_run(exc, tags.ROLE_COMPARISON)
            raise
        _log_plan(runs, plan, settings)
        # The run exists before any work: a store that will not take it (a READ-only user) says so now, not after
        # hours of resampling. Any later failure ends it FAILED with the reason and no results.
        with target.run(runs, _run_name(plan)) as run:
            stage("loading artifacts")
            artifacts = load_many(runs, threads)
            stage("comparing")
            plan, provenance, (report, spreads, averaged) = _check_and_compare(runs, plan, settings, artifacts, slices)
            analysis = resolve_primary_analysis(settings.primary_analysis, seeded=averaged is not None)
            logged = _logged_settings(settings, model_tag=model_tag, compared=plan.metric_keys, analysis=analysis)
            _log.info("logging the comparison run")
            stage("logging")
            declared = primary_declared_in_advance(runs, settings.primary)
            link = page_link_text(runs[0].info.experiment_id)
            files = ComparisonFiles(
                report, averaged, spreads, provenance, logged, _run_name(plan), settings.primary, declared, link
            )
            _log_comparison(files, runs, plan, settings)
            run_id = run.info.run_id
    results = {m: {seed: artifacts[rid].result for seed, rid in seeds.items()} for m, seeds in plan.groups.items()}
    return RunComparison(
        report, spreads, run_id, plan.groups, settings.representative_seed, averaged, analysis, results
    )


def _settings_iv(settings) -> ComparisonSettings:
    if settings is None:
        return ComparisonSettings()
    if not isinstance(settings, ComparisonSettings):
        raise TypeError(f"settings: expected a ComparisonSettings, found {type(settings).__name__}")
    return settings


def _log_plan(runs: list[Run], plan: CandidatePlan, settings: ComparisonSettings) -> None:
    """What the comparison will do, and a warning where ``paired_seeds`` can pair nothing."""
    counts = (len(runs), len(plan.groups), len(plan.pairs), settings.n_resamples)
    _log.info("comparing %d runs of %d candidates (%d pairs, B = %s)", *counts)
    unpaired = [pair_label(b, c) for b, c in plan.seed_pairs if min(len(plan.groups[b]), len(plan.groups[c])) < 2]
    if settings.paired_seeds and unpaired:
        _log.warning(
            "paired_seeds has no effect on %s: only one side has several seeds, so there is "
            "nothing to pair (protocol one-side-seeded)",
            ", ".join(unpaired),
        )


def _check_and_compare(
    runs: list[Run],
    plan: CandidatePlan,
    settings: ComparisonSettings,
    artifacts: dict[str, EvaluationArtifacts],
    slices: list[Slice] | None,
):
    """Check the runs' per-user artifacts were scored alike, and compare them -> (the plan with the metrics compared,
    the provenance, :func:`_compare`'s reports)."""
    _log.info("loaded the per-user artifacts of %d runs", len(runs))
    provenance = collect_provenance(runs, plan.groups, plan.representative_seeds, settings.representative_seed)
    verify_same_evaluation(runs, artifacts)
    plan = dataclasses.replace(plan, metric_keys=artifact_metric_keys(plan.metric_keys, settings.primary, artifacts))
    return plan, provenance, _compare(plan, artifacts, settings, slices)


def _compare(
    plan: CandidatePlan,
    artifacts: dict[str, EvaluationArtifacts],
    settings: ComparisonSettings,
    slices: list[Slice] | None = None,
) -> tuple[ComparisonReport, dict[tuple[str, str], SeedSpread], ComparisonReport | None]:
    """The paired report (with ``slices``, explored on its representative instances), the seed-spread tables by
    (baseline, candidate) in the order of the pairs and, when a candidate has seeds, the seed-averaged report (else
    None)."""
    statistics = settings.compare_models_kwargs()
    metric_keys = plan.metric_keys
    assert metric_keys is not None  # _check_and_compare has set them from the per-user files
    shared = {"metrics": metric_keys, **{k: statistics[k] for k in ("confidence_level", "n_resamples", "random_state")}}
    results = {m: {s: (rid, artifacts[rid].result) for s, rid in seeds.items()} for m, seeds in plan.groups.items()}
    instances = {m: results[m][plan.representative_seeds[m]][1] for m in plan.models}
    if settings.global_metrics:
        _check_lists({results[m][plan.representative_seeds[m]][0]: instances[m] for m in plan.models}, settings)
    report = compare_models(instances, metrics=metric_keys, slices=slices, **statistics)
    spreads: dict[tuple[str, str], SeedSpread] = {}
    for base, cand in plan.seed_pairs:
        paired = settings.paired_seeds and len(results[base]) > 1 and len(results[cand]) > 1
        sides = seed_side(results[base]), seed_side(results[cand])
        spreads[base, cand] = seed_spread(
            *sides, baseline_name=base, candidate_name=cand, paired_seeds=paired, **shared
        )
    averaged = None
    if plan.seed_pairs:
        with warnings.catch_warnings():
            # Already raised by the representative comparison, with the same settings and users.
            warnings.simplefilter("ignore", LowResamplesWarning)
            warnings.simplefilter("ignore", UnverifiedPairingWarning)
            averaged = compare_seed_averaged(
                {m: {s: res for s, (_, res) in results[m].items()} for m in plan.models},
                metrics=metric_keys,
                # Lists are not averaged over seeds: the global metrics are the representative instances' alone.
                **{**statistics, "global_metrics": None},
            )
    return report, spreads, averaged


def _check_lists(by_run: dict[str, EvaluationResult], settings: ComparisonSettings) -> None:
    """The scored lists the global metrics need, checked run by run: RunSelectionError naming the run and the flag."""
    deepest = max(int(key.rpartition("@")[2]) for key in settings.global_metrics or ())
    catalogues: dict[int, str] = {}
    for run_id, result in by_run.items():
        if result.rankings is None or result.n_items is None:
            raise RunSelectionError(
                f"global_metrics: expected runs that kept their scored lists (rankings.parquet), found none in run "
                f"{run_id} (logged before the lists were kept); drop --global-metrics to compare it"
            )
        if result.rankings.shape[1] < deepest:
            raise RunSelectionError(
                f"global_metrics: expected lists at least {deepest} deep for {', '.join(settings.global_metrics or ())}"
                f", found {result.rankings.shape[1]} in run {run_id} (the largest cutoff it was evaluated at)"
            )
        catalogues.setdefault(result.n_items, run_id)
    if len(catalogues) > 1:
        shown = ", ".join(f"{n} items (run {rid})" for n, rid in catalogues.items())
        raise RunSelectionError(f"global_metrics: expected lists over one catalogue, found {shown}")


def _logged_settings(settings: ComparisonSettings, *, model_tag: str, compared: list[str], analysis: str) -> dict:
    """The comparison's settings as logged (params and ``settings.json``): every declared field in order (the
    representative seed, when none was named, as ``lowest seed of each model``), then what it resolved and what
    computed it."""
    declared = settings_of(ComparisonSettings)
    values = {name: getattr(settings, name) for name in declared if name != "metrics"}
    return {
        # A list of keys as the command line takes it (history:4,cold:5), not as Python prints a tuple.
        **{name: ",".join(v) if isinstance(v, tuple) else v for name, v in values.items()},
        "representative_seed": settings.representative_seed or "lowest seed of each model",
        "primary_analysis_used": analysis,
        "model_tag": model_tag,
        "metrics": ",".join(settings.metrics) if settings.metrics else None,
        "compared_metrics": ",".join(compared),
        # The tests, intervals and the Wilcoxon null come from SciPy: the version that computed them.
        "scipy_version": scipy.__version__,
    }


#: The stages :func:`compare_runs` reports to ``on_stage``, in order.
STAGES = ("selecting", "loading artifacts", "comparing", "logging")


def check_selection(
    *,
    run_ids: Sequence[str] | None = None,
    compare_url: str | None = None,
    experiment: str | None = None,
    filter_string: str | None = None,
    settings: ComparisonSettings | None = None,
    model_tag: str = tags.MODEL,
    client: MlflowClient | None = None,
) -> list[Run]:
    """Every check :func:`compare_runs` makes before it reads an artifact or writes anything; the runs selected.

    Parameters
    ----------
    run_ids, compare_url, experiment, filter_string, settings, model_tag
        As for :func:`compare_runs`.
    client:
        The client to read runs with (default: one for the current tracking URI).

    Raises
    ------
    RunSelectionError, ValueError, TypeError
        Exactly as :func:`compare_runs` raises them for a bad setting or selection.
    """
    with translated_server_errors():
        selection = dict(run_ids=run_ids, compare_url=compare_url, experiment=experiment, filter_string=filter_string)
        return _preflight(selection, _settings_iv(settings), model_tag, client)[0]


def _preflight(
    selection: dict, settings: ComparisonSettings, model_tag: str, client: MlflowClient | None = None
) -> tuple[list[Run], CandidatePlan, list[Slice] | None]:
    """The settings, the selection (``select_runs``' keywords) and the plan checked, from run metadata alone; and the
    slices the settings name, built from the runs' split (read here, so that a split that cannot be sliced so is
    refused before anything is written)."""
    # A primary metric is checked against the compared keys, which the plan names.
    bad = [key for key in settings.metrics or [] if not is_metric_key(key)]
    if bad:
        raise RunSelectionError(f"metrics: expected metric keys such as 'ndcg@100' or 'recall@20', found {bad}")
    validation.line(model_tag, "model_tag")
    runs = select_runs(**selection, client=client)
    # One user gives no variation across users to test against; the runs say so in their logged counts.
    alone = {r.info.run_id: int(n) for r in runs if (n := r.data.metrics.get("n_eval_users", 2)) < 2}
    if alone:
        raise RunSelectionError(
            f"runs: expected runs scored on at least 2 users, found {shorten(str(alone), 500)} (run: n_eval_users); "
            "a paired comparison estimates the variation across users"
        )
    plan = plan_candidates(runs, settings, model_tag)
    slices = runs_slices(runs, settings.slices) if settings.slices else None
    if plan.metric_keys is not None:
        # Every report the comparison keeps: with seeded candidates, the seed-averaged report's as well; the slices are
        # analysed in one of them.
        reports = 2 if plan.seed_pairs else 1
        strata = sum(len(s.strata) for s in slices or ())
        check_replicate_memory(
            settings.n_resamples,
            reports * len(plan.pairs) * len(plan.metric_keys),
            stratum_columns(len(plan.pairs), strata, len(plan.metric_keys)),
        )
    if settings.paired_seeds:
        check_paired_seeds(plan)
    try:
        resolve_primary_analysis(settings.primary_analysis, seeded=bool(plan.seed_pairs))
    except ValueError as exc:
        raise RunSelectionError(str(exc)) from None
    return runs, plan, slices


def _log_comparison(files: ComparisonFiles, runs: list[Run], plan: CandidatePlan, settings: ComparisonSettings) -> None:
    """Render every file, then log into the active (comparison) run: artifacts first, then tags, params and
    metrics. Every key and value is made to fit MLflow's limits before anything is logged, so MLflow has no
    reason to refuse or cut anything."""
    text_settings = {k: "None" if v is None else str(v) for k, v in files.settings.items()}
    params = fit_values(
        text_settings, MAX_PARAM_LENGTH, "the whole value is in settings.json (compared_metrics: in report/)"
    )
    names = pair_metric_names(plan.pairs, plan.seed_pairs, plan.metric_keys)
    metrics, key_map = _comparison_metrics(names, files)
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-report-") as tmp:
        out = Path(tmp)
        frame, averaged_frame, seed_frame = files.write(out)
        write_json_files(out, [r.info.run_id for r in runs], plan, settings, key_map)
        note, headline = files.note(), files.headline()  # before anything is logged
        mlflow.log_artifacts(str(out))
        mlflow.log_table(frame, artifact_file="report_table.json")
        if seed_frame is not None:
            mlflow.log_table(seed_frame, artifact_file="seed_spread_table.json")
        if averaged_frame is not None:
            mlflow.log_table(averaged_frame, artifact_file="seed_averaged_table.json")
        mlflow.set_tags(result_tags(runs[0].data.tags, files.primary, headline, files.run_name, note))
        log_params_once(params)
        mlflow.log_metrics(metrics)


def _run_name(plan: CandidatePlan) -> str:
    """``B, C vs A`` with a reference, ``compare A, B, C`` without; cut to the length a run name may have."""
    if plan.reference:
        run_name = f"{', '.join(m for m in plan.models if m != plan.reference)} vs {plan.reference}"
    else:
        run_name = "compare " + ", ".join(plan.models)
    return shorten(run_name, MAX_RUN_NAME_LENGTH)


def _comparison_metrics(names: dict, files: ComparisonFiles) -> tuple[dict[str, float], list[dict]]:
    """The comparison run's metrics (finite values only) by MLflow name, and the map of each name to its hypothesis
    and field (``metric_names.json``)."""
    metrics = {}
    averaged = files.averaged
    for prefix, rows in (("", files.report.comparisons), ("seed_averaged.", averaged.comparisons if averaged else ())):
        for c in rows:
            for field in REPORT_FIELDS:
                value = getattr(c, field)
                if pd.notna(value) and abs(value) != float("inf"):
                    metrics[names[(c.baseline, c.candidate, c.metric, prefix + field)]] = float(value)
    for spread in files.spreads.values():
        for row in spread.to_frame().itertuples():
            for field in SEED_FIELDS:
                value = getattr(row, field)
                if pd.notna(value):
                    metrics[names[(row.baseline, row.candidate, row.metric, f"seeds.{field}")]] = float(value)
    key_map = [
        {"mlflow_metric": name, "baseline": b, "candidate": c, "metric": m, "field": f}
        for (b, c, m, f), name in names.items()
        if name in metrics
    ]
    return metrics, key_map
