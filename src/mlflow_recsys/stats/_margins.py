"""Tests against a margin: non-inferiority and equivalence of a candidate to a baseline, for every test method.

With the margin ``delta > 0`` (metric units) and the mean per-user difference ``Delta`` (candidate minus baseline):

* **non-inferiority** tests H0: ``Delta <= -delta`` against H1: ``Delta > -delta``, one-sided at alpha (Blackwelder
  1982, "Proving the null hypothesis in clinical trials", Controlled Clinical Trials 3);
* **equivalence** is two one-sided tests (TOST; Schuirmann 1987, J. Pharmacokinetics and Biopharmaceutics 15): H0
  ``Delta <= -delta`` and H0 ``Delta >= delta``, each at alpha, its p-value the larger of the two. It rejects exactly
  when the two-sided ``1 - 2 alpha`` interval lies inside ``(-delta, delta)``.

Each one-sided test moves the null boundary to 0 and tests as :func:`~mlflow_recsys.stats.compare_models` does: the
randomization, Wilcoxon and sign tests and the t-test work on the shifted unit differences ``d + delta`` (``d - delta``
for the upper side), so the randomization test's null is symmetry of ``d`` about ``-delta``. The bootstrap test reads
the percentile interval: ``p = (1 + #{replicates <= -delta}) / (B + 1)``, at most alpha just when the interval's
one-sided ``1 - alpha`` bound clears the margin (Efron & Tibshirani 1993, sec. 15.4, the interval-test duality).

A **relative** margin ``r`` (a fraction of the baseline's mean ``m_b``) asks whether the ratio of means ``R = m_c /
m_b`` exceeds ``1 - r`` (and, for equivalence, stays below ``1 + r``). The bootstrap reads the percentile interval of
the ratio's replicates (each replicate resamples users once, both sides together); the t-test uses the delta method,
``se(R) = sd(c - R b) / (sqrt(n) m_b)`` on ``n - 1`` degrees of freedom; the randomization, Wilcoxon and sign tests
work on the per-user values ``c - (1 - r) b``, whose mean exceeds 0 exactly when ``R > 1 - r`` (Fieller 1954,
"Some problems in interval estimation", JRSS B 16). The interval reported is the ratio's, written in metric units as
``(R - 1) m_b``, so it is read against ``-r m_b`` like an absolute margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.stats

from mlflow_recsys._validation import expected
from mlflow_recsys.metrics import has_better_side
from mlflow_recsys.stats import _inference as inference
from mlflow_recsys.stats._power import REPORT_POWER, minimum_detectable_effect
from mlflow_recsys.stats._resampling import (
    bootstrap_means,
    centred_means,
    exact_sign_flip_means,
    quantiles,
    sign_flip_means,
)
from mlflow_recsys.stats._warnings import WideMarginWarning, warn

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._results import PairwiseComparison
    from mlflow_recsys.stats._settings import ComparisonSettings

__all__ = ["decision", "detectable_effect", "margin_test"]


def margin_test(col, alpha: float, settings: ComparisonSettings) -> tuple[np.ndarray | None, float, str, dict]:
    """One metric's test against the margin -> (null replicates of the lower side's test or None, p-value, the test
    as reported, the row's estimate fields: the :func:`~mlflow_recsys.stats._inference` estimate with the ``1 - 2
    alpha`` interval, plus ``alternative``, ``hypothesis``, ``margin``, ``relative_margin`` and ``margin_scale``).

    Raises ValueError for a relative margin when the baseline's mean is not positive (there is no fraction of it).
    """
    relative = settings.relative_margin
    margin = float(settings.margin)  # type: ignore[arg-type]  # the settings require one with this hypothesis
    if relative and not col.baseline_mean > 0:
        raise ValueError(
            expected(
                "relative_margin",
                f"a positive mean of {col.metric!r} for the reference {col.baseline!r} "
                "to take a fraction of (use an absolute margin)",
                f"mean {col.baseline_mean!r}",
            )
        )
    delta = margin * col.baseline_mean if relative else margin
    if not relative and col.baseline_mean > 0 and delta >= col.baseline_mean:
        warn(
            f"{col.label}: the margin {delta:g} is at least the reference's mean {col.baseline_mean:.4g}, so a "
            "candidate scoring 0 on every user would be non-inferior; was a fraction meant (relative_margin)?",
            WideMarginWarning,
        )
    estimate = inference.bootstrap_estimate(col, 2 * alpha, settings)
    ratios = _ratio_replicates(col) if relative else None
    sides = [_Side("greater", -delta, 1.0 - margin if relative else None)]
    if settings.hypothesis == "equivalence":
        sides.append(_Side("less", delta, 1.0 + margin if relative else None))
    tests = [_side_test(col, settings, side, ratios) for side in sides]
    if ratios is not None:
        low, high = (float(q) for q in quantiles(ratios, [alpha, 1 - alpha]))
        estimate |= {
            "ci_low": min((low - 1.0) * col.baseline_mean, col.observed),
            "ci_high": max((high - 1.0) * col.baseline_mean, col.observed),
        }
    methods = {method for _, _, method in tests}
    method = methods.pop() if len(methods) == 1 else next(m for m in methods if not m.endswith("-exact"))
    estimate |= {
        "alternative": "greater" if settings.hypothesis == "non-inferiority" else "two-sided",
        "hypothesis": settings.hypothesis,
        "margin": delta,
        "relative_margin": delta / col.baseline_mean if col.baseline_mean != 0 else math.nan,
        "margin_scale": "relative" if relative else "absolute",
    }
    return tests[0][0], max(p for _, p, _ in tests), method, estimate


@dataclass(frozen=True)
class _Side:
    """One one-sided test: its alternative, the null boundary of the difference (metric units) and, for a relative
    margin, of the ratio of means."""

    alternative: str
    boundary: float
    ratio: float | None


def _side_test(col, settings: ComparisonSettings, side: _Side, ratios: np.ndarray | None):
    """One one-sided test with the null moved to ``side``'s boundary -> (null replicates or None, p-value, the test as
    reported)."""
    B, method, alternative = settings.n_resamples, settings.test_method, side.alternative
    if method == "bootstrap":
        replicates, boundary = (col.boot, side.boundary) if side.ratio is None else (ratios, side.ratio)
        assert replicates is not None  # a relative margin's sides come with the ratio's replicates
        beyond = replicates <= boundary if alternative == "greater" else replicates >= boundary
        return None, (1 + int(np.count_nonzero(beyond))) / (B + 1), method
    if side.ratio is not None and method == "t":
        return None, _delta_method_p_value(col, side.ratio, alternative), method
    if side.ratio is not None:
        base, cand = col.sides
        shifted = cand - side.ratio * base
    else:
        shifted = col.d - side.boundary
    if method == "t":
        return None, inference.t_test_p_value(shifted, alternative), method
    if method == "wilcoxon":
        p, reported = inference.wilcoxon_p_value(shifted, alternative, settings.zero_method)
        return None, p, reported
    if method == "sign":
        return None, inference.sign_test_p_value(shifted, alternative), method
    observed = float(centred_means(shifted[:, None])[0])
    scale = float(np.abs(shifted).mean())
    if inference.exact_enumeration(int(np.count_nonzero(shifted)), B):
        null = exact_sign_flip_means(shifted)
        p = inference.null_p_value(null, observed, alternative, scale, monte_carlo=False)
        return null, p, "randomization-exact"
    null = sign_flip_means(shifted[:, None], B, col.seeds[0])[:, 0]
    return null, inference.null_p_value(null, observed, alternative, scale, monte_carlo=True), method


def _ratio_replicates(col) -> np.ndarray:
    """Bootstrap replicates of the ratio of means (candidate over baseline), float64 ``(B,)``, drawn with the same
    users as the replicates of the difference; a replicate whose baseline mean is 0 reads as equal means when the
    candidate's is 0 too, else as an infinite ratio."""
    # The baseline's replicates were drawn with the difference's (a column's replicates depend on it alone, so they
    # are those a draw of both sides would give); only the candidate's remain to draw, from the same seeds.
    base_means = col.boot_baseline
    cand_means = bootstrap_means(col.sides[1][:, None], col.boot.shape[0], col.seeds[1])[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = cand_means / base_means
    ratios[(base_means == 0) & (cand_means == 0)] = 1.0
    return ratios


def _delta_method_p_value(col, bound: float, alternative: str) -> float:
    """The t-test of the ratio of means against ``bound`` with the delta method's standard error (Fieller 1954, the
    linearisation ``c - R b``), on ``n - 1`` degrees of freedom."""
    base, cand = col.sides
    n = base.shape[0]
    ratio = col.candidate_mean / col.baseline_mean
    se = float(np.std(cand - ratio * base, ddof=1)) / (math.sqrt(n) * col.baseline_mean)
    if se == 0:  # no spread: the statistic is +-inf (or 0/0 on the boundary), take its limit
        beyond = ratio > bound if alternative == "greater" else ratio < bound
        return 0.0 if beyond else 1.0
    t = (ratio - bound) / se
    dist = scipy.stats.t(n - 1)
    return float(dist.sf(t) if alternative == "greater" else dist.cdf(t))


def decision(c: PairwiseComparison, significant: bool) -> str:
    """The row's ``direction``: for superiority ``"better"``, ``"worse"`` or ``"inconclusive"`` (``"higher"`` or
    ``"lower"`` for a metric with no better side, :func:`~mlflow_recsys.metrics.higher_is_better`); for non-inferiority
    ``"non-inferior"`` (significant), ``"inferior"`` (the interval lies below ``-margin``: worse by more than the
    margin at one-sided alpha) or ``"inconclusive"``; for equivalence ``"equivalent"`` (significant), ``"not
    equivalent"`` (the interval lies outside ``(-margin, margin)``) or ``"inconclusive"``."""
    if c.hypothesis == "superiority":
        return inference.direction(c.difference, significant, judged=has_better_side(c.metric))
    if significant:
        return "non-inferior" if c.hypothesis == "non-inferiority" else "equivalent"
    below = c.ci_high < -c.margin
    if c.hypothesis == "non-inferiority":
        return "inferior" if below else "inconclusive"
    return "not equivalent" if below or c.ci_low > c.margin else "inconclusive"


def detectable_effect(c: PairwiseComparison, sd: float, level: float) -> float:
    """The row's ``mde`` at the tested ``level``: for superiority the smallest true difference detected with
    :data:`REPORT_POWER` (:func:`~mlflow_recsys.stats.minimum_detectable_effect`); for non-inferiority the smallest
    true difference shown non-inferior with that power, ``shift - margin`` (negative when a somewhat worse model still
    passes); for equivalence the largest true absolute difference shown equivalent with about that power, ``margin -
    shift`` (the nearer side's test alone; NaN when even equal models would rarely pass). ``shift`` is the one-sided
    effect a level-``level`` test detects with that power."""
    if c.hypothesis == "superiority":
        return minimum_detectable_effect(sd, c.n_units, level, REPORT_POWER, c.alternative)  # type: ignore[arg-type]
    shift = minimum_detectable_effect(sd, c.n_units, level, REPORT_POWER, "greater")
    if c.hypothesis == "non-inferiority":
        return shift - c.margin
    return c.margin - shift if c.margin > shift else math.nan  # no difference is shown equivalent with that power
