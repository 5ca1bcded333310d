"""What a study over several datasets reports: the paper's table (models x (dataset, metric)) in markdown, LaTeX, HTML
and CSV, and the verdict across datasets in sentences.

The table computes nothing: each cell is a row of the ``levels`` frame the study built (:data:`LEVEL_COLUMNS`), its
marker the :func:`~mlflow_recsys.report.significance_marker` of the dataset comparison's adjusted p-value.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pandas as pd

from mlflow_recsys.report._escaping import (
    LATEX_CAPTION_WIDTH,
    csv_safe_frame,
    escape_latex,
    escape_markdown,
    latex_cell,
    visible_text,
)
from mlflow_recsys.report._latex import significance_marker
from mlflow_recsys.report._rows import format_level, format_p
from mlflow_recsys.report._vocabulary import words
from mlflow_recsys.stats._meta import MetaAnalysis
from mlflow_recsys.stats._ranks import RankAnalysis
from mlflow_recsys.stats._results import significance_level
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.stats._verdict import StudyVerdict

#: Columns of the frame :func:`study_table` reads: one row per dataset, model and metric. ``mean`` is the mean over
#: the model's seeds of its mean over users, ``sd`` the SD over seeds (ddof=1; NaN with one seed), ``seeds`` their
#: number, and ``adjusted_p_value`` the dataset comparison's against the reference (NaN for the reference itself, or
#: where the model was not compared).
LEVEL_COLUMNS = ("dataset", "model", "metric", "mean", "sd", "seeds", "adjusted_p_value")


@dataclass(frozen=True)
class TableCell:
    """One cell of the paper's table: the mean, the SD over seeds (NaN for none), the significance marker, and
    whether it is the best of its column."""

    mean: float
    sd: float
    marker: str
    best: bool

    def text(self, digits: int = 4) -> str:
        spread = f" ± {self.sd:.{digits}f}" if math.isfinite(self.sd) else ""
        return f"{self.mean:.{digits}f}{spread}{self.marker}"


def study_table(levels: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Models x (dataset, metric): a :class:`TableCell` per model and column (None where the model was not scored),
    models in the order ``levels`` first names them, columns in the order of its datasets, then metrics.

    Raises
    ------
    ValueError
        If ``levels`` lacks a column of :data:`LEVEL_COLUMNS` or holds no row.
    """
    missing = [c for c in LEVEL_COLUMNS if c not in levels.columns]
    if missing or levels.empty:
        raise ValueError(f"levels: expected rows with the columns {list(LEVEL_COLUMNS)}, found {list(levels.columns)}")
    best = _best(levels)
    cells = {
        (r.model, (r.dataset, r.metric)): TableCell(
            r.mean, r.sd, "" if pd.isna(r.adjusted_p_value) else significance_marker(r.adjusted_p_value, alpha), top
        )
        for r, top in zip(levels.itertuples(), best, strict=True)
    }
    models = list(dict.fromkeys(levels["model"]))
    columns = list(dict.fromkeys(zip(levels["dataset"], levels["metric"], strict=True)))
    frame = pd.DataFrame(
        [[cells.get((m, c)) for c in columns] for m in models],
        index=pd.Index(models, name="model"),
        columns=pd.MultiIndex.from_tuples(columns, names=["dataset", "metric"]),
    )
    return frame


def table_legend(settings: ComparisonSettings) -> str:
    """What the table's numbers and markers mean, as plain text: the comparisons' test, B, sides and correction."""
    alpha, reference = significance_level(settings.confidence_level), settings.reference
    markers = (
        f"* adjusted p <= {alpha:g}, ** <= {alpha / 5:g}, *** <= {alpha / 50:g} against {reference} on that dataset"
        if reference
        else "no markers: the study names no reference"
    )
    test = words(
        "test_method", settings.test_method, B=settings.n_resamples, zeros=words("zero_method", settings.zero_method)
    )
    correction = words("correction", settings.correction)
    side = words("alternative", settings.alternative)
    if settings.hypothesis != "superiority":
        scale = " of the reference's mean" if settings.relative_margin else " in metric units"
        side = f"{words('hypothesis', settings.hypothesis)}, delta = {settings.margin:g}{scale}"
    verdict = (
        " The pooled effects and ranks across datasets test for a difference (two-sided), not against the margin."
        if settings.hypothesis != "superiority"
        else ""
    )
    return (
        "Mean over training seeds of each model's mean over test users (± SD over seeds where a model has several); "
        f"{markers} ({test}, {side}; {correction} adjustment, as each dataset's "
        f"comparison run reports); the best of each column in bold.{verdict}"
    )


def study_text(levels: pd.DataFrame, alpha: float) -> str:
    """The paper's table as fixed-width text for a terminal (the best of a column marked ``^``)."""
    table = study_table(levels, alpha)
    shown = table.map(lambda c: "" if c is None else c.text() + ("^" if c.best else ""))
    shown.columns = [f"{visible_text(d)}: {visible_text(m)}" for d, m in table.columns]
    shown.index = [visible_text(m) for m in table.index]
    return shown.to_string()


def study_markdown(levels: pd.DataFrame, alpha: float, legend: str) -> str:
    """The paper's table in markdown, names escaped, under its legend."""
    table = study_table(levels, alpha)
    head = ["model", *(f"{escape_markdown(d)}: {escape_markdown(m)}" for d, m in table.columns)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for model, cells in table.iterrows():
        shown = [_markdown_cell(c) for c in cells]
        lines.append("| " + " | ".join([escape_markdown(model), *shown]) + " |")
    return escape_markdown(legend) + "\n\n" + "\n".join(lines)


def _markdown_cell(cell: TableCell | None) -> str:
    if cell is None:
        return ""
    text = cell.text().replace("*", "\\*")
    return f"**{text}**" if cell.best else text


def study_latex(levels: pd.DataFrame, alpha: float, legend: str, *, label: str = "tab:study") -> str:
    r"""The paper's table as a booktabs ``table`` (needs ``\usepackage{booktabs}``): one column group per dataset,
    the best of each column in bold, markers as superscripts, the legend as its caption; every name escaped."""
    table = study_table(levels, alpha)
    datasets = list(dict.fromkeys(d for d, _ in table.columns))
    spans, rules, start = [], [], 2
    for d in datasets:
        width = sum(1 for dd, _ in table.columns if dd == d)
        spans.append(rf"\multicolumn{{{width}}}{{c}}{{{latex_cell(d)}}}")
        rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
        start += width
    rows = [
        " & ".join([latex_cell(model), *(_latex_cell(c) for c in cells)]) + r" \\" for model, cells in table.iterrows()
    ]
    return "\n".join(
        [
            r"\begin{table}",
            r"\centering",
            rf"\caption{{{escape_latex(legend, width=LATEX_CAPTION_WIDTH)}}}",
            rf"\label{{{label}}}",
            rf"\begin{{tabular}}{{l{'r' * len(table.columns)}}}",
            r"\toprule",
            " & ".join(["", *spans]) + r" \\",
            " ".join(rules),
            " & ".join(["Model", *(latex_cell(m) for _, m in table.columns)]) + r" \\",
            r"\midrule",
            *rows,
            r"\bottomrule",
            r"\end{tabular}",
            r"\end{table}",
        ]
    )


def _latex_cell(cell: TableCell | None) -> str:
    if cell is None:
        return ""
    number = f"{cell.mean:.4f}" + (rf" \pm {cell.sd:.4f}" if math.isfinite(cell.sd) else "")
    number = rf"\mathbf{{{number}}}" if cell.best else number
    return f"${number}" + (f"^{{{cell.marker}}}" if cell.marker else "") + "$"


def study_html_table(levels: pd.DataFrame, alpha: float) -> str:
    """The paper's table as an HTML ``<table>`` (names escaped, the best of each column in bold)."""
    table = study_table(levels, alpha)
    datasets = list(dict.fromkeys(d for d, _ in table.columns))
    top = "".join(
        f'<th colspan="{sum(1 for dd, _ in table.columns if dd == d)}">{html.escape(d)}</th>' for d in datasets
    )
    second = "".join(f"<th>{html.escape(m)}</th>" for _, m in table.columns)
    rows = []
    for model, cells in table.iterrows():
        shown = "".join(_html_cell(c) for c in cells)
        rows.append(f'<tr><td class="name">{html.escape(model)}</td>{shown}</tr>')
    return (
        f'<table class="study"><tr><th rowspan="2">model</th>{top}</tr><tr>{second}</tr>' + "".join(rows) + "</table>"
    )


def _html_cell(cell: TableCell | None) -> str:
    if cell is None:
        return "<td></td>"
    text = html.escape(cell.text())
    return f"<td><b>{text}</b></td>" if cell.best else f"<td>{text}</td>"


def study_csv(levels: pd.DataFrame) -> str:
    """The table's numbers as CSV, one row per dataset, model and metric (:data:`LEVEL_COLUMNS` and ``best``), text
    cells safe from a spreadsheet's formulas."""
    return csv_safe_frame(levels[list(LEVEL_COLUMNS)].assign(best=_best(levels))).to_csv(index=False)


def _best(levels: pd.DataFrame) -> pd.Series:
    """Whether each row's mean is the highest of its dataset and metric (ties all best)."""
    return levels["mean"] == levels.groupby(["dataset", "metric"], sort=False)["mean"].transform("max")


def verdict_lines(verdict: StudyVerdict) -> list[str]:
    """The verdict across datasets in plain sentences: each pooled effect, then each metric's ranks."""
    left_out = (
        [f"Left out of the ranks, as not scored on every dataset: {', '.join(verdict.unranked)}."]
        if verdict.unranked
        else []
    )
    return (
        [_effect_line(c, m, meta, verdict.reference) for c, m, meta in verdict.effects]
        + [f"{note}." for note in verdict.notes]
        + [_ranks_line(metric, ranks) for metric, ranks in verdict.ranks]
        + left_out
    )


def _effect_line(candidate: str, metric: str, meta: MetaAnalysis, reference: str | None) -> str:
    k = len(meta.datasets)
    unit = "log ratio of means" if meta.scale == "log-ratio" else "difference"
    level = format_level(meta.confidence_level)
    prediction = (
        f"; a new dataset's effect is predicted in [{meta.prediction_low:+.4f}, {meta.prediction_high:+.4f}]"
        if math.isfinite(meta.prediction_low)
        else ""
    )
    return (
        f"{candidate} vs {reference} on {metric} over {k} datasets: pooled {unit} {meta.effect:+.4f}, {level} "
        f"interval [{meta.ci_low:+.4f}, {meta.ci_high:+.4f}] (random effects, DerSimonian-Laird tau² with the "
        f"Hartung-Knapp-Sidik-Jonkman t interval, {k - 1} df), p = {format_p(meta.p_value)}; between-dataset tau² = "
        f"{meta.tau2:.3g}, I² = {meta.i2:.0%}{prediction}."
    )


def _ranks_line(metric: str, ranks: RankAnalysis) -> str:
    k, n = len(ranks.models), len(ranks.datasets)
    test = "Nemenyi" if ranks.posthoc == "nemenyi" else "Wilcoxon signed-rank with Holm"
    order = ", ".join(f"{m} {r:.2f}" for m, r in zip(ranks.models, ranks.average_ranks, strict=True))
    floor = f"With {n} datasets no {test} p-value of {k} models can go below {ranks.p_value_floor:.4g}, "
    if ranks.conclusive:
        floor += f"which alpha {ranks.alpha:g} allows."
    else:
        floor += f"so no pair can be shown to differ at alpha {ranks.alpha:g}; "
        floor += f"{ranks.datasets_needed} datasets would be needed."
    omnibus = ""
    if k >= 3:
        rejects = "" if ranks.friedman_rejects else " (not significant: no pair is called different)"
        omnibus = f"Friedman chi² = {ranks.friedman_statistic:.3g}, p = {format_p(ranks.friedman_p_value)}{rejects}; "
    differ = [f"{a} and {b}" for (a, b), s in zip(ranks.pairs, ranks.significant, strict=True) if s]
    pairs = f"differ significantly: {'; '.join(differ)}." if differ else "no pair differs significantly."
    return f"{metric}, average ranks over {n} datasets ({order}). {floor} {omnibus}{test}: {pairs}"
