"""One candidate against one reference over several datasets: each dataset's paired effect, then a random-effects
meta-analysis of those effects.

The datasets are not a sample of users from one population, so their effects are not averaged as if they were: each
dataset has its own true effect, drawn around a pooled one with between-dataset variance ``tau2``. ``tau2`` is estimated
by DerSimonian and Laird's (1986) method of moments, and the pooled effect's interval by Hartung and Knapp (2001) and
Sidik and Jonkman (2002) (HKSJ): a t interval with ``k - 1`` degrees of freedom on a weighted residual variance, which
keeps its level with few datasets where the normal interval of DerSimonian and Laird is too narrow (IntHout, Ioannidis
and Borm, 2014, *BMC Med. Res. Methodol.* 14:25).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import scipy.stats

from mlflow_recsys import _validation as validation

Scale = Literal["difference", "log-ratio"]
SCALES: tuple[Scale, ...] = ("difference", "log-ratio")

#: The ``dataset`` of the pooled row of :meth:`MetaAnalysis.to_frame`; no dataset may be called so.
POOLED = "pooled"

#: Columns of :meth:`MetaAnalysis.to_frame`: one row per dataset, then the pooled row.
META_COLUMNS = ("dataset", "effect", "standard_error", "ci_low", "ci_high", "weight")


@dataclass(frozen=True)
class MetaAnalysis:
    """A random-effects meta-analysis of one paired effect over ``k`` datasets.

    ``effects`` and ``standard_errors`` are float64 ``(k,)`` in the order of ``datasets``; ``weights`` the relative
    random-effects weights ``1 / (se_i^2 + tau2)``, summing to 1. ``effect`` is the pooled effect, ``standard_error``
    its HKSJ standard error and ``ci_low``/``ci_high`` its t interval (``k - 1`` df) at ``confidence_level``;
    ``p_value`` is the two-sided t test of a pooled effect of 0. ``q`` is Cochran's Q, ``i2`` Higgins and Thompson's
    (2002) I-squared in [0, 1], ``tau2`` the between-dataset variance, and ``prediction_low``/``prediction_high`` the
    interval for a new dataset's effect (Higgins, Thompson and Spiegelhalter, 2009: ``effect ± t_{k-2}
    sqrt(tau2 + standard_error^2)``), NaN with fewer than 3 datasets. Units are those of ``scale``: a difference of the
    metric, or the log of a ratio of means.
    """

    datasets: tuple[str, ...]
    effects: np.ndarray
    standard_errors: np.ndarray
    weights: np.ndarray
    effect: float
    standard_error: float
    ci_low: float
    ci_high: float
    p_value: float
    q: float
    i2: float
    tau2: float
    prediction_low: float
    prediction_high: float
    confidence_level: float
    scale: Scale

    def to_frame(self) -> pd.DataFrame:
        """One row per dataset with its own normal interval at ``confidence_level``, then the ``"pooled"`` row with
        the HKSJ interval; columns :data:`META_COLUMNS`."""
        z = scipy.stats.norm.ppf(0.5 + self.confidence_level / 2)
        rows = pd.DataFrame(
            {
                "dataset": list(self.datasets),
                "effect": self.effects,
                "standard_error": self.standard_errors,
                "ci_low": self.effects - z * self.standard_errors,
                "ci_high": self.effects + z * self.standard_errors,
                "weight": self.weights,
            }
        )
        pooled = [(POOLED, self.effect, self.standard_error, self.ci_low, self.ci_high, 1.0)]
        return pd.concat([rows, pd.DataFrame(pooled, columns=list(META_COLUMNS))], ignore_index=True)


def paired_effect(candidate: np.ndarray, baseline: np.ndarray, scale: Scale = "difference") -> tuple[float, float]:
    """One dataset's paired effect of ``candidate`` over ``baseline`` and its standard error.

    ``"difference"``: the mean per-user difference and ``sd / sqrt(n)`` (ddof=1). ``"log-ratio"``: ``log(mean(c) /
    mean(b))``, so datasets whose metric levels differ pool as relative gains (the response ratio of Hedges, Gurevitch
    and Curtis, 1999, *Ecology* 80:1150), with the delta-method standard error of the paired means: ``sqrt(var(c) /
    (n c^2) + var(b) / (n b^2) - 2 cov(c, b) / (n c b))`` for the means ``c``, ``b``.

    Parameters
    ----------
    candidate, baseline:
        float ``(n_users,)``: the per-user metric values of the two models on the same users, in the same order.
    scale:
        ``"difference"`` (default) or ``"log-ratio"``.

    Returns
    -------
    (effect, standard_error), both float.

    Raises
    ------
    ValueError
        If the arrays are not 1-D, differ in length, hold fewer than 2 users or a non-finite value, if ``scale`` is
        unknown, or, for ``"log-ratio"``, if a mean is not positive.
    """
    validation.one_of(scale, "scale", SCALES)
    c, b = (np.asarray(v, dtype=np.float64) for v in (candidate, baseline))
    for name, v in (("candidate", c), ("baseline", b)):
        if v.ndim != 1 or v.shape[0] < 2 or not np.isfinite(v).all():
            raise ValueError(validation.expected(name, "a 1-D array of at least 2 finite values", v))
    if c.shape != b.shape:
        raise ValueError(f"baseline: expected {c.shape[0]} users as in candidate, found {b.shape[0]}")
    n = c.shape[0]
    if scale == "difference":
        d = c - b
        return float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))
    mc, mb = c.mean(), b.mean()
    if mc <= 0 or mb <= 0:
        raise ValueError(
            f"scale: a log ratio needs positive means, found candidate {float(mc)!r} and baseline {float(mb)!r}"
        )
    cov = np.cov(c, b, ddof=1)
    variance = cov[0, 0] / (n * mc**2) + cov[1, 1] / (n * mb**2) - 2 * cov[0, 1] / (n * mc * mb)
    return float(math.log(mc / mb)), float(math.sqrt(max(variance, 0.0)))


def random_effects(
    effects: Sequence[float] | Mapping[str, float],
    standard_errors: Sequence[float] | Mapping[str, float],
    *,
    confidence_level: float = 0.95,
    scale: Scale = "difference",
) -> MetaAnalysis:
    """Pool per-dataset effects by a DerSimonian-Laird random-effects model with the HKSJ interval.

    With within-dataset variances ``v_i = se_i^2`` and fixed-effect weights ``w_i = 1 / v_i``: Cochran's ``Q =
    sum w_i (y_i - y_fe)^2``, ``tau2 = max(0, (Q - (k - 1)) / (sum w - sum w^2 / sum w))`` (DerSimonian and Laird, 1986,
    *Control. Clin. Trials* 7:177); the pooled effect ``mu = sum w*_i y_i / sum w*_i`` with ``w*_i = 1 / (v_i +
    tau2)``; its variance ``sum w*_i (y_i - mu)^2 / ((k - 1) sum w*_i)`` (Hartung and Knapp, 2001, *Stat. Med.*
    20:3875; Sidik and Jonkman, 2002, *Stat. Med.* 21:3153) and a t interval with ``k - 1`` df.

    Parameters
    ----------
    effects, standard_errors:
        ``k >= 2`` floats, in the same order, or mappings from dataset name to float with the same keys (the names
        label the rows; a sequence gets ``"0"``, ``"1"``, ...). Standard errors must be positive.
    confidence_level:
        float in (0, 1), default 0.95.
    scale:
        what the effects are (``"difference"`` or ``"log-ratio"``, from :func:`paired_effect`); kept on the result.

    Returns
    -------
    MetaAnalysis

    Raises
    ------
    ValueError
        If fewer than 2 effects are given, the two differ in length or names, a value is not finite, a standard error is
        not positive, or ``confidence_level`` or ``scale`` is out of range.
    """
    level = validation.number(confidence_level, "confidence_level", above=0, below=1)
    validation.one_of(scale, "scale", SCALES)
    names, y = _named(effects, "effects")
    se_names, se = _named(standard_errors, "standard_errors")
    if POOLED in names:
        raise ValueError(f"effects: {POOLED!r} names the pooled row; call the dataset otherwise")
    if se_names != names:
        raise ValueError(f"standard_errors: expected one per effect ({', '.join(names)}), found {', '.join(se_names)}")
    if y.shape[0] < 2:
        raise ValueError(validation.expected("effects", "at least 2 datasets", list(y)))
    if (se <= 0).any():
        raise ValueError(validation.expected("standard_errors", "positive values", list(se)))
    k, v = y.shape[0], se**2
    w = 1 / v
    q = float(np.sum(w * (y - np.sum(w * y) / w.sum()) ** 2))
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - np.sum(w**2) / w.sum()))
    w_re = 1 / (v + tau2)
    mu = float(np.sum(w_re * y) / w_re.sum())
    standard_error = math.sqrt(np.sum(w_re * (y - mu) ** 2) / ((k - 1) * w_re.sum()))
    half = scipy.stats.t.ppf(0.5 + level / 2, k - 1) * standard_error
    p_value = float(2 * scipy.stats.t.sf(abs(mu) / standard_error, k - 1)) if standard_error else float(mu == 0)
    spread = scipy.stats.t.ppf(0.5 + level / 2, k - 2) * math.sqrt(tau2 + standard_error**2) if k >= 3 else math.nan
    return MetaAnalysis(
        datasets=names,
        effects=y,
        standard_errors=se,
        weights=w_re / w_re.sum(),
        effect=mu,
        standard_error=standard_error,
        ci_low=mu - half,
        ci_high=mu + half,
        p_value=p_value,
        q=q,
        i2=max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0,
        tau2=float(tau2),
        prediction_low=mu - spread,
        prediction_high=mu + spread,
        confidence_level=level,
        scale=scale,
    )


def _named(values: Sequence[float] | Mapping[str, float], name: str) -> tuple[tuple[str, ...], np.ndarray]:
    """The names and float64 values of a mapping or a sequence (named by position), all finite."""
    names = tuple(map(str, values)) if isinstance(values, Mapping) else tuple(str(i) for i in range(len(values)))
    raw = list(values.values()) if isinstance(values, Mapping) else list(values)
    try:
        array = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(validation.expected(name, "numbers", raw)) from None
    if array.ndim != 1 or not np.isfinite(array).all():
        raise ValueError(validation.expected(name, "a 1-D sequence of finite numbers", raw))
    return names, array
