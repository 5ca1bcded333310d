"""Bootstrap confidence intervals of one model's metric levels (not of a difference between models).

A training run reports ``ndcg@100`` as the mean over its evaluation rows; how far that mean would move on another sample
of users is the percentile bootstrap interval of it (Efron & Tibshirani 1993, ch. 13), with users as the resampled
units: a user with several evaluation rows (draws) is drawn, or left out, with all of them (cluster resampling; Davison
& Hinkley 1997, sec. 3.8). The draws run in the same compiled kernel as the paired bootstrap of
:mod:`mlflow_recsys.stats._comparison` (:func:`~mlflow_recsys.stats._resampling.bootstrap_means`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlflow_recsys import _validation as validation
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._resampling import bootstrap_means, quantiles
from mlflow_recsys.stats._settings import MAX_RESAMPLES
from mlflow_recsys.stats._units import Units

#: How the intervals are made, in words (logged beside their settings).
METHOD = "percentile bootstrap of the mean over evaluation rows, users resampled (Efron & Tibshirani 1993)"


@dataclass(frozen=True)
class LevelIntervals:
    """Percentile bootstrap intervals of the metric levels of one :class:`~mlflow_recsys.evaluation.EvaluationResult`.

    Attributes
    ----------
    estimates, ci_low, ci_high:
        Metric key -> float: the level (the result's own ``metrics`` value) and the interval's ends, in the result's
        metric order; always ``ci_low <= estimate <= ci_high``.
    confidence_level:
        float in (0, 1): the two-sided coverage asked for.
    n_resamples:
        int: bootstrap replicates B.
    random_state:
        int >= 0: the seed of the draws (the same seed gives identical intervals).
    n_units:
        int: users resampled.
    bootstrap_distribution:
        float64 ``(n_resamples, n_metrics)``: the replicates, columns in the order of ``estimates``, for recomputing
        under another convention.
    """

    estimates: dict[str, float]
    ci_low: dict[str, float]
    ci_high: dict[str, float]
    confidence_level: float
    n_resamples: int
    random_state: int
    n_units: int
    bootstrap_distribution: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """One row per metric: ``metric`` (key), ``estimate``, ``ci_low``, ``ci_high`` (float64)."""
        keys = list(self.estimates)
        return pd.DataFrame(
            {
                "metric": keys,
                "estimate": [self.estimates[k] for k in keys],
                "ci_low": [self.ci_low[k] for k in keys],
                "ci_high": [self.ci_high[k] for k in keys],
            }
        )

    def settings(self) -> dict[str, object]:
        """What the intervals were made with: ``method``, ``confidence_level``, ``n_resamples``, ``random_state``,
        ``unit`` (JSON-ready)."""
        return {
            "method": METHOD,
            "confidence_level": self.confidence_level,
            "n_resamples": self.n_resamples,
            "random_state": self.random_state,
            "unit": "user",
        }


def metric_level_intervals(
    result: EvaluationResult,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 9999,
    random_state: int = 0,
) -> LevelIntervals:
    """Percentile bootstrap confidence interval of each metric's level in ``result`` (Efron & Tibshirani 1993).

    Each replicate draws ``n_units`` users uniformly with replacement and takes the mean of the drawn users' evaluation
    rows (a user drawn twice counts twice): ``sum of their values / number of their rows``, the statistic
    ``result.metrics`` holds, resampled by user (Davison & Hinkley 1997, sec. 3.8). With the same number of rows per
    user, as in every split this package builds, that is the mean of the drawn users' means. The interval runs from the
    ``(1 - confidence_level) / 2`` to the ``(1 + confidence_level) / 2`` quantile of the replicates (linear
    interpolation, ``numpy.quantile``'s default and ``scipy.stats.bootstrap``'s ``method="percentile"``); an end that
    rounding puts an ulp past the estimate is moved onto it. Every metric sees the same draws, and a metric's interval
    depends only on its own values and the seed.

    Parameters
    ----------
    result:
        An evaluation with per-user values (``collect_per_user=True``) of at least one user.
    confidence_level:
        Two-sided coverage, strictly between 0 and 1. Default 0.95.
    n_resamples:
        Bootstrap replicates B, 1 to 1,000,000. Default 9999.
    random_state:
        Seed of the draws, an integer >= 0. Default 0.

    Returns
    -------
    LevelIntervals

    Raises
    ------
    ValueError
        If ``result`` is no :class:`~mlflow_recsys.evaluation.EvaluationResult`, holds no per-user values or no rows, or
        a setting is out of its range (the message names it).
    """
    units, confidence_level, n_resamples, random_state = _levels_iv(result, confidence_level, n_resamples, random_state)
    keys = list(result.metrics)
    per_user = result.per_user or {}
    # Columns: each metric's sum over a user's rows, then the user's row count; a replicate's mean of a sum column over
    # its mean row count is the mean of the drawn rows (the counts column cancels the 1/n of both).
    sums = [np.bincount(units.codes, weights=per_user[k], minlength=units.n_units) for k in keys]
    columns = np.column_stack([*sums, units.counts])
    boot = bootstrap_means(columns, n_resamples, np.random.SeedSequence(random_state))
    replicates = boot[:, :-1] / boot[:, -1:]
    alpha = 1.0 - confidence_level
    ends = np.column_stack([quantiles(column, [alpha / 2, 1 - alpha / 2]) for column in replicates.T])
    estimates = {k: float(result.metrics[k]) for k in keys}
    return LevelIntervals(
        estimates=estimates,
        ci_low={k: min(float(ends[0, j]), estimates[k]) for j, k in enumerate(keys)},
        ci_high={k: max(float(ends[1, j]), estimates[k]) for j, k in enumerate(keys)},
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        random_state=random_state,
        n_units=units.n_units,
        bootstrap_distribution=replicates,
    )


def _levels_iv(result, confidence_level, n_resamples, random_state) -> tuple[Units, float, int, int]:
    """Checked inputs of :func:`metric_level_intervals`: the result's units and the three settings."""
    if not isinstance(result, EvaluationResult):
        raise ValueError(validation.expected("result", "an EvaluationResult", result))
    if result.per_user is None:
        raise ValueError("result: expected per-user values, found none (it was evaluated with collect_per_user=False)")
    if result.n_samples == 0:
        raise ValueError("result: expected at least one evaluation row, found 0")
    confidence_level = validation.number(confidence_level, "confidence_level", above=0, below=1)
    n_resamples = validation.integer(n_resamples, "n_resamples", minimum=1, maximum=MAX_RESAMPLES)
    random_state = validation.seed(random_state, "random_state")
    missing = [k for k in result.metrics if k not in result.per_user]
    if missing:
        raise ValueError(f"result: expected per-user values of every metric, found none for {missing}")
    return Units.from_sample_ids(result.sample_ids), confidence_level, n_resamples, random_state
