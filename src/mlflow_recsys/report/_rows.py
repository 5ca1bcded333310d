"""The formatted cells of one hypothesis row, made once; every table of a report (text, summary, markdown, HTML, LaTeX,
the run notes, the CLI, the wide table) lays these out, escaping names its own way, and formats no number itself."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlflow_recsys.report._escaping import visible_text
from mlflow_recsys.report._vocabulary import words

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


def interval_level(c: PairwiseComparison) -> float:
    """The level of ``c``'s interval: its ``confidence_level``, or against a margin the two-sided ``1 - 2 alpha`` one
    whose ends the one-sided tests read."""
    return c.confidence_level if c.hypothesis == "superiority" else 1 - 2 * c.alpha


def format_p(p: float, mcse: float = 0.0, alpha: float | None = None) -> str:
    """``0.0123`` (and ``0.0000`` for 0), or ``1.23e-05`` below 0.0001. A p-value estimated from resamples (``mcse``,
    its Monte Carlo standard error, above 0) is rounded at the first decimal place no coarser than twice that error,
    keeping 2 to 4 decimals: 0.4980 with an error of 0.005 (B = 9,999) prints ``0.50``, since its third decimal is
    noise. With ``alpha``, decimals are added (up to 4) while the rounded value would sit on the other side of alpha
    than the p-value itself, so that 0.054 is not printed as a significant-looking 0.05."""
    if p < 1e-4 and p != 0:
        return f"{p:.2e}"
    decimals = 4 if mcse <= 0 else min(4, max(2, math.ceil(-math.log10(2 * mcse))))
    while alpha is not None and decimals < 4 and (float(f"{p:.{decimals}f}") <= alpha) != (p <= alpha):
        decimals += 1
    return f"{p:.{decimals}f}"


#: The decision of a row tested against a margin, by its ``direction``: the form of :data:`WORDS` it is read in.
_DECISION_FORMS = {"non-inferior": "yes", "equivalent": "yes", "inferior": "no", "not equivalent": "no"}


def format_margin(value: float) -> str:
    """A margin in metric units as the reports write it: four significant digits (``0.005``, ``0.01234``)."""
    return f"{value:.4g}"


def decision_words(c: PairwiseComparison) -> str:
    """The row's decision as the reports write it: its ``direction`` for superiority (``better``, ``worse``,
    ``inconclusive``); against a margin, words that carry it (``non-inferior within 0.005``, ``not shown
    non-inferior``, ``equivalent within \u00b10.005``), saying so when the interval and the test part ways."""
    if c.hypothesis == "superiority":
        return c.direction
    form = _DECISION_FORMS.get(c.direction, "open")
    inside = c.ci_low > -c.margin and (c.hypothesis == "non-inferiority" or c.ci_high < c.margin)
    if form == "open" and inside:  # the test (randomization, t, ...) and the bootstrap interval part ways
        form = "split"
    elif form == "yes" and not inside:
        form = "by test"
    return words("hypothesis", c.hypothesis, form, margin=format_margin(c.margin))


def interval_disagrees(c: PairwiseComparison) -> bool:
    """Whether ``c``'s interval and its adjusted p-value part ways (superiority only): not significant although the
    interval excludes 0, or significant although it holds 0. With Holm or Bonferroni the interval is not adjusted for
    the family; with max-T it is, but from the bootstrap where the p-value is from sign flips."""
    excludes_zero = c.ci_low > 0 or c.ci_high < 0
    return c.hypothesis == "superiority" and c.significant != excludes_zero


def disagreement_words(c: PairwiseComparison, correction: str | None) -> str:
    """Why a row of :func:`interval_disagrees` reads as it does, in the words every surface uses."""
    if c.significant:
        return words("disagreement", "reaches zero")
    return words("correction", correction, "split")


def interval_ends(low: float, high: float, number: Callable[[float], str]) -> tuple[str, str]:
    """An interval's two ends as its cells print them: ``[0.0123`` and ``0.0456]``, each written by ``number``, an
    infinite end open: ``(-inf`` or ``inf)`` (a one-sided interval)."""
    return (
        "(-inf" if low == -math.inf else f"[{number(low)}",
        "inf)" if high == math.inf else f"{number(high)}]",
    )


def row_cells(c: PairwiseComparison, digits: int = 4, *, signed: bool = True) -> RowCells:
    """The cells of ``c``'s row: ``digits`` decimals of the differences, means and interval, the difference and the
    interval's ends with a ``+`` when ``signed`` (default True)."""
    sign = "+" if signed else ""

    def number(value: float, sign: str = "") -> str:
        return NO_MDE if math.isnan(value) else f"{value:{sign}.{digits}f}"

    low, high = interval_ends(c.ci_low, c.ci_high, lambda value: number(value, sign))
    return RowCells(
        metric=c.metric,
        candidate=c.candidate,
        baseline=c.baseline,
        seeds=(c.candidate_seeds, c.baseline_seeds),
        difference=number(c.difference, sign),
        interval=f"{low}, {high}",
        ci_low=number(c.ci_low),
        ci_high=number(c.ci_high),
        p_value=format_p(c.p_value, c.p_value_mcse, c.alpha),
        adjusted_p=format_p(c.adjusted_p_value, c.adjusted_p_value_mcse, c.alpha),
        direction=decision_words(c),
        wtl=f"{c.wins}/{c.ties}/{c.losses}",
        mde=number(c.mde),
        baseline_mean=number(c.baseline_mean),
        candidate_mean=number(c.candidate_mean),
        relative=NO_MDE if math.isnan(c.relative_difference) else f"{c.relative_difference:.2%}",
        tie_rate=f"{c.tie_rate:.1%}",
    )


def aligned(rows: list[list[str]], *, right: set[int]) -> list[str]:
    """Rows of cells padded to their column's width, two spaces apart, trailing spaces removed."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
