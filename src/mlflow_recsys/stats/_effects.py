"""What a row says beyond the mean difference and its test: the relative difference and the standardized effect d_z,
each with a bootstrap interval from the pair's own bootstrap draw; the Monte Carlo standard error of a resampled
p-value; and the sign test of wins against losses, reported beside whichever test the row ran.

The intervals are percentile intervals (Efron 1979), two-sided at the row's ``confidence_level`` whatever its
alternative or margin: they describe the size of an effect, not a decision.

* Relative difference: the difference over the baseline's mean (taken positive, so the sign is the difference's),
  each replicate the same ratio of bootstrap means over the same resampled users (the bootstrap of a ratio of means;
  Efron & Tibshirani 1993, sec. 10.3).
* d_z: the mean of the per-user differences over their standard deviation (ddof 1), Cohen's standardized effect for
  paired designs (Cohen 1988, sec. 2.3; Lakens 2013, "Calculating and reporting effect sizes", Frontiers in
  Psychology 4:863), each replicate recomputed from the resampled users' first and second moments.
* Monte Carlo standard error of a p-value estimated from B resamples: ``sqrt(p (1 - p) / B)``, the binomial standard
  error of a proportion (Davison & Hinkley 1997, sec. 4.2.5); 0 for an exact or analytic p-value.
"""

from __future__ import annotations

import math

import numpy as np

from mlflow_recsys.stats._corrections import Correction
from mlflow_recsys.stats._pairing import TIE_RTOL
from mlflow_recsys.stats._resampling import quantiles

#: Test methods whose p-value is a Monte Carlo estimate (the exact variants are reported under other names).
MONTE_CARLO_TESTS = ("randomization", "bootstrap")


def effect_columns(
    d: np.ndarray,
    observed: float,
    baseline: np.ndarray,
    boot: np.ndarray,
    boot_squares: np.ndarray,
    boot_baseline: np.ndarray,
    confidence_level: float,
) -> dict:
    """The row's ``relative_difference``, ``relative_ci_low``, ``relative_ci_high``, ``effect_size_dz``, ``dz_ci_low``
    and ``dz_ci_high``.

    Parameters
    ----------
    d:
        float ``(n_units,)``, the per-user differences; at least two.
    observed:
        Their mean as the row reports it.
    baseline:
        float ``(n_units,)``, the baseline's per-user values.
    boot, boot_squares, boot_baseline:
        float ``(B,)`` each, from one bootstrap draw of the users: the means of ``d``, of ``d ** 2`` and of the
        baseline's values.
    confidence_level:
        float in (0, 1).

    Returns
    -------
    dict of float. The relative difference is ``observed / |mean(baseline)|``, so its sign is the difference's; it is
    NaN when the baseline's mean is 0 up to rounding (within :data:`~mlflow_recsys.stats._pairing.TIE_RTOL` of its
    values' size). Its interval is NaN then too, and when a replicate of the baseline's mean reaches 0 or changes sign
    (the ratio is unbounded). d_z and its interval are NaN when the differences do not vary beyond rounding (d_z
    would be 0/0 or a ratio of rounding errors); the interval also with fewer than three users, where every resample
    that varies holds the same users. Each interval holds its estimate.
    """
    levels = [(1 - confidence_level) / 2, (1 + confidence_level) / 2]
    nan = float("nan")

    def interval(replicates: np.ndarray, estimate: float) -> tuple[float, float]:
        low, high = (float(q) for q in quantiles(replicates, levels))
        return min(low, estimate), max(high, estimate)

    base_mean = float(baseline.mean())
    relative, relative_interval = nan, (nan, nan)
    if abs(base_mean) > TIE_RTOL * float(np.abs(baseline).mean()):
        relative = observed / abs(base_mean)
        if np.all(boot_baseline * np.sign(base_mean) > 0):
            relative_interval = interval(boot / np.abs(boot_baseline), relative)
    n, sd = d.shape[0], float(np.std(d, ddof=1))
    rounding = TIE_RTOL * float(np.abs(d).max())
    dz, dz_interval = nan, (nan, nan)
    if sd > rounding:
        dz = observed / sd
        variance = (boot_squares - boot**2) * (n / (n - 1))
        varies = variance > rounding**2  # a replicate that drew one user n times has no spread: no d_z
        if n >= 3 and varies.any():
            dz_interval = interval(boot[varies] / np.sqrt(variance[varies]), dz)
    return {
        "relative_difference": relative,
        "relative_ci_low": relative_interval[0],
        "relative_ci_high": relative_interval[1],
        "effect_size_dz": dz,
        "dz_ci_low": dz_interval[0],
        "dz_ci_high": dz_interval[1],
    }


def p_value_mcse(p: float, test_method: str, n_resamples: int) -> float:
    """The Monte Carlo standard error of ``p``: ``sqrt(p (1 - p) / B)`` for a test in :data:`MONTE_CARLO_TESTS`, else
    0 (exact or analytic)."""
    if test_method not in MONTE_CARLO_TESTS:
        return 0.0
    return math.sqrt(p * (1 - p) / n_resamples)


def adjusted_mcse(p: np.ndarray, mcse: np.ndarray, adjusted: np.ndarray, correction: Correction) -> np.ndarray:
    """The Monte Carlo standard error of each adjusted p-value of a family, float64 ``(J,)``.

    Holm's and Bonferroni's adjusted p-value is a multiple ``k`` of one unadjusted p-value of the family (Holm's of the
    hypothesis whose scaled p-value set the running maximum), so its error is ``k`` times that one's; a value capped
    at 1 has none. Without a correction it is the unadjusted error; with max-T the adjusted p-value is itself a
    resampled proportion, ``sqrt(p~ (1 - p~) / B)``, computed by the caller.
    """
    p, mcse, adjusted = (np.asarray(a, dtype=np.float64) for a in (p, mcse, adjusted))
    if correction is None:
        return mcse.copy()
    J = p.shape[0]
    if correction == "bonferroni":
        return np.where(adjusted < 1.0, J * mcse, 0.0)
    order = np.argsort(p, kind="stable")
    scaled = (J - np.arange(J)) * p[order]
    setter = np.zeros(J, dtype=np.int64)  # position (in sorted order) whose scaled p-value is the running maximum
    for i in range(1, J):
        setter[i] = i if scaled[i] >= scaled[setter[i - 1]] else setter[i - 1]
    out = np.empty(J, dtype=np.float64)
    out[order] = (J - setter) * mcse[order][setter]
    return np.where(adjusted < 1.0, out, 0.0)
