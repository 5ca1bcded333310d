"""Compare training runs and log the report back to MLflow as a comparison run."""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import re
import shlex
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pandas as pd
import scipy
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

from mlflow_recsys import validation
from mlflow_recsys._digests import text_digest
from mlflow_recsys.errors import TrackingPermissionError
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.metrics import parse_metric_keys
from mlflow_recsys.report.citations import references_bibtex
from mlflow_recsys.report.escaping import csv_safe_frame, escape_markdown, name_writer, visible_text
from mlflow_recsys.report.html import report_html
from mlflow_recsys.report.plots import forest_plot, seed_spread_plot
from mlflow_recsys.report.text import (
    ANALYSIS_TITLES,
    analysis_heading,
    primary_analysis_text,
    seed_averaging_text,
    stated_results,
)
from mlflow_recsys.settings_schema import settings_of
from mlflow_recsys.stats import (
    ComparisonReport,
    LowResamplesWarning,
    SeedSpread,
    UnverifiedPairingWarning,
    compare_models,
    compare_seed_averaged,
    seed_spread,
)
from mlflow_recsys.stats.comparison import Markup, _pairs, check_replicate_memory
from mlflow_recsys.stats.settings import ComparisonSettings, resolve_primary_analysis
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.artifacts import EvaluationArtifacts
from mlflow_recsys.tracking.context import (
    check_step_run,
    entry_point_run,
    log_params_once,
    mark_failed,
)
from mlflow_recsys.tracking.limits import (
    MAX_PARAM_LENGTH,
    MAX_RUN_NAME_LENGTH,
    MAX_TAG_LENGTH,
    duplicates,
    fit_key,
    fit_text,
    fit_values,
    shorten,
)
from mlflow_recsys.tracking.naming import logged_metric_keys, mlflow_metric_name, pair_label, pair_metric_prefix
from mlflow_recsys.tracking.provenance import (
    collect_provenance,
    provenance_html,
    provenance_lines,
    provenance_markdown,
)
from mlflow_recsys.tracking.redact import redact
from mlflow_recsys.tracking.runs import RunSelectionError, load_many, run_id_list, select_runs
from mlflow_recsys.tracking.server_errors import is_unreachable, translated_server_errors
from mlflow_recsys.tracking.server_page import recsys_page_url

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunComparison:
    """What :func:`compare_runs` produced.

    Attributes
    ----------
    report:
        The paired comparison, one trained run per candidate (its lowest seed, or ``report_seed``).
    seed_spreads:
        ``(baseline, candidate)`` -> :class:`SeedSpread` for every pair where a side has seeds, in the order of
        the pairs. Keyed by the pair, not by a joined text, so no names can make two tables one;
        :func:`~mlflow_recsys.tracking.naming.pair_label` gives the text the files show.
    run_id:
        The comparison run's id.
    source_runs:
        Candidate name -> {seed tag -> run id} of the runs compared. A candidate is a model, or, when the
        selected runs of a model hold several configurations, one of them (``EASE(l2=50)``).
    report_seed:
        The seed asked for as each model's representative, or ``None`` for the lowest.
    seed_averaged:
        When a model has two or more seeds: the same hypotheses on each model's per-user values averaged
        over all its seeds (:func:`~mlflow_recsys.stats.compare_seed_averaged`), adjusted in families of
        their own; otherwise ``None``.
    primary_analysis:
        ``"seed-averaged"`` or ``"representative-seed"``: the analysis the conclusion rests on
        (``settings.primary_analysis`` resolved); the other one, when there is one, is a sensitivity analysis.
    """

    report: ComparisonReport
    seed_spreads: dict[tuple[str, str], SeedSpread]
    run_id: str
    source_runs: dict[str, dict[str, str]]
    report_seed: str | None = None
    seed_averaged: ComparisonReport | None = None
    primary_analysis: str = "representative-seed"

    @property
    def primary_report(self) -> ComparisonReport:
        """The report of the primary analysis: :attr:`seed_averaged` or :attr:`report`."""
        return self.seed_averaged if self.primary_analysis == "seed-averaged" and self.seed_averaged else self.report

    @property
    def report_seed_rule(self) -> str:
        """Which run represented each seeded model in the report."""
        return f"seed {self.report_seed}" if self.report_seed is not None else "its lowest seed"

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

    Runs are grouped into candidates, then by seed (``recsys.seed``). A
    candidate is a model (the ``model_tag`` tag, ``recsys.model`` by default)
    in one configuration (the ``recsys.config`` tag: every hyper-parameter but
    the seed). A model whose selected runs share one configuration is one
    candidate under its own name; one whose runs hold several is a candidate
    per configuration, named by the hyper-parameters that differ among them
    (``EASE(l2=50)``, ``ELSA(latent_dim=64, lr=0.001)``), and ``reference``
    must then name one of those. Seeds are pooled within a candidate only.
    The paired report compares one trained instance per candidate, its lowest
    seed unless ``seed`` names another, so its family stays pairs x metrics.
    When a candidate has two or more seeds, a second, seed-averaged report
    compares each candidate's per-user values averaged over all its seeds
    (:func:`~mlflow_recsys.stats.compare_seed_averaged`, same settings), and
    for every pair where a candidate has seeds a seed-spread table
    (descriptive, no p-values) puts the retraining spread beside the spread
    across users.

    Everything that settings, run metadata and tags can show is checked before
    any run or experiment is created, so a mistake leaves nothing behind. Then,
    before any artifact is read, the comparison run is created (RUNNING, tagged
    with its role and source runs), so a tracking server that refuses the write
    (a user with READ permission only) stops the comparison before any work.
    Once the report is computed the run receives its artifacts first, then
    tags, params and metrics, and ends FINISHED. If anything fails after it was
    created (a check that needs the per-user artifacts, an interruption, a
    failed upload), the run ends FAILED with the reason (tag ``recsys.error``)
    and holds no results. The run goes to ``output_experiment`` or, by
    default, the experiment of the first source run. Inside the caller's active
    run (``with mlflow.start_run():``) the comparison run is a new run nested
    under it, in its experiment unless ``output_experiment`` is given; under the
    ``compare`` entry point of ``mlflow run`` (``MLFLOW_RUN_ID``) that run is
    used. This is the rule of every step
    (:func:`~mlflow_recsys.tracking.context.check_step_run`).

    ``on_stage``, when given, is called with each stage as it begins, in the
    order of :data:`STAGES` (``"selecting"``, ``"loading artifacts"``,
    ``"comparing"``, ``"logging"``); the server's page shows them as progress.

    Parameters
    ----------
    run_ids, compare_url, experiment, filter_string
        The selection, one way: see :func:`~mlflow_recsys.tracking.runs.select_runs`.
    settings : ComparisonSettings, optional
        Every statistical setting (:class:`~mlflow_recsys.stats.settings.ComparisonSettings`; its defaults when
        omitted). ``settings.metrics`` ``None`` compares every metric the runs share; ``settings.seed`` picks
        the run that stands for each seeded model in the paired report.
    model_tag : str, default ``"recsys.model"``
        The run tag that names the model.
    output_experiment : str, optional
        Experiment of the comparison run (default: the first source run's).
    on_stage : callable, optional
        Called with each stage's name as it begins.

    Raises
    ------
    RunSelectionError
        If the selection is invalid, runs were scored on different splits,
        targets or users (naming each run and its value), two runs share a model,
        configuration and seed, ``reference`` names a model that is several
        candidates, or ``reference`` / ``primary`` / ``metrics`` / ``seed`` name
        nothing compared, or model names would collide in MLflow metric names.
    TypeError
        If ``settings`` is not a :class:`~mlflow_recsys.stats.settings.ComparisonSettings`.
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
    with translated_server_errors():
        target = _Target.find(output_experiment)
        try:
            stage("selecting")
            runs, plan = _preflight(
                run_ids=run_ids,
                compare_url=compare_url,
                experiment=experiment,
                filter_string=filter_string,
                settings=settings,
                model_tag=model_tag,
            )
        except BaseException as exc:
            target.record_failure(exc)  # only into a run that exists already
            raise
        _log_plan(runs, plan, settings)
        # The run exists before any work: a store that will not take it (a READ-only user) says so now, not after
        # hours of resampling. Any later failure ends it FAILED with the reason and no results.
        with target.run(runs, _run_name(plan)) as run:
            plan, provenance, (report, spreads, averaged) = _load_and_compare(runs, plan, settings, stage)
            analysis = resolve_primary_analysis(settings.primary_analysis, seeded=averaged is not None)
            logged = _logged_settings(settings, model_tag=model_tag, compared=plan.metric_keys, analysis=analysis)
            _log.info("logging the comparison run")
            stage("logging")
            declared = _declared_in_advance(runs, settings.primary)
            _log_comparison(report, spreads, runs, plan, settings, logged, provenance, declared, averaged)
            run_id = run.info.run_id
    return RunComparison(
        report=report,
        seed_spreads=spreads,
        run_id=run_id,
        source_runs=plan.groups,
        report_seed=settings.seed,
        seed_averaged=averaged,
        primary_analysis=analysis,
    )


def _settings_iv(settings) -> ComparisonSettings:
    if settings is None:
        return ComparisonSettings()
    if not isinstance(settings, ComparisonSettings):
        raise TypeError(f"settings: expected a ComparisonSettings, found {type(settings).__name__}")
    return settings


def _log_plan(runs: list[Run], plan: _Plan, settings: ComparisonSettings) -> None:
    """Log what is compared and, with ``paired_seeds``, the pairs it changes nothing for (one side seeded)."""
    _log.info(
        "comparing %d runs of %d candidates (%d pairs, B = %s)",
        len(runs),
        len(plan.groups),
        len(plan.pairs),
        settings.n_resamples,
    )
    unpaired = [pair_label(b, c) for b, c in plan.seed_pairs if min(len(plan.groups[b]), len(plan.groups[c])) < 2]
    if settings.paired_seeds and unpaired:
        _log.warning(
            "paired_seeds has no effect on %s: only one side has several seeds, so there is "
            "nothing to pair (protocol one-side-seeded)",
            ", ".join(unpaired),
        )


def _load_and_compare(runs: list[Run], plan: _Plan, settings: ComparisonSettings, stage: Callable[[str], None]):
    """Read the runs' per-user artifacts, check they were scored alike, and compare them -> (the plan with the
    metrics compared, the provenance, :func:`_compare`'s reports)."""
    stage("loading artifacts")
    artifacts = load_many([r.info.run_id for r in runs])
    _log.info("loaded the per-user artifacts of %d runs", len(runs))
    stage("comparing")
    provenance = collect_provenance(runs, plan.groups, plan.representative, settings.seed)
    _verify_same_evaluation(runs, artifacts)
    plan = plan.with_metrics(_artifact_metric_keys(plan.metric_keys, settings.primary, artifacts))
    return plan, provenance, _compare(plan, artifacts, settings)


def _compare(
    plan: _Plan, artifacts: dict[str, EvaluationArtifacts], settings: ComparisonSettings
) -> tuple[ComparisonReport, dict[tuple[str, str], SeedSpread], ComparisonReport | None]:
    """The paired report, the seed-spread tables by (baseline, candidate) in the order of the pairs and, when a
    candidate has seeds, the seed-averaged report (else None)."""
    statistics = settings.compare_models_kwargs()
    metric_keys = plan.metric_keys
    assert metric_keys is not None  # _load_and_compare has set them from the per-user files
    results = {m: {s: (rid, artifacts[rid].result) for s, rid in seeds.items()} for m, seeds in plan.groups.items()}
    instances = {m: results[m][plan.representative[m]][1] for m in plan.models}
    report = compare_models(instances, metrics=metric_keys, **statistics)
    spreads: dict[tuple[str, str], SeedSpread] = {}
    for base, cand in plan.seed_pairs:
        spreads[base, cand] = seed_spread(
            _side(results[base]),
            _side(results[cand]),
            metrics=metric_keys,
            baseline_name=base,
            candidate_name=cand,
            paired_seeds=settings.paired_seeds and len(results[base]) > 1 and len(results[cand]) > 1,
            confidence_level=settings.confidence_level,
            n_resamples=settings.n_resamples,
            random_state=settings.random_state,
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
                **statistics,
            )
    return report, spreads, averaged


def _logged_settings(settings: ComparisonSettings, *, model_tag: str, compared: list[str], analysis: str) -> dict:
    """The comparison's settings as logged (params and ``settings.json``): every declared field in order (the
    representative seed as ``report_seed``), then what it resolved and what computed it."""
    declared = settings_of(ComparisonSettings)
    return {
        **{name: getattr(settings, name) for name in declared if name not in ("metrics", "seed")},
        "primary_analysis_used": analysis,
        "model_tag": model_tag,
        "report_seed": settings.seed if settings.seed is not None else "lowest seed of each model",
        # What was asked for, and what was compared.
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
        return _preflight(
            run_ids=run_ids,
            compare_url=compare_url,
            experiment=experiment,
            filter_string=filter_string,
            settings=_settings_iv(settings),
            model_tag=model_tag,
            client=client,
        )[0]


def _preflight(
    *, run_ids, compare_url, experiment, filter_string, settings: ComparisonSettings, model_tag, client=None
) -> tuple[list[Run], _Plan]:
    """The settings, the selection and the plan checked, in this order, from run metadata alone."""
    _check_settings(settings, model_tag)
    runs = select_runs(
        run_ids=run_id_list(run_ids),
        compare_url=compare_url,
        experiment=experiment,
        filter_string=filter_string,
        client=client,
    )
    plan = _plan(
        runs,
        metrics=settings.metrics,
        primary=settings.primary,
        reference=settings.reference,
        seed=settings.seed,
        model_tag=model_tag,
        alternative=settings.alternative,
    )
    if plan.metric_keys is not None:
        # Every report the comparison keeps: with seeded candidates, the seed-averaged report's as well.
        reports = 2 if plan.seed_pairs else 1
        check_replicate_memory(settings.n_resamples, reports * len(plan.pairs) * len(plan.metric_keys))
    if settings.paired_seeds:
        _paired_seeds_iv(plan)
    try:
        resolve_primary_analysis(settings.primary_analysis, seeded=plan.seed_averaged)
    except ValueError as exc:
        raise RunSelectionError(str(exc)) from None
    return runs, plan


def _check_settings(settings: ComparisonSettings, model_tag) -> None:
    """What a comparison of runs asks beyond the settings' own checks: metric keys the runs can have logged."""
    metrics, primary = settings.metrics, settings.primary
    for name, keys in (("metrics", list(metrics or [])), ("primary", [primary] if primary is not None else [])):
        bad = []
        for key in keys:
            try:
                parse_metric_keys([key])
            except ValueError:
                bad.append(key)
        if bad:
            raise RunSelectionError(f"{name}: expected metric keys such as 'ndcg@100' or 'recall@20', found {bad}")
    validation.line(model_tag, "model_tag")


@dataclass(frozen=True)
class _Plan:
    """What the run metadata decided: models, seeds, metrics, pairs and the MLflow metric names."""

    groups: dict[str, dict[str, str]]  # candidate -> seed tag -> run id
    representative: dict[str, str]  # candidate -> seed tag of the run in the paired report
    models: list[str]  # candidates in report order: the reference first, then by model and configuration
    metric_keys: list[str] | None  # None: the per-user artifacts decide (the runs logged no aggregates)
    pairs: list[tuple[str, str]]  # (baseline, candidate) of the paired report
    seed_pairs: list[tuple[str, str]]  # pairs that get a seed-spread table
    reference: str | None

    def with_metrics(self, metric_keys: list[str]) -> _Plan:
        return dataclasses.replace(self, metric_keys=metric_keys)

    @property
    def metric_names(self) -> dict[tuple[str, str, str, str], str]:
        """(baseline, candidate, metric, field) -> MLflow metric name."""
        return _metric_names(self.pairs, self.seed_pairs, self.metric_keys)

    @property
    def seed_averaged(self) -> bool:
        """Whether a model has two or more seeds, so a seed-averaged report is made."""
        return bool(self.seed_pairs)


def _plan(runs: list[Run], *, metrics, primary, reference, seed, model_tag, alternative) -> _Plan:
    """Check everything the runs' tags and logged metrics show; nothing here reads an artifact."""
    # What was evaluated comes first: runs of two splits are the mistake to name, not their repeated seeds.
    for label, tag in (
        ("split (split digest)", tags.SPLIT_DIGEST),
        ("users and targets (targets fingerprint)", tags.TARGETS_FINGERPRINT),
    ):
        values = {r.info.run_id: r.data.tags[tag] for r in runs if r.data.tags.get(tag)}
        if len(set(values.values())) > 1:
            listing = "; ".join(f"run {rid}: {v[:16]}" for rid, v in values.items())
            raise RunSelectionError(f"runs were not evaluated on the same {label}: {listing}")
    groups, configured = _group(runs, model_tag)
    if len(groups) < 2:
        raise RunSelectionError(f"runs: expected at least two models to compare, found only {list(groups)}")
    if reference in configured:
        raise RunSelectionError(
            f"reference: {reference} is {len(configured[reference])} candidates here, one per configuration, "
            f"so name one of {configured[reference]}",
            hint=f"e.g. --reference {shlex.quote(configured[reference][0])}",
        )
    if reference is not None and reference not in groups:
        raise RunSelectionError(f"reference: expected one of the compared models {list(groups)}, found {reference!r}")
    representative = {m: _representative_seed(m, seeds, seed) for m, seeds in groups.items()}
    if seed is not None and not any(seed in seeds for seeds in groups.values()):
        raise RunSelectionError(
            f"seed: expected a seed of a seeded model, found {seed!r}; seeds: "
            + "; ".join(f"{m}: {sorted(s, key=tags.seed_order)}" for m, s in groups.items())
        )
    metric_keys = _metadata_metric_keys(runs, metrics, primary)
    models = list(groups)
    if reference is not None:
        models = [reference] + [m for m in models if m != reference]
    pairs = _pairs(models, reference, alternative)
    seed_pairs = [(b, c) for b, c in pairs if len(groups[b]) > 1 or len(groups[c]) > 1]
    # Names collide or not whatever the metrics are, so the check runs now even when only the artifacts
    # will tell which metrics the runs share.
    _metric_names(pairs, seed_pairs, metric_keys or ["ndcg@100"])
    return _Plan(
        groups=groups,
        representative=representative,
        models=models,
        metric_keys=metric_keys,
        pairs=pairs,
        seed_pairs=seed_pairs,
        reference=reference,
    )


def _paired_seeds_iv(plan: _Plan) -> None:
    """With ``paired_seeds``, two seeded models must have the same seeds, or there is no pairing to make."""
    for base, cand in plan.seed_pairs:
        seeds = [set(plan.groups[m]) for m in (base, cand)]
        if min(map(len, seeds)) > 1 and seeds[0] != seeds[1]:
            order = tags.seed_order
            raise RunSelectionError(
                f"paired_seeds: expected {cand} and {base} to have the same seeds to pair them, found "
                f"{base}: {sorted(seeds[0], key=order)} and {cand}: {sorted(seeds[1], key=order)}; select runs "
                "with matching seeds, or compare without --paired-seeds (independent seeds)"
            )


def _metadata_metric_keys(runs: list[Run], metrics, primary) -> list[str] | None:
    """The metric keys to compare, as far as the runs' logged aggregate metrics tell; None if they cannot.

    A run that logged no aggregate metric (one made by other tools around the per-user artifacts) is left
    to the artifact check.
    """
    logged = {rid: keys for rid, keys in _logged_metric_keys(runs).items() if keys}
    if metrics:
        missing = {rid: [m for m in metrics if m not in keys] for rid, keys in logged.items()}
        missing = {rid: m for rid, m in missing.items() if m}
        if missing:
            listing = "; ".join(f"run {rid} lacks {m}" for rid, m in missing.items())
            available = sorted(set.intersection(*(set(keys) for keys in logged.values())))
            raise RunSelectionError(f"metrics: not evaluated by every run ({listing}); available: {available}")
        return list(metrics)
    if len(logged) < len(runs):
        return None
    common = [k for k in next(iter(logged.values())) if all(k in keys for keys in logged.values())]
    if not common:
        raise RunSelectionError("metrics: the runs share no evaluated metric key")
    if primary is not None and primary not in common:
        raise RunSelectionError(f"primary: expected one of the compared metrics {common}, found {primary!r}")
    return common


#: The comparison run's artifacts that :func:`~mlflow_recsys.tracking.queries.load_comparison` reads: the
#: representative-seed report and, when a model has seeds, the seed-averaged one, each as
#: :meth:`~mlflow_recsys.stats.ComparisonReport.save` writes it, and the settings.
REPORT_DIR, SEED_AVERAGED_REPORT_DIR, SETTINGS_FILE = "report", "seed_averaged_report", "settings.json"

#: Report columns logged as metrics of the comparison run, and seed-table columns logged under ``.seeds``.
REPORT_FIELDS = ("difference", "relative_difference", "ci_low", "ci_high", "p_value", "adjusted_p_value")
SEED_FIELDS = ("mean_difference", "sd_users", "sd_retraining", "ratio", "widens_by", "sign_reversals")


def _metric_names(pairs, seed_pairs, metric_keys) -> dict[tuple[str, str, str, str], str]:
    """Every MLflow metric name the comparison run may log, one-to-one, each at most 250 characters.

    ``<candidate>.vs.<baseline>.<metric>.<field>``, with or without a reference; the seed-averaged report's
    under ``<candidate>.vs.<baseline>.<metric>.seed_averaged.<field>`` and seed-table columns under
    ``<candidate>.vs.<baseline>.<metric>.seeds.<field>``, both only when a model has seeds (``seed_pairs`` not
    empty). Names go through :func:`~mlflow_recsys.tracking.naming.pair_metric_prefix`, which no two pairs share,
    and long names through :func:`~mlflow_recsys.tracking.limits.fit_key`.

    Raises
    ------
    RunSelectionError
        If two hypotheses would still share a name: two long names whose 40-bit hashes collide, or two model
        names whose labels' hashes do.
    """
    names = {}
    for base, cand in pairs:
        who = pair_metric_prefix(base, cand)
        for metric in metric_keys:
            for field in REPORT_FIELDS:
                names[(base, cand, metric, field)] = fit_key(f"{who}.{mlflow_metric_name(metric)}.{field}")
                if seed_pairs:
                    names[(base, cand, metric, f"seed_averaged.{field}")] = fit_key(
                        f"{who}.{mlflow_metric_name(metric)}.seed_averaged.{field}"
                    )
    for base, cand in seed_pairs:
        who = pair_metric_prefix(base, cand)
        for metric in metric_keys:
            for field in SEED_FIELDS:
                names[(base, cand, metric, f"seeds.{field}")] = fit_key(
                    f"{who}.{mlflow_metric_name(metric)}.seeds.{field}"
                )
    clashes = duplicates(list(names.values()))
    if clashes:
        owners = sorted({pair_label(b, c) for (b, c, _, _), n in names.items() if n in clashes})
        raise RunSelectionError(
            f"model names: the comparisons {owners} would share the MLflow metric name {clashes[0]!r}; "
            "rename a model (its recsys.model tag) so that the names stay apart"
        )
    return names


def _logged_metric_keys(runs: list[Run]) -> dict[str, list[str]]:
    """Run id -> the metric keys whose aggregate it logged (``ndcg_at_100`` -> ``ndcg@100``), known keys only."""
    return {r.info.run_id: logged_metric_keys(r.data.metrics) for r in runs}


class _Target:
    """Where the comparison run goes, by the one rule of :func:`~mlflow_recsys.tracking.context.check_step_run`:
    nested under the caller's active run, the entry point's run, or a new run."""

    def __init__(self, *, nested: bool, environment_run: bool, experiment_name: str | None):
        self.nested = nested
        self.environment_run = environment_run
        self.experiment_name = experiment_name

    @classmethod
    def find(cls, output_experiment: str | None) -> _Target:
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
            if exp is not None and exp.lifecycle_stage != "active":
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
        if exc.error_code != "PERMISSION_DENIED":
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


# -- verifying and grouping ---------------------------------------------------------


def _verify_same_evaluation(runs: list[Run], artifacts: dict[str, EvaluationArtifacts]) -> None:
    def check(label: str, values: dict[str, object]) -> None:
        if len(set(map(str, values.values()))) > 1:
            listing = "; ".join(f"run {rid}: {str(v)[:16]}" for rid, v in values.items())
            hint = (
                " (a run evaluated with mlflow.models.evaluate needs split_digest, sample_id and n_items in its "
                "evaluator_config and data)"
                if any(v is None for v in values.values())
                else ""
            )
            raise RunSelectionError(f"runs were not evaluated on the same {label}: {listing}{hint}")

    check("split (split digest)", {r.info.run_id: artifacts[r.info.run_id].split_digest for r in runs})
    check(
        "users and targets (targets fingerprint)",
        {r.info.run_id: artifacts[r.info.run_id].result.targets_fingerprint for r in runs},
    )
    first = runs[0].info.run_id
    ids = artifacts[first].result.sample_ids
    for r in runs[1:]:
        other = artifacts[r.info.run_id].result.sample_ids
        if len(other) != len(ids) or not (other == ids).all():
            raise RunSelectionError(f"runs {first} and {r.info.run_id} hold different sample ids")


def _group(runs: list[Run], model_tag: str) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """Candidate -> seed tag -> run id, from the runs' tags; and model -> its candidates, where it has several.

    A candidate is one model (the ``model_tag`` tag) in one configuration (the ``recsys.config`` tag): runs
    that share both are the seeds of one candidate. A model whose selected runs hold a single configuration
    is one candidate under its plain name; one with several becomes a candidate per configuration, named by
    :func:`configuration_names`. Candidates come in order of model, then of the values that set them apart
    (``EASE(l2=50)`` before ``EASE(l2=500)``).

    Raises
    ------
    RunSelectionError
        If a run has no model tag or a malformed ``recsys.config`` tag, if two runs share model,
        configuration and seed, or if a configuration's name is another model's name.
    """
    configs: dict[str, dict[str, dict]] = {}  # model -> canonical JSON -> configuration
    members = []
    for r in runs:
        model = r.data.tags.get(model_tag)
        if not model:
            raise RunSelectionError(f"run {r.info.run_id}: expected a {model_tag!r} tag naming its model, found none")
        config = _config(r)
        key = json.dumps(config, sort_keys=True)
        configs.setdefault(model, {})[key] = config
        members.append((r.info.run_id, model, key, r.data.tags.get(tags.SEED, tags.NO_SEED)))
    names: dict[tuple[str, str], str] = {}
    order: dict[tuple[str, str], tuple] = {}
    for model, by_key in configs.items():
        for key, (name, rank) in configuration_names(model, by_key).items():
            names[model, key], order[model, key] = name, (model, rank)
    owner: dict[str, str] = {}
    for (model, _key), name in names.items():
        if name in owner:  # one model's names are distinct, so this is a model named like another's configuration
            raise RunSelectionError(
                f"model names: runs of {owner[name]} and of {model} would both be the candidate {name!r}",
                hint=f"rename a model (its {model_tag} tag) so that the names stay apart",
            )
        owner[name] = model
    groups: dict[str, dict[str, str]] = {}
    for run_id, model, key, seed in sorted(members, key=lambda m: order[m[1], m[2]]):
        name = names[model, key]
        seeds = groups.setdefault(name, {})
        if seed in seeds:
            same = "" if name != model else f" and the same configuration {shorten(key, 200)}"
            raise RunSelectionError(
                f"runs {seeds[seed]} and {run_id} are both {name} with seed {seed}{same}, so they are the same "
                "candidate twice",
                hint="select one: by run ids, by narrowing the filter (a study's runs: "
                "tags.mlflow.parentRunId = '<the study run id>'), or by deleting a run logged twice (the same "
                "lists imported again)",
            )
        seeds[seed] = run_id
    several: dict[str, list[str]] = {}
    for (model, _), name in names.items():
        if name != model:
            several.setdefault(model, []).append(name)
    return groups, {m: [n for n in groups if n in ns] for m, ns in sorted(several.items())}


#: Widest text of one hyper-parameter value in a candidate's name; longer values are cut, with a hash.
CONFIG_VALUE_WIDTH = 40
_BARE_TEXT = re.compile(r"^[A-Za-z0-9_.+\-]+$")
_UNSET = object()


def configuration_names(model: str, configs: dict[str, dict]) -> dict[str, tuple[str, tuple]]:
    """Canonical JSON of each configuration of ``model`` -> (candidate name, sort key).

    One configuration keeps the plain model name. Several are named ``Model(k1=v1, k2=v2)`` by the
    hyper-parameters that differ among them, in key order, with short values (``50`` for ``50.0``, strings
    bare); if two short names coincide (``50`` and ``"50"``) every value is written as exact JSON instead.
    A key some configurations lack reads ``unset`` in theirs.
    """
    if len(configs) == 1:
        return {key: (model, ()) for key in configs}
    keys = sorted(set().union(*configs.values()))
    differing = [
        k for k in keys if len({json.dumps(c[k], sort_keys=True) if k in c else None for c in configs.values()}) > 1
    ]
    ranks = {key: tuple(_value_rank(c.get(k, _UNSET)) for k in differing) for key, c in configs.items()}
    for text in (_short_value, _exact_value):
        names = {
            key: f"{model}({', '.join(f'{k}={text(c.get(k, _UNSET))}' for k in differing)})"
            for key, c in configs.items()
        }
        if len(set(names.values())) == len(names):
            return {key: (name, ranks[key]) for key, name in names.items()}
    raise RunSelectionError(  # only two values alike in their first characters and their 24-bit hash
        f"model names: configurations of {model} cannot be told apart by name: {sorted(configs)}",
        hint="rename one configuration's model (its model tag)",
    )


def _short_value(value) -> str:
    """A hyper-parameter value as a candidate name shows it: ``50``, ``0.001``, ``true``, ``adam``, ``[64, 32]``."""
    if value is _UNSET:
        return "unset"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        text = str(int(value))
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, str) and _BARE_TEXT.match(value):
        text = value
    else:
        text = json.dumps(value, sort_keys=True)
    return shorten(text, CONFIG_VALUE_WIDTH)


def _exact_value(value) -> str:
    """A hyper-parameter value as exact JSON (``50.0``, ``"50"``), for names the short form cannot keep apart."""
    return "unset" if value is _UNSET else shorten(json.dumps(value, sort_keys=True), CONFIG_VALUE_WIDTH)


def _value_rank(value) -> tuple:
    """Sort key of a hyper-parameter value: numbers by value, then other values by their JSON, then unset."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return (0, value, "")
    if value is _UNSET:
        return (2, 0, "")
    return (1, 0, json.dumps(value, sort_keys=True))


def _config(run: Run) -> dict:
    """The run's hyper-parameters from its ``recsys.config`` tag (a JSON object; absent means none)."""
    text = run.data.tags.get(tags.CONFIG, "{}")
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        config = None
    if not isinstance(config, dict):
        raise RunSelectionError(
            f"run {run.info.run_id}: expected its {tags.CONFIG!r} tag to hold a JSON object of hyper-parameters, "
            f"found {shorten(text, 80)!r}; fix or delete the tag"
        )
    return config


def _representative_seed(model: str, seeds: dict, wanted: str | None) -> str:
    if len(seeds) == 1 or wanted is None:
        return sorted(seeds, key=tags.seed_order)[0]
    if wanted not in seeds:
        raise RunSelectionError(
            f"seed: expected one of {model}'s seeds {sorted(seeds, key=tags.seed_order)}, found {wanted!r}"
        )
    return wanted


def _side(seeds: dict[str, tuple[str, EvaluationResult]]):
    if len(seeds) == 1:
        return next(iter(seeds.values()))[1]
    return {int(s) if s.lstrip("-").isdigit() else s: res for s, (_, res) in seeds.items()}


def _artifact_metric_keys(metric_keys: list[str] | None, primary, artifacts: dict[str, EvaluationArtifacts]):
    """The metric keys every per-user file holds: ``metric_keys`` checked, or the common keys if None."""
    # Every loaded result was read from its per_user.parquet, so it holds per-user values.
    columns = {run_id: list(art.result.per_user or ()) for run_id, art in artifacts.items()}
    if metric_keys is None:
        per_user = list(columns.values())
        common = [k for k in per_user[0] if all(k in keys for keys in per_user)]
        if not common:
            raise RunSelectionError("metrics: the runs' per-user files share no metric key")
        if primary is not None and primary not in common:
            raise RunSelectionError(f"primary: expected one of the compared metrics {common}, found {primary!r}")
        return common
    for run_id, keys in columns.items():
        missing = [m for m in metric_keys if m not in keys]
        if missing:
            raise RunSelectionError(
                f"run {run_id}: its per_user.parquet has no column for {missing}; it holds {sorted(keys)}"
            )
    return metric_keys


# -- logging back ---------------------------------------------------------------------


#: Widest model name shown in the run notes; the report files show every name whole.
NOTE_NAME_WIDTH = 80
#: Fewest table rows the notes keep before they drop the result sentences to make room.
MIN_NOTE_ROWS = 10


def _note_versions(
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    primary: str | None,
    provenance: dict | None = None,
    declared: bool = False,
    averaged: ComparisonReport | None = None,
    analysis: str = "representative-seed",
):
    """The run notes, fullest first: MLflow keeps 8,000 characters, and :func:`fit_text` takes the first that fits.

    After the full notes come compact ones: the result sentences (while they fit), then a table of the key
    columns with names cut to :data:`NOTE_NAME_WIDTH` and as many whole rows as fit, and a pointer to the files.
    """
    title = ["## Paired comparison", ""]
    declaration, sentences, seeds = _result_paragraphs(
        report, spreads, primary, declared, averaged, "markdown", analysis
    )
    what = [provenance_markdown(provenance), ""] if provenance else []
    tables = [report.to_markdown(), ""]
    if averaged is not None:
        tables = []
        for kind, shown in _analyses(report, averaged, analysis):
            tables += [f"### {analysis_heading(kind, analysis)}", "", shown.to_markdown(), ""]
    pointer = _note_pointer(bool(spreads), analysis if averaged is not None else None)
    yield "\n".join(title + declaration + sentences + tables + seeds + what + [pointer])
    primary_report = dict(_analyses(report, averaged, analysis))[analysis]
    compact_label = analysis_heading(analysis, analysis) if averaged is not None else None
    yield from _compact_notes(
        primary_report, title, declaration, sentences, seeds, _compact_provenance(provenance), compact_label, pointer
    )


def _analyses(
    report: ComparisonReport, averaged: ComparisonReport | None, analysis: str
) -> list[tuple[str, ComparisonReport]]:
    """The analyses made, primary first: ``("seed-averaged", averaged)`` and ``("representative-seed", report)``."""
    made = [("representative-seed", report)] + ([("seed-averaged", averaged)] if averaged is not None else [])
    return sorted(made, key=lambda pair: pair[0] != analysis)


def _result_paragraphs(
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    primary: str | None,
    declared: bool,
    averaged: ComparisonReport | None,
    markup: Markup,
    analysis: str = "representative-seed",
) -> tuple[list[str], list[str], list[str]]:
    """The primary metric's declaration, its result sentences and the seed sentences, as lines each followed by
    a blank one: in markdown for the run notes, in plain text for ``summary.txt`` and the terminal."""
    name = name_writer(markup)

    def bold(text: str) -> str:
        return f"**{text}**" if markup == "markdown" else text

    when = "declared in advance" if declared else "chosen at comparison time, not before training"
    declaration = [f"Primary metric ({when}): {bold(name(primary))}.", ""] if primary else []
    sentences = (
        [
            (f"{bold(label + '.')} " if label else "")
            + shown.results_text(primary, c.candidate, c.baseline, markup=markup)
            for label, shown, c in stated_results(report, averaged, analysis, primary)
        ]
        if primary
        else []
    )
    sentences = [line for text in sentences for line in (text, "")]
    seeds = []
    for (base, cand), spread in spreads.items():
        key = primary or spread.to_frame()["metric"].iloc[0]
        label = name(pair_label(base, cand))
        seeds += [f"{bold(f'Seeds ({label})')}: {spread.results_text(key, markup=markup)}", ""]
    return declaration, sentences, seeds


def _summary_text(
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    primary: str | None,
    provenance: dict,
    declared: bool,
    averaged: ComparisonReport | None,
    analysis: str = "representative-seed",
) -> str:
    """``summary.txt``: what the run notes say, as plain text for a terminal (the study prints it).

    No markup and no escapes: a web address reads as it is and can be copied; names keep control
    characters as visible escapes, so every line is one line.
    """
    declaration, sentences, seeds = (
        [visible_text(line) for line in part]
        for part in _result_paragraphs(report, spreads, primary, declared, averaged, "plain", analysis)
    )
    tables = [str(report), ""]  # already one line per row, names written visibly
    if averaged is not None:
        tables = []
        for kind, shown in _analyses(report, averaged, analysis):
            tables += [analysis_heading(kind, analysis), "", str(shown), ""]
    what = ["What was compared", ""] + [f"- {visible_text(line)}" for line in provenance_lines(provenance)]
    what += [f"- {visible_text(model)}: {visible_text(i['why'])}" for model, i in provenance["models"].items()]
    lines = [
        "Paired comparison",
        "",
        *declaration,
        *sentences,
        *tables,
        *seeds,
        *what,
        "",
        _note_pointer(bool(spreads), analysis if averaged is not None else None),
    ]
    return "\n".join(lines) + "\n"


def _note_pointer(has_seed_table: bool, analysis: str | None = None) -> str:
    """The last line of the run notes: where the full report is, which table file holds which analysis when a
    seed-averaged comparison was made (``analysis``: the primary one's name), and the seed table when one was
    logged."""
    files = "report.html (table, plots, methods), report.md and report.csv"
    if analysis is not None:
        role = {kind: "primary" if kind == analysis else "sensitivity" for kind in ANALYSIS_TITLES}
        files += (
            f" (report.csv: the representative-seed comparison, the {role['representative-seed']} analysis; "
            f"seed_averaged.csv: the seed-averaged comparison, the {role['seed-averaged']} analysis)"
        )
    seeds = "; seed_spread.csv holds the seed table" if has_seed_table else ""
    return f"The full report is in this run's artifacts: {files}{seeds}."


def _compact_provenance(provenance: dict | None) -> list[str]:
    """The data and split in sentences, and which run stands for each model: the notes' short provenance."""
    if not provenance:
        return []
    models = "; ".join(
        f"{escape_markdown(shorten(m, NOTE_NAME_WIDTH))}: {escape_markdown(i['why'])}"
        for m, i in provenance["models"].items()
    )
    if len(models) > MAX_TAG_LENGTH // 5:
        models = "listed in report.md"
    lines = [f"- {escape_markdown(line)}" for line in provenance_lines(provenance)]
    return lines + [f"- Runs in the table: {models}.", ""]


def _compact_notes(
    report: ComparisonReport,
    title: list[str],
    declared: list[str],
    sentences: list[str],
    seeds: list[str],
    what: list[str],
    label: str | None,
    pointer: str,
):
    """The compact notes, fullest first: the sentences while they fit, a table of as many whole rows as fit,
    ``pointer`` to the files; last, a line that says the table does not fit."""

    def cut(name: str) -> str:
        return escape_markdown(shorten(name, NOTE_NAME_WIDTH))

    header = [
        "| metric | candidate | baseline | difference | interval | adjusted p | direction |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [
        f"| {escape_markdown(r.metric)} | {cut(r.candidate)} | {cut(r.baseline)} | {r.difference:+.4f} | "
        f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] | {r.adjusted_p_value:.4g} | {r.direction} |"
        for r in report.to_frame().itertuples()
    ]
    seeds_elsewhere = ["The seed-spread sentences are in report.html.", ""] if seeds else []
    if label is not None:
        header = [f"{label} (the sensitivity analysis is in report.md):", ""] + header
    for extra in (sentences + seeds, sentences + seeds_elsewhere, seeds_elsewhere):
        head = title + declared + extra + what
        # The longest prefix of rows that fits: the text grows by one line per row.
        fixed = (
            len(
                "\n".join(
                    head + header + ["", f"{len(rows)} more of the {len(rows)} rows are in report.md.", "", pointer]
                )
            )
            + 1
        )
        budget, n = MAX_TAG_LENGTH - fixed, 0
        while n < len(rows) and budget - (len(rows[n]) + 1) >= 0:
            budget -= len(rows[n]) + 1
            n += 1
        if extra != seeds_elsewhere and n < min(len(rows), MIN_NOTE_ROWS):
            continue  # a table matters more than the sentences, which report.md holds too
        more = [f"{len(rows) - n} more of the {len(rows)} rows are in report.md.", ""] if n < len(rows) else []
        yield "\n".join(head + header + rows[:n] + [""] + more + [pointer])
    yield "\n".join(title + [f"{len(rows)} hypotheses; the table does not fit MLflow's run notes.", "", pointer])


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


def _headline(report: ComparisonReport, primary: str | None, averaged: ComparisonReport | None, analysis: str) -> str:
    """The primary analysis' first result sentence of the primary metric, or of the first compared metric without
    one; named ``Primary analysis: ...`` when a sensitivity analysis exists beside it."""
    shown = dict(_analyses(report, averaged, analysis))[analysis]
    first = next(c for c in shown.comparisons if c.metric == (primary or shown.comparisons[0].metric))
    sentence = shown.results_text(first.metric, first.candidate, first.baseline)
    return sentence if averaged is None else f"{analysis_heading(analysis, analysis)}. {sentence}"


def _declared_in_advance(runs: list[Run], primary: str | None) -> bool:
    """Whether ``primary`` was fixed before the compared models were trained.

    True when every compared run is a child of one study run (``mlflow.parentRunId``) that logged this
    primary metric as its ``primary`` param and started before all of them: the ``main`` entry point logs
    the primary metric when the study starts.
    """
    parents = {r.data.tags.get(MLFLOW_PARENT_RUN_ID) for r in runs}
    parent_id = parents.pop() if len(parents) == 1 else None  # None: several parents, or none
    if primary is None or parent_id is None:
        return False
    try:
        study = MlflowClient().get_run(parent_id)
    except Exception:  # a parent that is gone or unreadable declares nothing
        return False
    return study.data.params.get("primary") == primary and study.info.start_time <= min(r.info.start_time for r in runs)


def _log_comparison(
    report,
    spreads,
    runs,
    plan: _Plan,
    comparison_settings: ComparisonSettings,
    settings: dict,
    provenance: dict,
    declared: bool = False,
    averaged: ComparisonReport | None = None,
) -> None:
    """Render every file, then log into the active (comparison) run: artifacts first, then tags, params and
    metrics.

    Every key and value is made to fit MLflow's limits here, before anything is logged, so MLflow has no reason
    to refuse or cut anything. ``settings`` is ``comparison_settings`` as logged (:func:`_logged_settings`).
    """
    run_name = _run_name(plan)
    primary = comparison_settings.primary
    analysis = settings["primary_analysis_used"]
    source_ids = [r.info.run_id for r in runs]
    text_settings = {k: "None" if v is None else str(v) for k, v in settings.items()}
    params = fit_values(
        text_settings, MAX_PARAM_LENGTH, "the whole value is in settings.json (compared_metrics: in report/)"
    )
    metrics, key_map = _comparison_metrics(plan.metric_names, report, averaged, spreads)
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-report-") as tmp:
        out = Path(tmp)
        frame, averaged_frame = _write_report_frames(out, report, averaged)
        seed_frame = _write_seed_files(out, spreads)
        _write_texts(out, report, averaged, provenance, settings)
        link = _page_link(runs[0].info.experiment_id)
        (out / "summary.txt").write_text(
            _summary_text(report, spreads, primary, provenance, declared, averaged, analysis) + link
        )
        _write_json_files(out, source_ids, plan, comparison_settings, key_map)
        report.save(out / REPORT_DIR)
        if averaged is not None:
            averaged.save(out / SEED_AVERAGED_REPORT_DIR)
        forest_plot(dict(_analyses(report, averaged, analysis))[analysis], out / "forest.png")  # the primary one
        seeds = seed_frame is not None
        _write_html(
            out, report, spreads, run_name, primary, provenance, declared, averaged, seeds=seeds, analysis=analysis
        )
        versions = _note_versions(report, spreads, primary, provenance, declared, averaged, analysis)
        note = fit_text(v + link for v in versions)
        headline = _headline(report, primary, averaged, analysis)
        mlflow.log_artifacts(str(out))
        mlflow.log_table(frame, artifact_file="report_table.json")
        if seed_frame is not None:
            mlflow.log_table(seed_frame, artifact_file="seed_spread_table.json")
        if averaged is not None:
            mlflow.log_table(averaged_frame, artifact_file="seed_averaged_table.json")
        mlflow.set_tags(_result_tags(runs[0].data.tags, primary, headline, run_name, note))
        log_params_once(params)
        mlflow.log_metrics(metrics)


def _result_tags(first: dict, primary, headline: str, run_name: str, note: str) -> dict:
    """The tags a comparison run gets with its results (its role and sources it got when it was made): the split,
    targets and dataset of ``first`` (a source run's tags), the primary metric and the result headline, its name and
    notes."""
    return {
        tags.SPLIT_DIGEST: first.get(tags.SPLIT_DIGEST, ""),
        tags.TARGETS_FINGERPRINT: first.get(tags.TARGETS_FINGERPRINT, ""),
        tags.DATASET: first.get(tags.DATASET, ""),
        tags.PRIMARY_METRIC: primary or "",
        tags.RESULT: shorten(headline, MAX_TAG_LENGTH),
        MLFLOW_RUN_NAME: run_name,
        MLFLOW_RUN_NOTE: note,
    }


def _page_link(experiment_id: str) -> str:
    """The closing line of the notes and ``summary.txt``: where the server's recsys page shows these runs, or ''."""
    page = recsys_page_url(experiment_id)
    return f"\n\nCompare these and other runs on the server's page: {page}" if page else ""


def _write_json_files(
    out: Path, source_ids: list[str], plan: _Plan, settings: ComparisonSettings, key_map: list[dict]
) -> None:
    """``source_runs.json`` (every source run, by model and seed), ``settings.json`` (the fields of ``settings``,
    which ``ComparisonSettings(**json.load(file))`` reads back) and ``metric_names.json``."""
    (out / "source_runs.json").write_text(
        json.dumps(
            {"run_ids": source_ids, "by_model": plan.groups, "representative_seed": plan.representative}, indent=2
        )
    )
    (out / SETTINGS_FILE).write_text(json.dumps(dataclasses.asdict(settings), indent=2))
    (out / "metric_names.json").write_text(json.dumps(key_map, indent=2))


def _write_html(
    out: Path,
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    run_name: str,
    primary: str | None,
    provenance: dict,
    declared: bool,
    averaged: ComparisonReport | None,
    *,
    seeds: bool,
    analysis: str,
) -> None:
    """``report.html``, with the forest plot and, when there are seeds, the seed plot already written in ``out``."""
    (out / "report.html").write_text(
        report_html(
            report,
            {pair_label(b, c): spread for (b, c), spread in spreads.items()},  # one-to-one headings
            primary=primary,
            title=run_name,
            forest_png=(out / "forest.png").read_bytes(),
            seed_png=(out / "seed_spread.png").read_bytes() if seeds else None,
            provenance_html=provenance_html(provenance),
            primary_declared=declared,
            seed_averaged=averaged,
            primary_analysis=analysis,
        )
    )


def _run_name(plan: _Plan) -> str:
    """``B, C vs A`` with a reference, ``compare A, B, C`` without; cut to the length a run name may have."""
    if plan.reference:
        run_name = f"{', '.join(m for m in plan.models if m != plan.reference)} vs {plan.reference}"
    else:
        run_name = "compare " + ", ".join(plan.models)
    return shorten(run_name, MAX_RUN_NAME_LENGTH)


def _comparison_metrics(
    names: dict,
    report: ComparisonReport,
    averaged: ComparisonReport | None,
    spreads: dict[tuple[str, str], SeedSpread],
) -> tuple[dict[str, float], list[dict]]:
    """The comparison run's metrics (finite values only) by MLflow name, and the map of each name to its hypothesis
    and field (``metric_names.json``)."""
    metrics = {}
    for prefix, rows in (("", report.comparisons), ("seed_averaged.", averaged.comparisons if averaged else ())):
        for c in rows:
            for field in REPORT_FIELDS:
                value = getattr(c, field)
                if pd.notna(value) and abs(value) != float("inf"):
                    metrics[names[(c.baseline, c.candidate, c.metric, prefix + field)]] = float(value)
    for spread in spreads.values():
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


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as CSV whose text a spreadsheet will not run as formulas, every non-number quoted."""
    csv_safe_frame(frame).to_csv(path, index=False, quoting=csv.QUOTE_NONNUMERIC)


def _write_report_frames(
    out: Path, report: ComparisonReport, averaged: ComparisonReport | None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """``report.csv``/``.parquet`` and, for a seed-averaged report, ``seed_averaged.csv``/``.parquet``; their frames."""
    frame = report.to_frame()
    _write_csv(frame, out / "report.csv")
    frame.to_parquet(out / "report.parquet", index=False)
    if averaged is None:
        return frame, None
    averaged_frame = averaged.to_frame()
    _write_csv(averaged_frame, out / "seed_averaged.csv")
    averaged_frame.to_parquet(out / "seed_averaged.parquet", index=False)
    return frame, averaged_frame


def _write_seed_files(out: Path, spreads: dict[tuple[str, str], SeedSpread]) -> pd.DataFrame | None:
    """``seed_spread.csv``, ``seed_spread_per_seed.csv`` and ``seed_spread.png``; the seed table, None without
    seeds. Each per-seed row names its pair in ``baseline`` and ``candidate``, and in ``comparison`` as
    :func:`~mlflow_recsys.tracking.naming.pair_label` writes it (one text per pair, so the plot keeps pairs apart)."""
    if not spreads:
        return None
    seed_frame = pd.concat([s.to_frame() for s in spreads.values()], ignore_index=True)
    _write_csv(seed_frame, out / "seed_spread.csv")
    per_seed = pd.concat(
        [
            s.per_seed_frame().assign(baseline=b, candidate=c, comparison=pair_label(b, c))
            for (b, c), s in spreads.items()
        ],
        ignore_index=True,
    )
    _write_csv(per_seed, out / "seed_spread_per_seed.csv")
    seed_spread_plot(per_seed, out / "seed_spread.png")
    return seed_frame


def _write_texts(
    out: Path, report: ComparisonReport, averaged: ComparisonReport | None, provenance: dict, settings: dict
) -> None:
    """``report.md``, ``methods.md`` (with every setting, as logged), ``report.tex``, ``provenance.json`` and
    ``references.bib``."""
    what = provenance_markdown(provenance)
    tables, methods = report.to_markdown(), report.methods_text()
    runs_used = "; ".join(f"{m}: {i['why']}" for m, i in provenance["models"].items())
    latex = report.to_latex(title=f"One trained run per model ({runs_used}).")
    if averaged is not None:
        analysis = settings["primary_analysis_used"]
        methods += "\n\n" + seed_averaging_text(averaged).strip()
        methods += " " + primary_analysis_text(analysis, settings["primary_analysis"])
        shown = dict(_analyses(report, averaged, analysis))
        tables = "\n\n".join(f"## {analysis_heading(kind, analysis)}\n\n{shown[kind].to_markdown()}" for kind in shown)
        titles = {
            "representative-seed": f"one trained run per model ({runs_used}).",
            "seed-averaged": "each model's per-user values averaged over its training seeds.",
        }
        labels = {"representative-seed": "tab:comparison", "seed-averaged": "tab:seed-averaged"}
        latex = "\n".join(
            shown[kind].to_latex(label=labels[kind], title=f"{analysis_heading(kind, analysis)}, {titles[kind]}")
            for kind in shown
        )
    (out / "report.tex").write_text(latex)
    (out / "report.md").write_text(tables + "\n\n" + what + "\n")
    (out / "methods.md").write_text(methods + "\n\n" + what + "\n\n" + _settings_markdown(settings) + "\n")
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2))
    (out / "references.bib").write_text(references_bibtex())


#: What a logged setting that is not a :class:`ComparisonSettings` field means, for the settings table.
_LOGGED_ONLY = {
    "primary_analysis_used": "the analysis the conclusion rests on (primary_analysis, auto resolved)",
    "model_tag": "run tag that names the model",
    "report_seed": settings_of(ComparisonSettings)["seed"][1].help,
    "compared_metrics": "the metric keys compared",
    "scipy_version": "the SciPy that computed the tests and intervals",
}


def _settings_markdown(settings: dict) -> str:
    """The comparison's settings as a markdown table, in the order they are logged as params, each with what it
    means (its declaration's help)."""
    meaning = {name: s.help for name, (_, s) in settings_of(ComparisonSettings).items()} | _LOGGED_ONLY
    rows = "\n".join(
        f"| {escape_markdown(name)} | {escape_markdown(str(value))} | {escape_markdown(meaning[name])} |"
        for name, value in settings.items()
    )
    return (
        "## Settings\n\nEvery setting of this comparison, as logged in the run's params:\n\n"
        "| setting | value | meaning |\n|---|---|---|\n" + rows
    )
