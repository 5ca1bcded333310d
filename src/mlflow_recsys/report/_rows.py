"""The formatted cells of one hypothesis row, made once; every table of a report (text, summary, markdown, HTML, LaTeX,
the run notes, the CLI, the wide table) lays these out, escaping names its own way, and formats no number itself."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlflow_recsys.report._escaping import visible_text

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import PairwiseComparison

#: What a number cell shows for NaN (a ``mde`` that cannot be estimated, a relative change of a zero baseline).
NO_MDE = "n/a"


@dataclass(frozen=True)
class RowCells:
    """One hypothesis as text cells: numbers with ``digits`` decimals (``n/a`` for NaN), an interval's open ends written
    ``(-inf`` and ``inf)``; names as the comparison holds them, for each renderer to escape."""

    metric: str
    candidate: str
    baseline: str
    seeds: tuple[int, int]  # the candidate's and the baseline's
    difference: str
    interval: str  # ``[-0.0223, +0.0110]``
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

    def pair(self, name: Callable[[str], str] = visible_text) -> str:
        """``ELSA (3 seeds) vs EASE``: names written by ``name``, a side's seeds when it averages several."""
        sides = zip((self.candidate, self.baseline), self.seeds, strict=True)
        return " vs ".join(name(n) + (f" ({k} seeds)" if k > 1 else "") for n, k in sides)


def format_level(level: float) -> str:
    """``95%`` for 0.95, ``99.9%`` for 0.999: a confidence level in percent without trailing zeros."""
    return f"{100 * level:.6g}%"


def format_p(p: float) -> str:
    """``0.0123`` (and ``0.0000`` for 0), or ``1.23e-05`` below 0.0001."""
    return f"{p:.4f}" if p >= 1e-4 or p == 0 else f"{p:.2e}"


def row_cells(c: PairwiseComparison, digits: int = 4, *, signed: bool = True) -> RowCells:
    """The cells of ``c``'s row: ``digits`` decimals of the differences, means and interval, the difference and the
    interval's ends with a ``+`` when ``signed`` (default True)."""
    sign = "+" if signed else ""

    def number(value: float, sign: str = "") -> str:
        return NO_MDE if math.isnan(value) else f"{value:{sign}.{digits}f}"

    low = "(-inf" if c.ci_low == -math.inf else f"[{number(c.ci_low, sign)}"
    high = "inf)" if c.ci_high == math.inf else f"{number(c.ci_high, sign)}]"
    return RowCells(
        metric=c.metric,
        candidate=c.candidate,
        baseline=c.baseline,
        seeds=(c.candidate_seeds, c.baseline_seeds),
        difference=number(c.difference, sign),
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
        relative=NO_MDE if math.isnan(c.relative_difference) else f"{c.relative_difference:.2%}",
        tie_rate=f"{c.tie_rate:.1%}",
    )
