"""The max-T correction: Westfall and Young's step-down adjustment of a family's p-values from the family's joint
randomization null, and the simultaneous bootstrap intervals that go with it.

Holm's procedure assumes nothing about how the hypotheses depend on each other, so it pays in full for metrics that
move together (nDCG@100 and recall@50 of the same two models). Max-T reads the dependence off the resampled data: every
hypothesis of the family is re-tested on the *same* relabelling of the users' scores, and each one is compared with the
largest statistic the relabelling produced among the hypotheses not yet rejected (Westfall & Young 1993, *Resampling-
Based Multiple Testing*, Algorithm 2.8). It controls the family-wise error rate strongly under subset pivotality, which
holds for the paired relabellings used here.

The relabelling is a sign vector over the users: it flips every hypothesis' difference of a user together, whichever
pair and metric the hypothesis is of. With two models this is the pair's own sign flip, from the pair's own stream, so a
family of one hypothesis gets its unadjusted p-value back, and it is exact under the exchangeability of the two models
within a user. With three or more models the null it rests on is that each user's vector of differences is symmetric
about 0 as a whole, the multivariate form of the symmetry each sign-flip test already assumes. Permuting the users'
scores among all the models instead (the randomised Tukey HSD; Carterette 2012, "Multiple testing in statistical
analysis of systems-based information retrieval experiments", ACM TOIS 30(1)) would let a model that truly differs
widen or narrow the null of a pair it is not in, which controls the error only when every model is equal.

Hypotheses on different scales are made comparable by dividing each by the standard deviation of its own null
distribution. The simultaneous intervals are the studentized max-T bootstrap intervals (Beran 1988, "Balanced
simultaneous confidence sets", JASA 83; Romano & Wolf 2005, "Exact and approximate stepdown methods for multiple
hypothesis testing", JASA 100): one bootstrap draw of the users for the whole family, and one critical value, the
``1 - alpha`` quantile of the largest studentized deviation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlflow_recsys.stats._resampling import (
    MAX_EXACT_UNITS,
    bootstrap_means,
    exact_sign_flip_means,
    quantiles,
    sign_flip_means,
)
from mlflow_recsys.stats._results import PairwiseComparison
from mlflow_recsys.stats._settings import ComparisonSettings


def step_down_p_values(
    observed: np.ndarray, null: np.ndarray, alternative: str, tolerance: np.ndarray, *, monte_carlo: bool
) -> np.ndarray:
    """Westfall-Young max-T step-down adjusted p-values (Westfall & Young 1993, Algorithm 2.8).

    Parameters
    ----------
    observed:
        float ``(H,)``: each hypothesis' standardized statistic.
    null:
        float ``(B, H)``: the statistics under B joint relabellings, row r of every column from the same relabelling.
    alternative:
        ``"two-sided"`` (``|T|`` is extreme), ``"greater"`` (``T``) or ``"less"`` (``-T``).
    tolerance:
        float ``(H,)`` >= 0: a replicate within this of a hypothesis' statistic ties it (rounding of sums taken in
        another order).
    monte_carlo:
        True: ``(1 + count) / (B + 1)`` (Phipson & Smyth 2010); False: the rows are every relabelling, ``count / B``.

    Returns
    -------
    float64 ``(H,)`` adjusted p-values in the input order, each at least the unadjusted one and monotone in the
    statistics.
    """
    t, null = np.asarray(observed, dtype=np.float64), np.asarray(null, dtype=np.float64)
    if alternative == "two-sided":
        t, null = np.abs(t), np.abs(null)
    elif alternative == "less":
        t, null = -t, -null
    order = np.argsort(-t, kind="stable")  # the largest statistic first
    # successive[r, i]: the largest statistic of replicate r among the hypotheses ranked i and after.
    successive = np.maximum.accumulate(null[:, order[::-1]], axis=1)[:, ::-1]
    counts = (successive >= (t[order] - np.asarray(tolerance)[order])).sum(axis=0)
    p_sorted = (1.0 + counts) / (null.shape[0] + 1.0) if monte_carlo else counts / null.shape[0]
    adjusted = np.empty_like(p_sorted)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(p_sorted))
    return adjusted


def simultaneous_intervals(
    estimates: np.ndarray, replicates: np.ndarray, alpha: float, alternative: str
) -> tuple[np.ndarray, np.ndarray]:
    """Studentized max-T bootstrap intervals that hold together with probability ``1 - alpha`` (Beran 1988; Romano &
    Wolf 2005).

    Each hypothesis' standard error is its replicates' standard deviation around the estimate; the critical value is
    the ``1 - alpha`` quantile, over replicates, of the largest ``|replicate - estimate| / se`` across the family
    (one-sided: the largest signed deviation on the tested side). A hypothesis whose replicates all equal its estimate
    has the interval ``[estimate, estimate]`` and does not enter the maximum.

    Parameters
    ----------
    estimates:
        float ``(H,)``.
    replicates:
        float ``(B, H)``, row r of every column from the same bootstrap draw of the users.
    alpha:
        float in (0, 1).
    alternative:
        ``"two-sided"``, ``"greater"`` (lower bounds, upper ends +inf) or ``"less"``.

    Returns
    -------
    ``(low, high)``, float64 ``(H,)`` each, holding the estimates.
    """
    est = np.asarray(estimates, dtype=np.float64)
    deviations = np.asarray(replicates, dtype=np.float64) - est
    se = np.sqrt(np.sum(deviations**2, axis=0) / max(deviations.shape[0] - 1, 1))
    varies = se > 0
    critical = 0.0
    if varies.any():
        studentized = deviations[:, varies] / se[varies]
        if alternative == "two-sided":
            studentized = np.abs(studentized)
        elif alternative == "less":
            studentized = -studentized
        critical = max(0.0, float(quantiles(studentized.max(axis=1), [1.0 - alpha])[0]))
    width = np.where(varies, critical * se, 0.0)
    low = est - width if alternative != "less" else np.full_like(est, -np.inf)
    high = est + width if alternative != "greater" else np.full_like(est, np.inf)
    return low, high


def family_replicates(
    rows: Sequence[PairwiseComparison], d: np.ndarray, settings: ComparisonSettings, family: str
) -> tuple[np.ndarray, bool, np.ndarray]:
    """For the family's hypotheses ``rows`` with their per-user differences ``d`` (float ``(n_units, H)``, a column
    per row): the family's joint sign-flip null of mean differences, float ``(B', H)``; whether it is Monte Carlo
    (False: all ``B' = 2**u`` sign vectors of the ``u`` users with a non-zero difference, enumerated when ``2**u <=
    B``); and its joint bootstrap means, float ``(B, H)``; the hypotheses in the order of ``rows``."""
    from mlflow_recsys.stats._inference import stream_seed_sequences

    B = settings.n_resamples
    models = list(dict.fromkeys(name for row in rows for name in (row.baseline, row.candidate)))
    if len(models) == 2:  # one pair: its own streams, already drawn once for all its metrics
        sign_seeds, _ = stream_seed_sequences(settings.random_state, rows[0].baseline, rows[0].candidate)
        boot = np.column_stack([row.bootstrap_distribution for row in rows])
    else:
        sign_seeds, bootstrap_seeds = stream_seed_sequences(settings.random_state, "max-T", family, *models)
        boot = bootstrap_means(d, B, bootstrap_seeds)
    moving = int(np.any(d != 0, axis=1).sum())
    if moving <= MAX_EXACT_UNITS and 2**moving <= B:
        return exact_sign_flip_means(d), False, boot
    return sign_flip_means(d, B, sign_seeds), True, boot


def maxt_family(
    rows: Sequence[PairwiseComparison], settings: ComparisonSettings, family: str, alpha: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The family's max-T adjusted p-values, their Monte Carlo standard errors (0 when every sign vector was
    enumerated) and the simultaneous interval ends, float64 ``(H,)`` each, in row order."""
    d = np.column_stack([row.unit_differences for row in rows])
    null, monte_carlo, boot = family_replicates(rows, d, settings, family)
    # The sign-flip null of a mean has the standard deviation sqrt(sum d^2) / n exactly, whatever was drawn: a few
    # replicates that happen to agree cannot leave a hypothesis unscaled.
    scale = np.sqrt(np.sum(d * d, axis=0)) / d.shape[0]
    varies = scale > 0
    safe = np.where(varies, scale, 1.0)
    differences = np.array([row.difference for row in rows])
    spread = np.abs(d).mean(axis=0)
    observed = np.where(varies, differences / safe, 0.0)
    standardized = np.where(varies, null / safe, 0.0)
    tolerance = 100 * np.finfo(np.float64).eps * np.maximum(np.abs(differences), spread) / safe
    adjusted = step_down_p_values(observed, standardized, settings.alternative, tolerance, monte_carlo=monte_carlo)
    # An adjusted p-value is never below its own: the family's null can be drawn apart from a row's (three or more
    # models draw their own stream; a row may be exact where the family is Monte Carlo).
    adjusted = np.maximum(adjusted, [row.p_value for row in rows])
    low, high = simultaneous_intervals(differences, boot, alpha, settings.alternative)
    mcse = np.sqrt(adjusted * (1 - adjusted) / null.shape[0]) if monte_carlo else np.zeros_like(adjusted)
    return adjusted, mcse, low, high
