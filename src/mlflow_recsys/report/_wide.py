"""ranx's wide table of a report: one row per model, one column per metric, each cell the model's mean with a marker
where its difference from the baseline is significant (as ``ranx.compare`` prints it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from mlflow_recsys.report._escaping import escape_markdown, latex_cell
from mlflow_recsys.report._latex import significance_marker
from mlflow_recsys.report._rows import row_cells

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport


def wide_table(report: ComparisonReport, *, digits: int = 4) -> pd.DataFrame:
    """Models x metrics: each cell the model's mean over users, rounded to ``digits`` decimals (default 4), and the
    :func:`~mlflow_recsys.report.significance_marker` of its adjusted p-value against the baseline
    (``"0.4525***"``); a baseline's own cell has no marker, and ``""`` where a model and metric were not compared.

    Rows are the models in the order the report first names them (baselines before their candidates), columns the
    metrics in the report's order; the index is named ``model``. With several baselines (all pairs) a candidate's cell
    carries the strongest marker against any baseline: read the report for which.

    Raises
    ------
    ValueError
        If the report holds no hypothesis.
    """
    if not report.comparisons:
        raise ValueError("report: expected at least one hypothesis, found none")
    means: dict[str, dict[str, str]] = {}
    marks: dict[tuple[str, str], str] = {}
    for c in report.comparisons:
        r = row_cells(c, digits)
        means.setdefault(c.baseline, {})[c.metric] = r.baseline_mean
        means.setdefault(c.candidate, {})[c.metric] = r.candidate_mean
        marker = significance_marker(c.adjusted_p_value, c.alpha)
        if len(marker) > len(marks.get((c.candidate, c.metric), "")):
            marks[c.candidate, c.metric] = marker
    metrics = list(dict.fromkeys(c.metric for c in report.comparisons))
    rows = {
        model: [values[m] + marks.get((model, m), "") if m in values else "" for m in metrics]
        for model, values in means.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=metrics).rename_axis("model")


def wide_markdown(report: ComparisonReport) -> str:
    """:func:`wide_table` as a markdown table, names escaped, under a line saying what the markers mean; raises as
    :func:`wide_table`."""
    frame = wide_table(report)
    lines = [
        "| " + " | ".join(["model", *map(escape_markdown, frame.columns)]) + " |",
        "|---" * (1 + frame.shape[1]) + "|",
    ]
    lines += [
        "| " + " | ".join([escape_markdown(model), *(v.replace("*", "\\*") for v in values)]) + " |"
        for model, values in frame.iterrows()
    ]
    alpha = report.comparisons[0].alpha
    legend = (
        f"Mean over users; * adjusted p <= {alpha:g}, ** <= {alpha / 5:g}, *** <= {alpha / 50:g} against the baseline."
    )
    return legend + "\n\n" + "\n".join(lines)


def wide_latex(report: ComparisonReport) -> str:
    """:func:`wide_table` as a booktabs ``tabular`` (names escaped, markers as superscripts, the preamble needing
    ``\\usepackage{booktabs}``); raises as :func:`wide_table`."""
    frame = wide_table(report)
    header = " & ".join(["Model", *(latex_cell(m) for m in frame.columns)]) + r" \\"
    rows = []
    for model, values in frame.iterrows():
        cells = []
        for v in values:
            number, stars = v.rstrip("*"), v[len(v.rstrip("*")) :]
            cells.append(f"${number}" + (f"^{{{stars}}}" if stars else "") + "$" if number else "")
        rows.append(" & ".join([latex_cell(model), *cells]) + r" \\")
    spec = "l" + "r" * len(frame.columns)
    return "\n".join(
        [f"\\begin{{tabular}}{{{spec}}}", r"\toprule", header, r"\midrule", *rows, r"\bottomrule", r"\end{tabular}"]
    )
