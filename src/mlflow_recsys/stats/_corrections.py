"""Family-wise error control for several hypotheses tested together."""

from __future__ import annotations

from typing import Literal

import numpy as np

Correction = Literal["holm", "bonferroni", "maxt"] | None
CORRECTIONS = ("holm", "bonferroni", "maxt", None)


def adjust_p_values(p_values: np.ndarray, correction: Correction = "holm") -> np.ndarray:
    """Adjust p-values for the family they were tested in.

    ``"holm"`` is Holm's (1979) step-down procedure: with sorted p-values ``p_(1) <= ... <= p_(J)``, ``p~_(i) = min(1,
    max_{j <= i} (J - j + 1) p_(j))``, restored to the input order. ``"bonferroni"`` multiplies every p-value by ``J``
    (capped at 1). Both control the family-wise error rate under arbitrary dependence between the hypotheses. ``None``
    returns the p-values unchanged. ``"maxt"`` needs the family's resampled statistics, not its p-values: it is a
    setting of :func:`~mlflow_recsys.stats.compare_models`, refused here.

    Parameters
    ----------
    p_values:
        float ``(J,)`` with values in [0, 1].
    correction:
        ``"holm"`` (default), ``"bonferroni"`` or ``None``.

    Returns
    -------
    float64 ``(J,)`` adjusted p-values in the input order.

    Raises
    ------
    ValueError
        If ``correction`` is unknown or ``"maxt"``, or a p-value lies outside [0, 1].
    """
    if correction not in ("holm", "bonferroni", None):
        raise ValueError(
            f"correction: expected one of 'holm', 'bonferroni' or None (max-T adjusts from the resampled statistics: "
            f"compare_models(..., correction='maxt')), found {correction!r}"
        )
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p_values: expected a 1-D array, found shape {p.shape}")
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p_values: expected finite values in [0, 1], found {p.tolist()}")
    J = p.shape[0]
    if correction is None or J == 0:
        return p.copy()
    if correction == "bonferroni":
        return np.minimum(1.0, p * J)
    order = np.argsort(p, kind="stable")
    scaled = (J - np.arange(J)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    adjusted = np.empty(J, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return adjusted
