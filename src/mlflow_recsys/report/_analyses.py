"""The two analyses of a comparison of runs (representative-seed and seed-averaged) in words: their names, which one is
primary, and which of their results a reader is told."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport, PairwiseComparison


def seed_averaged_phrase(report: ComparisonReport) -> str:
    """``each model's per-user values averaged over its training seeds, 1 to 3 per model``; names no model, so it is
    safe in every markup."""
    counts = sorted({n for c in report.comparisons for n in (c.baseline_seeds, c.candidate_seeds)})
    span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"each model's per-user values averaged over its training seeds, {span} per model"


def seed_averaging_text(report: ComparisonReport) -> str:
    """The methods sentences of a seed-averaged report (also under its table in report.html); empty for single trained
    instances."""
    if not report.seed_averaged:
        return ""
    return (
        f"Seed-averaged: {seed_averaged_phrase(report)}, before the per-user differences were formed; a model trained "
        "under one seed only enters with that instance. Averaging removes part of the retraining noise from each "
        "user's difference, but inference remains over users for these trained instances: the intervals and "
        "p-values do not cover the spread a new training seed would bring, which the seed-spread table "
        "describes. "
    )


#: What each analysis of a comparison of runs is called (see ``ComparisonSettings.primary_analysis``).
ANALYSIS_TITLES = {
    "representative-seed": "representative-seed comparison",
    "seed-averaged": "seed-averaged comparison",
}


def analysis_heading(analysis: str, primary_analysis: str) -> str:
    """``Primary analysis: seed-averaged comparison`` or ``Sensitivity analysis: representative-seed comparison``."""
    role = "Primary analysis" if analysis == primary_analysis else "Sensitivity analysis"
    return f"{role}: {ANALYSIS_TITLES[analysis]}"


def ordered_analyses(
    report: ComparisonReport, averaged: ComparisonReport | None, analysis: str
) -> list[tuple[str, ComparisonReport]]:
    """The analyses made, primary first: ``("seed-averaged", averaged)`` and ``("representative-seed", report)``."""
    made = [("representative-seed", report)] + ([("seed-averaged", averaged)] if averaged is not None else [])
    return sorted(made, key=lambda pair: pair[0] != analysis)


def stated_results(
    report: ComparisonReport, seed_averaged: ComparisonReport | None, primary_analysis: str, metric: str
) -> list[tuple[str, ComparisonReport, PairwiseComparison]]:
    """The results of ``metric`` a reader is told, the primary analysis' first, as (:func:`analysis_heading` or
    ``""`` with one analysis, report, pair). The sensitivity analysis states only the pairs it tests differently: a
    pair in which neither model has seeds has the same comparison in both, which would otherwise be said twice."""
    if seed_averaged is None:
        return [("", report, c) for c in report.comparisons if c.metric == metric]
    differs = {(c.baseline, c.candidate) for c in seed_averaged.comparisons if c.averages_seeds}
    analyses = {"representative-seed": report, "seed-averaged": seed_averaged}
    order = [primary_analysis] + [kind for kind in analyses if kind != primary_analysis]
    return [
        (analysis_heading(kind, primary_analysis), analyses[kind], c)
        for kind in order
        for c in analyses[kind].comparisons
        if c.metric == metric and (kind == primary_analysis or (c.baseline, c.candidate) in differs)
    ]


def primary_analysis_text(primary_analysis: str, requested: str | None = None) -> str:
    """The methods sentences saying which analysis the conclusion rests on; ``requested`` is the setting (``"auto"``
    when the default rule chose it, ``None`` when unknown)."""
    other = "representative-seed" if primary_analysis == "seed-averaged" else "seed-averaged"
    why = {
        "auto": ", chosen by the default rule, which takes the seed-averaged comparison whenever a model has two "
        "or more seeds",
        None: "",
    }.get(requested, ", as set for the comparison (primary_analysis)")
    return (
        f"The primary analysis is the {ANALYSIS_TITLES[primary_analysis]}{why}; the conclusion rests "
        f"on it. The {ANALYSIS_TITLES[other]} tests the same hypotheses on "
        + (
            "one trained run per model"
            if other == "representative-seed"
            else "each model's per-user values averaged over its training seeds"
        )
        + " and is reported as a sensitivity analysis: it shows whether the conclusion depends on that "
        "choice, and is not a second test of the hypotheses."
    )
