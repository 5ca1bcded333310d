"""What the study run holds once its datasets are compared: the paper's table, the verdict across datasets and their
figures, built from the comparisons and the per-user values of the runs they compared."""

from __future__ import annotations

import base64
import html
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._plots import critical_difference_plot, meta_forest_plot
from mlflow_recsys.report._study import (
    LEVEL_COLUMNS,
    study_csv,
    study_html_table,
    study_latex,
    study_markdown,
    study_text,
    table_legend,
    verdict_lines,
)
from mlflow_recsys.stats import average_over_seeds, verdict_across_datasets
from mlflow_recsys.stats._results import ComparisonReport, significance_level
from mlflow_recsys.stats._verdict import StudyVerdict
from mlflow_recsys.tracking._comparison import RunComparison
from mlflow_recsys.tracking._study_file import StudyPlan

#: The folder of the study run's artifacts that holds the summary.
SUMMARY_FOLDER = "study"


@dataclass(frozen=True)
class StudySummary:
    """The study's name, its table (:data:`~mlflow_recsys.report._study.LEVEL_COLUMNS` rows), its legend (which names
    what is missing), and the verdict."""

    name: str
    levels: pd.DataFrame
    legend: str
    alpha: float
    verdict: StudyVerdict

    def text(self) -> str:
        """The table and the verdict as the console prints them."""
        lines = [self.legend + " ^: the best of its column.", "", study_text(self.levels, self.alpha)]
        return "\n".join(
            lines + ([""] + verdict_lines(self.verdict) if self.verdict.effects or self.verdict.ranks else [])
        )


def summarize(plan: StudyPlan, comparisons: Mapping[str, RunComparison], missing: Sequence[str] = ()) -> StudySummary:
    """The summary of the datasets that were compared (dataset -> its :class:`RunComparison`), in the plan's order;
    ``missing`` names what failed and is not in it."""
    levels: list[tuple] = []
    results: dict[str, dict[str, EvaluationResult]] = {}
    for dataset, comparison in comparisons.items():
        by_model: dict[str, dict[object, EvaluationResult]] = {
            m: {seed: result for seed, result in seeds.items()} for m, seeds in comparison.results.items()
        }
        results[dataset] = {m: average_over_seeds(seeds, name=m) for m, seeds in by_model.items()}
        levels += _levels(dataset, by_model, comparison.primary_report)
    first = next(iter(comparisons.values())).primary_report
    alpha = significance_level(plan.comparison.confidence_level)
    metrics = list(dict.fromkeys(c.metric for c in first.comparisons))
    verdict = verdict_across_datasets(
        results,
        metrics=metrics,
        reference=plan.comparison.reference,
        scale=plan.settings.scale,
        posthoc=plan.settings.posthoc,
        confidence_level=plan.comparison.confidence_level,
    )
    legend = table_legend(plan.comparison) + (f" Missing: {'; '.join(missing)}." if missing else "")
    return StudySummary(plan.settings.name, pd.DataFrame(levels, columns=list(LEVEL_COLUMNS)), legend, alpha, verdict)


def _levels(dataset: str, by_model: Mapping[str, Mapping[object, EvaluationResult]], report: ComparisonReport) -> list:
    adjusted = {
        (c.candidate, c.metric): c.adjusted_p_value for c in report.comparisons if c.baseline == report.reference
    }
    rows = []
    for metric in dict.fromkeys(c.metric for c in report.comparisons):
        for model, seeds in by_model.items():
            means = np.array([r.metrics[metric] for r in seeds.values()])
            sd = float(means.std(ddof=1)) if len(means) > 1 else math.nan
            rows.append(
                (dataset, model, metric, float(means.mean()), sd, len(means), adjusted.get((model, metric), math.nan))
            )
    return rows


def log_summary(summary: StudySummary) -> None:
    """Write the summary's files into the active run's ``study/`` folder: ``table.md``, ``table.tex``, ``table.csv``,
    ``effects.csv``, ``ranks.csv``, a forest plot per pooled effect, a critical-difference diagram per metric, and
    ``report.html`` holding them all."""
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-study-") as tmp:
        folder = Path(tmp)
        files = {
            "table.md": study_markdown(summary.levels, summary.alpha, summary.legend),
            "table.tex": study_latex(summary.levels, summary.alpha, summary.legend),
            "table.csv": study_csv(summary.levels),
            "effects.csv": summary.verdict.effects_frame().to_csv(index=False),
            "ranks.csv": summary.verdict.ranks_frame().to_csv(index=False),
        }
        # A private folder, uploaded whole once written: nothing in it is read half-written.
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        figures = _figures(summary.verdict, folder)
        (folder / "report.html").write_text(_page(summary, figures), encoding="utf-8")
        mlflow.log_artifacts(tmp, SUMMARY_FOLDER)


def _figures(verdict: StudyVerdict, folder: Path) -> list[tuple[str, Path]]:
    figures = []
    for i, (candidate, metric, meta) in enumerate(verdict.effects, start=1):
        title = f"{candidate} vs {verdict.reference}, {metric}"
        meta_forest_plot(meta, folder / f"forest_{i}.png", title=title)
        figures.append((title, folder / f"forest_{i}.png"))
    for i, (metric, ranks) in enumerate(verdict.ranks, start=1):
        critical_difference_plot(ranks, folder / f"ranks_{i}.png")
        figures.append((f"ranks on {metric}", folder / f"ranks_{i}.png"))
    return figures


def _page(summary: StudySummary, figures: Sequence[tuple[str, Path]]) -> str:
    images = "".join(
        f'<h3>{html.escape(title)}</h3><img alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}">'
        for title, path in figures
    )
    verdict = "".join(f"<p>{html.escape(line)}</p>" for line in verdict_lines(summary.verdict))
    name = html.escape(summary.name)
    style = (
        "body{font-family:sans-serif;font-size:14px;max-width:1100px;margin:1em auto;padding:0 8px}"
        "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 4px;text-align:right}"
        "td.name{text-align:left}img{max-width:100%}"
    )
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{name}</title><style>{style}</style></head><body>'
        f"<h1>{name}</h1><p>{html.escape(summary.legend)}</p>"
        f'<div style="overflow-x:auto">{study_html_table(summary.levels, summary.alpha)}</div>'
        f"<h2>Across datasets</h2>{verdict or '<p>One dataset: nothing to pool.</p>'}{images}</body></html>"
    )
