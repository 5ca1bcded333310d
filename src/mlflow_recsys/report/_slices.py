"""The exploratory slices of a report in words and tables: every line says *exploratory*, and none is read as part of
the primary family."""

from __future__ import annotations

from mlflow_recsys.report._escaping import escape_markdown, visible_text
from mlflow_recsys.report._rows import aligned, format_level, format_p
from mlflow_recsys.stats._slices import SliceAnalysis

#: The one sentence that heads every rendering of the slices.
CAVEAT = (
    "Exploratory slices: each stratum compared on its own users; p-values Holm-adjusted within each slice, a family "
    "apart from the hypotheses above; heterogeneity by Cochran's Q. Not evidence on their own."
)


def _cells(analysis: SliceAnalysis) -> list[list[str]]:
    het = {(h.slice, h.metric, h.baseline, h.candidate): h for h in analysis.heterogeneity}
    rows = []
    for r in analysis.strata:
        h = het[(r.slice, r.metric, r.baseline, r.candidate)]
        q = "n/a" if h.q != h.q else f"Q = {h.q:.2f}, p = {format_p(h.p_value)}"
        rows.append(
            [
                r.slice,
                r.stratum,
                r.metric,
                f"{r.candidate} vs {r.baseline}",
                str(r.n_units),
                f"{r.difference:+.4f}",
                f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]",
                format_p(r.adjusted_p_value),
                f"{r.wins}/{r.ties}/{r.losses}",
                q,
            ]
        )
    return rows


HEADER = ["slice", "stratum", "metric", "candidate vs baseline", "users", "difference", "interval", "Holm p", "W/T/L",
          "heterogeneity"]  # fmt: skip


def slices_string(analysis: SliceAnalysis) -> str:
    """The slices as fixed-width text under :data:`CAVEAT` and each slice's definition: one row per (slice, stratum,
    metric, pair) with users, difference, interval (its level in the header), Holm-adjusted p, W/T/L and the slice's
    Cochran's Q for that pair and metric."""
    level = format_level(analysis.strata[0].confidence_level) if analysis.strata else ""
    lines = [CAVEAT] + [f"{visible_text(name)}: {text}" for name, text in analysis.definitions.items()]
    header = [h if h != "interval" else f"{level} interval" for h in HEADER]
    body = [[visible_text(cell) for cell in row] for row in _cells(analysis)]
    return "\n".join(lines + aligned([header, *body], right={4, 5, 7}))


def slices_markdown(analysis: SliceAnalysis) -> str:
    """The slices as a markdown section: the caveat, the definitions and one table, names escaped."""
    level = format_level(analysis.strata[0].confidence_level) if analysis.strata else ""
    header = [h if h != "interval" else f"{level} interval" for h in HEADER]
    definitions = [
        f"- **{escape_markdown(name)}**: {escape_markdown(text)}" for name, text in analysis.definitions.items()
    ]
    rows = [[escape_markdown(cell) for cell in row] for row in _cells(analysis)]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(["## Exploratory slices", "", f"*{CAVEAT}*", "", *definitions, "", *table])
