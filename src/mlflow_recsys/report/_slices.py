"""The exploratory slices of a report, made once for every surface: the caveat, the header and the formatted cells of
each stratum row; the text and markdown tables here, the HTML and LaTeX ones in their modules. Every rendering says
*exploratory*, and none is read as part of the primary family."""

from __future__ import annotations

from dataclasses import dataclass

from mlflow_recsys.report._escaping import escape_markdown, visible_text
from mlflow_recsys.report._rows import NO_MDE, aligned, format_level, format_p
from mlflow_recsys.stats._slices import SliceAnalysis

__all__ = ["CAVEAT", "HEADER", "SliceCells", "slice_cells", "slice_header", "slices_markdown", "slices_string"]

#: The one sentence that heads every rendering of the slices. It cites the heterogeneity statistics by author and year,
#: as the references of a report with slices do, and holds no apostrophe (LaTeX would print it as a straight quote).
CAVEAT = (
    "Exploratory slices: each stratum compared on its own users; p-values Holm-adjusted within each slice, a family "
    "apart from the hypotheses above; heterogeneity across the strata by the Q test of Cochran (1954) and I-squared "
    "(Higgins & Thompson, 2002). Not evidence on their own."
)

#: Headers of a slice table, in order; ``interval`` is headed with its level (:func:`slice_header`).
HEADER = ("slice", "stratum", "metric", "candidate vs baseline", "users", "difference", "interval", "Holm p", "W/T/L",
          "heterogeneity")  # fmt: skip


@dataclass(frozen=True)
class SliceCells:
    """One stratum row as text cells: numbers with four decimals, p-values as the report writes them, the slice's
    Cochran's Q for the row's pair and metric (``n/a`` when a stratum's differences have no spread); names as the
    analysis holds them, for each renderer to escape."""

    slice: str
    stratum: str
    metric: str
    candidate: str
    baseline: str
    users: str
    difference: str  # ``+0.0123``
    interval: str  # ``[-0.0223, +0.0110]``
    holm_p: str
    wtl: str  # ``81/1/106``
    q: str  # ``3.21``
    q_p: str
    i_squared: str  # ``38%``

    @property
    def heterogeneity(self) -> str:
        """``Q = 3.21, p = 0.2010, I² = 38%``, or ``n/a``."""
        if self.q == NO_MDE:
            return NO_MDE
        return f"Q = {self.q}, p = {self.q_p}, I² = {self.i_squared}"

    def cells(self) -> list[str]:
        """The cells in :data:`HEADER` order, names raw."""
        pair = f"{self.candidate} vs {self.baseline}"
        return [self.slice, self.stratum, self.metric, pair, self.users, self.difference, self.interval, self.holm_p,
                self.wtl, self.heterogeneity]  # fmt: skip


def slice_cells(analysis: SliceAnalysis) -> list[SliceCells]:
    """Every stratum row of ``analysis`` as :class:`SliceCells`, in the analysis' order."""
    het = {(h.slice, h.metric, h.baseline, h.candidate): h for h in analysis.heterogeneity}
    rows = []
    for r in analysis.strata:
        h = het[(r.slice, r.metric, r.baseline, r.candidate)]
        undefined = h.q != h.q  # NaN: some stratum's weight is infinite
        rows.append(
            SliceCells(
                slice=r.slice,
                stratum=r.stratum,
                metric=r.metric,
                candidate=r.candidate,
                baseline=r.baseline,
                users=str(r.n_units),
                difference=f"{r.difference:+.4f}",
                interval=f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]",
                holm_p=format_p(r.adjusted_p_value),
                wtl=f"{r.wins}/{r.ties}/{r.losses}",
                q=NO_MDE if undefined else f"{h.q:.2f}",
                q_p=NO_MDE if undefined else format_p(h.p_value),
                i_squared=NO_MDE if undefined else f"{h.i_squared:.0%}",
            )
        )
    return rows


def slice_header(analysis: SliceAnalysis) -> list[str]:
    """:data:`HEADER` with the interval's level: ``95% interval``."""
    level = format_level(analysis.strata[0].confidence_level) if analysis.strata else ""
    return [h if h != "interval" else f"{level} interval" for h in HEADER]


def slices_string(analysis: SliceAnalysis) -> str:
    """The slices as fixed-width text under :data:`CAVEAT` and each slice's definition: one row per (slice, stratum,
    metric, pair) with users, difference, interval (its level in the header), Holm-adjusted p, W/T/L and the slice's
    Cochran's Q with I² for that pair and metric."""
    lines = [CAVEAT] + [f"{visible_text(name)}: {visible_text(text)}" for name, text in analysis.definitions.items()]
    body = [[visible_text(cell) for cell in row.cells()] for row in slice_cells(analysis)]
    return "\n".join(lines + aligned([slice_header(analysis), *body], right={4, 5, 7}))


def slices_markdown(analysis: SliceAnalysis) -> str:
    """The slices as a markdown section: the caveat, the definitions and one table, names escaped."""
    header = slice_header(analysis)
    definitions = [
        f"- **{escape_markdown(name)}**: {escape_markdown(text)}" for name, text in analysis.definitions.items()
    ]
    rows = [[escape_markdown(cell) for cell in row.cells()] for row in slice_cells(analysis)]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(["## Exploratory slices", "", f"*{CAVEAT}*", "", *definitions, "", *table])
