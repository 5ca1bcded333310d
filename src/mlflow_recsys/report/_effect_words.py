"""The words of a result on the size of its effect and the precision of its numbers: the relative change and d_z with
their intervals, the sign test beside every test, whether the intervals are adjusted for the family, and the digits a
resampled p-value is printed to (:mod:`~mlflow_recsys.stats._effects` computes them)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mlflow_recsys.metrics import has_better_side
from mlflow_recsys.report._rows import format_level, format_p, interval_level
from mlflow_recsys.report._vocabulary import words

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport, PairwiseComparison


def effect_interval(low: float, high: float, spec: str, c: PairwiseComparison) -> str:
    """`` [+1.2%, +4.9%]``: an effect size's interval of row ``c`` (two-sided, at ``c.confidence_level``), its level
    named when the sentence's difference interval has another (against a margin, the 1 - 2 alpha one): ``[-4.7%,
    +2.4%] (95%)``, and its sides when that interval is one-sided: ``[+1.2%, +4.9%] (two-sided 95%)``; ``""`` when
    NaN."""
    if math.isnan(low) or math.isnan(high):
        return ""
    level = format_level(c.confidence_level)
    if c.hypothesis == "superiority" and c.alternative != "two-sided":
        named = f" (two-sided {level})"
    else:
        named = f" ({level})" if interval_level(c) != c.confidence_level else ""
    return f" [{low:{spec}}, {high:{spec}}]{named}"


def dz_words(c: PairwiseComparison) -> str:
    """``, d_z = 0.14 [0.05, 0.23]``: the standardized effect and its interval; ``""`` when the differences do not
    vary."""
    if math.isnan(c.effect_size_dz):
        return ""
    return f", d_z = {c.effect_size_dz:.2f}{effect_interval(c.dz_ci_low, c.dz_ci_high, '.2f', c)}"


def sign_test_words(c: PairwiseComparison) -> str:
    """``; won on 292 users, lost on 208 (sign test p = 0.0002)`` (``higher for 292 users, lower for 208`` on a metric
    with no better side), beside any test but the sign test itself."""
    if c.test_method == "sign" or math.isnan(c.sign_test_p_value):
        return ""
    users = "user" if c.wins == 1 else "users"
    counts = (
        f"won on {c.wins:,} {users}, lost on {c.losses:,}"
        if has_better_side(c.metric)
        else f"higher for {c.wins:,} {users}, lower for {c.losses:,}"
    )
    return f"; {counts} (sign test p = {format_p(c.sign_test_p_value)})"


def effects_methods(report: ComparisonReport) -> str:
    """The Methods sentences on the effect sizes, the sign test and the printed digits of resampled p-values."""
    level = format_level(report.comparisons[0].confidence_level)
    digits = (
        "A p-value estimated from resamples is printed to the decimal place of twice its Monte Carlo standard error, "
        "sqrt(p (1 - p) / B) (Davison & Hinkley, 1997). "
        if any(c.p_value_mcse > 0 for c in report.comparisons)
        else ""
    )
    return (
        "The relative change is the difference over the baseline's mean, with the percentile interval of the ratio "
        "of the two models' bootstrap means; d_z is the mean per-user difference over the standard deviation of the "
        "per-user differences, the standardized effect of a paired design (Cohen, 1988; Lakens, 2013), with the "
        f"percentile interval of its bootstrap replicates; both intervals are two-sided at {level}. Beside every "
        "test, the users on which each model scored higher are compared by a sign test (Dixon & Mood, 1946). "
        f"{digits}"
    )


def interval_adjustment_words(report: ComparisonReport) -> str:
    """Whether the intervals are adjusted for the family as the p-values are, and what follows for reading them."""
    first = report.comparisons[0]
    if first.interval_method == "max-T":
        return (
            f"The intervals of a family hold together: all of them cover their true differences with "
            f"{format_level(first.confidence_level)} probability. They come from the bootstrap and the adjusted "
            "p-values from sign flips, so at the edge of significance an interval and its p-value can disagree."
        )
    if report.correction is None or first.hypothesis != "superiority":
        return "Intervals are not adjusted: each describes one comparison on its own."
    return (
        "Intervals are not adjusted: each describes one comparison on its own, so an interval can exclude 0 while "
        f"its {words('correction', report.correction, 'p')}-value is above {first.alpha:.2g}."
    )
