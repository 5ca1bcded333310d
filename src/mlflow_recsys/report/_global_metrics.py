"""The global metrics of a report (catalogue coverage, Gini index of exposure) in words and tables, formatted once
for the text, markdown and HTML renderings."""

from __future__ import annotations

from dataclasses import dataclass

from mlflow_recsys.report._escaping import escape_markdown, visible_text
from mlflow_recsys.report._rows import aligned, format_level, format_p, interval_ends
from mlflow_recsys.stats._exposure import ExposureAnalysis

__all__ = ["GLOBAL_NOTE", "GlobalCells", "global_cells", "global_header", "global_markdown", "global_string"]

#: The sentence that heads every rendering of the global metrics.
GLOBAL_NOTE = (
    "Global metrics, each of all users' lists together: the interval from a paired bootstrap over users, recentred on "
    "the estimate (a resample repeats users, so it covers fewer items: the bias column shows by how much); p from "
    "swapping each user's two lists at random, Holm-adjusted within these rows, a family of their own."
)


@dataclass(frozen=True)
class GlobalCells:
    """One row of the global metrics as every rendering shows it (names unescaped)."""

    metric: str
    baseline: str
    candidate: str
    users: str
    baseline_value: str
    candidate_value: str
    difference: str
    interval: str
    p: str
    holm_p: str
    bias: str


def global_cells(analysis: ExposureAnalysis) -> list[GlobalCells]:
    """Every row of ``analysis`` formatted: values to 4 decimals, the interval signed (an infinite end open, as in the
    main table), p as the report prints it."""
    return [
        GlobalCells(
            r.metric,
            r.baseline,
            r.candidate,
            str(r.n_units),
            f"{r.baseline_value:.4f}",
            f"{r.candidate_value:.4f}",
            f"{r.difference:+.4f}",
            ", ".join(interval_ends(r.ci_low, r.ci_high, lambda value: f"{value:+.4f}")),
            format_p(r.p_value),
            format_p(r.adjusted_p_value),
            f"{r.bootstrap_bias:+.4f}",
        )
        for r in analysis.comparisons
    ]


def global_header(analysis: ExposureAnalysis) -> list[str]:
    """The column names, the interval's with its level."""
    level = format_level(analysis.comparisons[0].confidence_level) if analysis.comparisons else ""
    return ["metric", "candidate vs baseline", "users", "baseline", "candidate", "difference", f"{level} interval",
            "p", "Holm p", "bootstrap bias"]  # fmt: skip


def _rows(analysis: ExposureAnalysis) -> list[list[str]]:
    return [
        [
            c.metric,
            f"{c.candidate} vs {c.baseline}",
            c.users,
            c.baseline_value,
            c.candidate_value,
            c.difference,
            c.interval,
            c.p,
            c.holm_p,
            c.bias,
        ]
        for c in global_cells(analysis)
    ]


def global_string(analysis: ExposureAnalysis) -> str:
    """The global metrics as fixed-width text under :data:`GLOBAL_NOTE`."""
    body = [[visible_text(cell) for cell in row] for row in _rows(analysis)]
    return "\n".join([GLOBAL_NOTE, *aligned([global_header(analysis), *body], right={2, 3, 4, 5, 7, 8, 9})])


def global_markdown(analysis: ExposureAnalysis) -> str:
    """The global metrics as a markdown section, names escaped."""
    header = global_header(analysis)
    # The first two cells hold names; the others are numbers the table prints as they are.
    rows = [[escape_markdown(cell) for cell in row[:2]] + row[2:] for row in _rows(analysis)]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(["## Global metrics", "", f"*{GLOBAL_NOTE}*", "", *table])
