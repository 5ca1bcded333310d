"""Compare training runs and log the report back to MLflow as a comparison run."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import mlflow
import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import ComparisonReport, SeedSpread, compare_models, references_bibtex, seed_spread
from mlflow_recsys.stats.plots import forest_plot, seed_spread_plot
from mlflow_recsys.stats.reporting import report_html
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.artifacts import EvaluationArtifacts
from mlflow_recsys.tracking.context import entry_point_run, log_params_once
from mlflow_recsys.tracking.naming import mlflow_metric_name, safe_name
from mlflow_recsys.tracking.runs import RunSelectionError, load_many, select_runs


@dataclass(frozen=True)
class RunComparison:
    """What :func:`compare_runs` produced.

    Attributes
    ----------
    report:
        The paired comparison, one trained run per model (its lowest seed, or ``report_seed``).
    seed_spreads:
        ``"<candidate> vs <baseline>"`` -> :class:`SeedSpread` for every pair where a side has seeds.
    run_id:
        The comparison run's id.
    source_runs:
        Model name -> {seed tag -> run id} of the runs compared.
    report_seed:
        The seed asked for as each model's representative, or ``None`` for the lowest.
    """

    report: ComparisonReport
    seed_spreads: dict[str, SeedSpread]
    run_id: str
    source_runs: dict[str, dict[str, str]]
    report_seed: str | None = None

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
    reference: str | None = None,
    metrics: Sequence[str] | None = None,
    primary: str | None = None,
    correction: str | None = "holm",
    confidence_level: float = 0.95,
    n_resamples: int = 9999,
    alternative: str = "two-sided",
    test_method: str = "randomization",
    random_state: int = 0,
    paired_seeds: bool = False,
    seed: str | None = None,
    model_tag: str = tags.MODEL,
    output_experiment: str | None = None,
) -> RunComparison:
    """Select training runs, verify they are comparable, compare them and log a comparison run.

    Runs are grouped by model (the ``model_tag`` tag, ``recsys.model`` by
    default) and seed (``recsys.seed``). Runs of one model must agree on every
    hyper-parameter but the seed. The paired report compares one trained
    instance per model, its lowest seed unless ``seed`` names another, so its
    family stays pairs x metrics; for every pair where a model has two or more
    seeds, a seed-spread table (descriptive, no p-values) puts the retraining
    spread beside the spread across users.

    The comparison run goes to ``output_experiment`` or, by default, the
    experiment of the first source run. When called inside an active run (the
    ``compare`` entry point of ``mlflow run``) that run is used.

    Raises
    ------
    RunSelectionError
        If the selection is invalid, runs were scored on different splits,
        targets or users (naming each run and its value), two runs share a model
        and seed, or ``reference`` / ``primary`` / ``metrics`` name nothing compared.
    ArtifactError
        If a run's per-user artifacts are missing or malformed.
    """
    def select() -> list[Run]:
        return select_runs(run_ids=list(run_ids) if run_ids else None, compare_url=compare_url,
                           experiment=experiment, filter_string=filter_string)

    # A run made for this comparison starts after selection, so a bad selection leaves nothing behind; a
    # run that already exists (the `compare` entry point) records a failed selection like any other failure.
    in_existing_run = mlflow.active_run() is not None or bool(os.environ.get("MLFLOW_RUN_ID"))
    runs = None if in_existing_run else select()
    with _comparison_run(runs[0].info.experiment_id if runs else None, output_experiment) as run:
        mlflow.set_tag(tags.ROLE, tags.ROLE_COMPARISON)
        runs = runs or select()
        mlflow.set_tag(tags.SOURCE_RUNS, ",".join(r.info.run_id for r in runs))
        artifacts = load_many([r.info.run_id for r in runs])
        _verify_same_evaluation(runs, artifacts)
        groups = _group(runs, artifacts, model_tag)
        _same_hyperparameters(runs, model_tag)
        metric_keys = _metric_keys(metrics, artifacts)
        if primary is not None and primary not in metric_keys:
            raise RunSelectionError(f"primary: expected one of the compared metrics {metric_keys}, found {primary!r}")
        if reference is not None and reference not in groups:
            raise RunSelectionError(
                f"reference: expected one of the compared models {sorted(groups)}, found {reference!r}"
            )
        if len(groups) < 2:
            raise RunSelectionError(f"runs: expected at least two models to compare, found only {sorted(groups)}")

        # Without a reference every pair is compared, the earlier name as baseline: sorted, not in run order.
        instances = {m: groups[m][_representative_seed(m, groups[m], seed)][1] for m in sorted(groups)}
        if reference is not None:
            instances = {reference: instances[reference], **{m: r for m, r in instances.items() if m != reference}}
        report = compare_models(
            instances, metrics=metric_keys, reference=reference, correction=correction,
            confidence_level=confidence_level, n_resamples=n_resamples, alternative=alternative,
            test_method=test_method, random_state=random_state,
        )
        spreads = {}
        for base, cand in {(c.baseline, c.candidate) for c in report.comparisons}:
            if len(groups[base]) < 2 and len(groups[cand]) < 2:
                continue
            spreads[f"{cand} vs {base}"] = seed_spread(
                _side(groups[base]), _side(groups[cand]), metrics=metric_keys, baseline_name=base,
                candidate_name=cand, paired_seeds=paired_seeds and len(groups[base]) > 1 and len(groups[cand]) > 1,
                confidence_level=confidence_level, n_resamples=n_resamples, random_state=random_state,
            )
        spreads = dict(sorted(spreads.items()))
        source_runs = {
            model: {s: run_id for s, (run_id, _) in seeds.items()} for model, seeds in groups.items()
        }
        settings = {
            "reference": reference, "metrics": ",".join(metric_keys), "primary": primary,
            "correction": correction, "confidence_level": confidence_level, "n_resamples": n_resamples,
            "alternative": alternative, "test_method": test_method, "random_state": random_state,
            "paired_seeds": paired_seeds, "model_tag": model_tag,
            "report_seed": seed if seed is not None else "lowest seed of each model",
        }
        _log_comparison(report, spreads, runs, source_runs, settings, primary)
        return RunComparison(report=report, seed_spreads=spreads, run_id=run.info.run_id, source_runs=source_runs,
                             report_seed=seed)


@contextmanager
def _comparison_run(source_experiment_id: str | None, output_experiment: str | None):
    """The comparison run: the caller's active run, the entry point's run, or a new one.

    On an exception the reason goes into the ``recsys.error`` tag and a run
    started here ends FAILED, so no half-made comparison looks FINISHED.
    """
    active = mlflow.active_run()
    owned = active is None
    if active is not None:
        run = active
    elif os.environ.get("MLFLOW_RUN_ID"):
        run = entry_point_run("comparison")  # the run `mlflow run -e compare` created
    else:
        experiment_id = source_experiment_id
        if output_experiment is not None:
            exp = mlflow.get_experiment_by_name(output_experiment)
            experiment_id = exp.experiment_id if exp else mlflow.create_experiment(output_experiment)
        run = mlflow.start_run(experiment_id=experiment_id, run_name="comparison")
    try:
        yield run
    except BaseException as exc:
        MlflowClient().set_tag(run.info.run_id, tags.ERROR, f"{type(exc).__name__}: {exc}"[:5000])
        if owned:
            mlflow.end_run(status="FAILED")
        raise
    else:
        if owned:
            mlflow.end_run()


# -- verifying and grouping ---------------------------------------------------------


def _verify_same_evaluation(runs: list[Run], artifacts: dict[str, EvaluationArtifacts]) -> None:
    def check(label: str, values: dict[str, object]) -> None:
        if len(set(map(str, values.values()))) > 1:
            listing = "; ".join(f"run {rid}: {str(v)[:16]}" for rid, v in values.items())
            hint = (
                " (a run evaluated with mlflow.models.evaluate needs split_digest, sample_id and n_items in its "
                "evaluator_config and data)" if any(v is None for v in values.values()) else ""
            )
            raise RunSelectionError(f"runs were not evaluated on the same {label}: {listing}{hint}")

    check("split (split digest)", {r.info.run_id: artifacts[r.info.run_id].split_digest for r in runs})
    check("users and targets (targets fingerprint)",
          {r.info.run_id: artifacts[r.info.run_id].result.targets_fingerprint for r in runs})
    first = runs[0].info.run_id
    ids = artifacts[first].result.sample_ids
    for r in runs[1:]:
        other = artifacts[r.info.run_id].result.sample_ids
        if len(other) != len(ids) or not (other == ids).all():
            raise RunSelectionError(f"runs {first} and {r.info.run_id} hold different sample ids")


def _group(runs: list[Run], artifacts, model_tag: str) -> dict[str, dict[str, tuple[str, EvaluationResult]]]:
    groups: dict[str, dict[str, tuple[str, EvaluationResult]]] = {}
    for r in runs:
        model = r.data.tags.get(model_tag)
        seed = r.data.tags.get(tags.SEED, tags.NO_SEED)
        if not model:
            raise RunSelectionError(f"run {r.info.run_id}: expected a {model_tag!r} tag naming its model, found none")
        seeds = groups.setdefault(model, {})
        if seed in seeds:
            raise RunSelectionError(
                f"runs {seeds[seed][0]} and {r.info.run_id} are both {model} with seed {seed}; select one, "
                "e.g. by run ids or by adding to the filter tags.mlflow.parentRunId = '<the study run id>'"
            )
        seeds[seed] = (r.info.run_id, artifacts[r.info.run_id].result)
    return groups


def _same_hyperparameters(runs: list[Run], model_tag: str) -> None:
    """Refuse to pool runs of one model trained with different hyper-parameters (the ``recsys.config`` tag)."""
    by_model: dict[str, list[Run]] = {}
    for r in runs:
        by_model.setdefault(r.data.tags[model_tag], []).append(r)
    for model, members in by_model.items():
        configs = {r.info.run_id: json.loads(r.data.tags.get(tags.CONFIG, "{}")) for r in members}
        keys = set().union(*configs.values())
        differing = sorted(k for k in keys if len({json.dumps(c.get(k)) for c in configs.values()}) > 1)
        if differing:
            listing = "; ".join(
                f"run {rid}: " + ", ".join(f"{k}={c.get(k)}" for k in differing) for rid, c in configs.items()
            )
            raise RunSelectionError(
                f"runs of {model} differ in hyper-parameters other than the seed ({differing}), so their seeds "
                f"cannot be pooled: {listing}; select runs of one configuration, or give the configurations "
                "different model names"
            )


def _seed_order(seed: str):
    numeric = seed.lstrip("-").isdigit()
    return (not numeric, int(seed) if numeric else 0, seed)


def _representative_seed(model: str, seeds: dict, wanted: str | None) -> str:
    if len(seeds) == 1 or wanted is None:
        return sorted(seeds, key=_seed_order)[0]
    if wanted not in seeds:
        raise RunSelectionError(f"seed: expected one of {model}'s seeds {sorted(seeds, key=_seed_order)}, found {wanted!r}")
    return wanted


def _side(seeds: dict[str, tuple[str, EvaluationResult]]):
    if len(seeds) == 1:
        return next(iter(seeds.values()))[1]
    return {int(s) if s.lstrip("-").isdigit() else s: res for s, (_, res) in seeds.items()}


def _metric_keys(metrics, artifacts) -> list[str]:
    common = None
    for art in artifacts.values():
        keys = list(art.result.per_user)
        common = keys if common is None else [k for k in common if k in keys]
    if not metrics:
        if not common:
            raise RunSelectionError("metrics: the runs share no metric key")
        return common
    malformed = [m for m in metrics if "@" not in m]
    if malformed:
        raise RunSelectionError(f"metrics: expected keys of the form 'name@k' (e.g. 'ndcg@100'), found {malformed}")
    missing = [m for m in metrics if m not in common]
    if missing:
        raise RunSelectionError(f"metrics: {missing} were not evaluated by every run; available: {common}")
    return list(metrics)


# -- logging back ---------------------------------------------------------------------


def _metric_prefix(c, reference: str | None) -> str:
    who = c.candidate if reference is not None else f"{c.candidate}_vs_{c.baseline}"
    return f"{safe_name(who)}.{mlflow_metric_name(c.metric)}"


def _note(report: ComparisonReport, spreads: dict[str, SeedSpread], primary: str | None) -> str:
    lines = ["## Paired comparison", ""]
    if primary is not None:
        lines.append(f"Primary metric, declared in advance: **{primary}**.")
        for c in report.comparisons:
            if c.metric == primary:
                lines += ["", report.results_text(primary, c.candidate, c.baseline)]
        lines.append("")
    lines += [report.to_markdown(), ""]
    for name, spread in spreads.items():
        key = primary or spread.to_frame()["metric"].iloc[0]
        lines += [f"**Seeds ({name})**: {spread.results_text(key)}", ""]
    return "\n".join(lines)


def _log_comparison(report, spreads, runs, source_runs, settings, primary) -> None:
    """Render every artifact to a temporary folder, then log tags, params, metrics and artifacts."""
    if report.reference:
        run_name = f"{', '.join(m for m in source_runs if m != report.reference)} vs {report.reference}"
    else:
        run_name = "compare " + ", ".join(sorted(source_runs))
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-report-") as tmp:
        out = Path(tmp)
        frame = report.to_frame()
        frame.to_csv(out / "report.csv", index=False)
        frame.to_parquet(out / "report.parquet", index=False)
        (out / "report.md").write_text(report.to_markdown() + "\n")
        (out / "methods.md").write_text(report.methods_text() + "\n")
        (out / "references.bib").write_text(references_bibtex())
        forest_plot(report, out / "forest.png")
        seed_frame = pd.concat([s.to_frame() for s in spreads.values()], ignore_index=True) if spreads else None
        if seed_frame is not None:
            seed_frame.to_csv(out / "seed_spread.csv", index=False)
            per_seed = pd.concat([s.per_seed_frame().assign(comparison=n) for n, s in spreads.items()],
                                 ignore_index=True)
            per_seed.to_csv(out / "seed_spread_per_seed.csv", index=False)
            seed_spread_plot(per_seed, out / "seed_spread.png")
        (out / "report.html").write_text(report_html(
            report, spreads, primary=primary, title=run_name, forest_png=(out / "forest.png").read_bytes(),
            seed_png=(out / "seed_spread.png").read_bytes() if seed_frame is not None else None,
        ))

        first = runs[0].data.tags
        mlflow.set_tags({
            tags.SPLIT_DIGEST: first.get(tags.SPLIT_DIGEST, ""),
            tags.TARGETS_FINGERPRINT: first.get(tags.TARGETS_FINGERPRINT, ""),
            tags.PRIMARY_METRIC: primary or "",
            "mlflow.runName": run_name,
            "mlflow.note.content": _note(report, spreads, primary),
        })
        log_params_once(settings)
        metrics = {}
        for c in report.comparisons:
            prefix = _metric_prefix(c, report.reference)
            for field in ("difference", "relative_difference", "ci_low", "ci_high", "p_value", "adjusted_p_value"):
                value = getattr(c, field)
                if pd.notna(value) and abs(value) != float("inf"):
                    metrics[f"{prefix}.{field}"] = float(value)
        for spread in spreads.values():
            for row in spread.to_frame().itertuples():
                prefix = f"{safe_name(row.candidate)}.{mlflow_metric_name(row.metric)}.seeds"
                for field in ("mean_difference", "sd_users", "sd_retraining", "ratio", "widens_by", "sign_reversals"):
                    value = getattr(row, field)
                    if pd.notna(value):
                        metrics[f"{prefix}.{field}"] = float(value)
        mlflow.log_metrics(metrics)
        mlflow.log_artifacts(str(out))
        mlflow.log_table(frame, artifact_file="report_table.json")
        if seed_frame is not None:
            mlflow.log_table(seed_frame, artifact_file="seed_spread_table.json")


