"""The formatted cells of one hypothesis row, made once; every table of a report (text, summary, markdown,
HTML, the run notes, the CLI, the wide table) lays these out and formats nothing itself."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlflow_recsys.report.escaping import visible_text

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats.comparison import PairwiseComparison

#: What the ``mde`` cell of a table shows when no minimum detectable effect can be estimated.
NO_MDE = "n/a"


@dataclass(frozen=True)
class RowCells:
    """One hypothesis as text cells: numbers with ``digits`` decimals (``n/a`` for NaN), ``-inf``/``inf`` open
    ends written ``(-inf`` and ``inf)``; names as the comparison holds them."""

    metric: str
    candidate: str
    baseline: str
    pair: str  # ``ELSA (3 seeds) vs EASE``, names written visibly
    difference: str  # signed
    interval: str  # ``[-0.0223, +0.0110]``, signed
    ci_low: str
    ci_high: str
    p_value: str
    adjusted_p: str
    direction: str
    wtl: str  # ``81/1/106``
    mde: str
    baseline_mean: str
    candidate_mean: str
    relative: str
    tie_rate: str


def format_p(p: float) -> str:
    """``0.0123``, or ``1.23e-05`` below 0.0001."""
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.2e}"


def row_cells(c: PairwiseComparison, digits: int = 4) -> RowCells:
    """The cells of ``c``'s row (``digits``: decimals of the differences, means and interval)."""

    def number(value: float, sign: str = "") -> str:
        return NO_MDE if math.isnan(value) else f"{value:{sign}.{digits}f}"

    low = "(-inf" if c.ci_low == -math.inf else f"[{number(c.ci_low, '+')}"
    high = "inf)" if c.ci_high == math.inf else f"{number(c.ci_high, '+')}]"
    candidate, baseline = (
        visible_text(name) + (f" ({seeds} seeds)" if seeds > 1 else "")
        for name, seeds in ((c.candidate, c.candidate_seeds), (c.baseline, c.baseline_seeds))
    )
    return RowCells(
        metric=c.metric,
        candidate=c.candidate,
        baseline=c.baseline,
        pair=f"{candidate} vs {baseline}",
        difference=number(c.difference, "+"),
        interval=f"{low}, {high}",
        ci_low=number(c.ci_low),
        ci_high=number(c.ci_high),
        p_value=format_p(c.p_value),
        adjusted_p=format_p(c.adjusted_p_value),
        direction=c.direction,
        wtl=f"{c.wins}/{c.ties}/{c.losses}",
        mde=number(c.mde),
        baseline_mean=number(c.baseline_mean),
        candidate_mean=number(c.candidate_mean),
        relative=f"{c.relative_difference:.2%}" if not math.isnan(c.relative_difference) else "n/a",
        tie_rate=f"{c.tie_rate:.1%}",
    )
