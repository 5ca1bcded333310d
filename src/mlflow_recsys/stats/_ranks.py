"""Many models over several datasets: the Friedman test on their ranks, then pairwise post-hoc tests, with the floor
that the number of datasets puts under every p-value said before any result.

Each dataset is one unit here (Demšar, 2006, "Statistical comparisons of classifiers over multiple data sets", *JMLR*
7:1-30): a model's score on a dataset is one number, and with ``N`` datasets no test can reach a p-value below what
``N`` allows. The two-sided Wilcoxon signed-rank test over 5 datasets never goes below ``2 / 2^5 = 0.0625``, so with 5
datasets no pair can differ at alpha = 0.05, whatever the scores. That floor is computed first, and a pair is never
called significant where it rules significance out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np
import pandas as pd
import scipy.stats

from mlflow_recsys import _validation as validation
from mlflow_recsys.stats._corrections import adjust_p_values
from mlflow_recsys.stats._inference import wilcoxon_p_value

Posthoc = Literal["wilcoxon-holm", "nemenyi"]
POSTHOCS: tuple[Posthoc, ...] = ("wilcoxon-holm", "nemenyi")

#: Columns of :meth:`RankAnalysis.to_frame`: one row per pair of models, the better-ranked one first.
RANK_COLUMNS = ("model", "other", "rank", "other_rank", "p_value", "adjusted_p_value", "significant")

#: Most datasets :func:`datasets_needed` looks through.
_MOST_DATASETS = 100_000


@dataclass(frozen=True)
class RankAnalysis:
    """The ranks of ``k`` models over ``N`` datasets, the Friedman test and a post-hoc test of every pair.

    ``models`` are in the order of ``average_ranks`` (float64 ``(k,)``, 1 = best, ties averaged), best first.
    ``friedman_statistic`` and ``friedman_p_value`` are Friedman's (1937) chi-squared test with scipy's tie
    correction (NaN with 2 models, where the one pair is the whole analysis). ``pairs`` lists every pair of models
    (better-ranked first) in the order of ``p_values`` (unadjusted) and ``adjusted_p_values`` (Holm within the
    ``k (k - 1) / 2`` pairs for Wilcoxon; Nemenyi's are family-wise already). ``significant`` holds where the
    adjusted p-value is at most ``alpha``, the Friedman test rejected (with 3 or more models) and the floor allows it.

    ``p_value_floor`` is the smallest adjusted p-value any pair can reach with ``N`` datasets, ``friedman_floor`` the
    smallest Friedman p-value (every dataset ranking the models alike), and ``datasets_needed`` the fewest datasets
    at which the floor is at most ``alpha``. ``critical_difference`` is Nemenyi's ``CD = q_alpha sqrt(k (k + 1) /
    (6 N))`` in ranks (NaN for Wilcoxon-Holm), and ``groups`` the models joined by one bar in a critical-difference
    diagram: maximal runs of neighbours in rank order of which no two differ significantly.
    """

    models: tuple[str, ...]
    datasets: tuple[str, ...]
    average_ranks: np.ndarray
    friedman_statistic: float
    friedman_p_value: float
    posthoc: Posthoc
    alpha: float
    pairs: tuple[tuple[str, str], ...]
    p_values: np.ndarray
    adjusted_p_values: np.ndarray
    significant: np.ndarray
    p_value_floor: float
    friedman_floor: float
    datasets_needed: int
    critical_difference: float
    groups: tuple[tuple[str, ...], ...]

    @property
    def conclusive(self) -> bool:
        """Whether ``N`` datasets allow any pair to differ significantly at ``alpha``."""
        return self.p_value_floor <= self.alpha

    @property
    def friedman_rejects(self) -> bool:
        """Whether the Friedman test rejected equal ranks at ``alpha`` (True with 2 models: there is no omnibus)."""
        return len(self.models) == 2 or self.friedman_p_value <= self.alpha

    def to_frame(self) -> pd.DataFrame:
        """One row per pair of models, in the order of :attr:`pairs`; columns :data:`RANK_COLUMNS`."""
        rank = dict(zip(self.models, self.average_ranks, strict=True))
        return pd.DataFrame(
            {
                "model": [a for a, _ in self.pairs],
                "other": [b for _, b in self.pairs],
                "rank": [rank[a] for a, _ in self.pairs],
                "other_rank": [rank[b] for _, b in self.pairs],
                "p_value": self.p_values,
                "adjusted_p_value": self.adjusted_p_values,
                "significant": self.significant,
            },
            columns=list(RANK_COLUMNS),
        )


def rank_across_datasets(
    scores: pd.DataFrame | Mapping[str, Mapping[str, float]],
    *,
    posthoc: Posthoc = "wilcoxon-holm",
    alpha: float = 0.05,
) -> RankAnalysis:
    """Rank models on each dataset, test whether their ranks differ (Friedman), then test every pair.

    ``"wilcoxon-holm"`` (the default) tests each pair by the two-sided Wilcoxon signed-rank test of their scores over
    the datasets (zeros dropped, as :func:`~mlflow_recsys.stats.compare_pair`'s ``zero_method="wilcox"``) and adjusts
    the ``k (k - 1) / 2`` p-values by Holm (1979), as Benavoli, Corani and Mangili (2016, "Should we really use
    post-hoc tests based on mean-ranks?", *JMLR* 17:1-10) recommend over mean-rank tests. The exact test's smallest
    two-sided p-value with ``n`` non-zero differences is ``2 / 2^n``; where ties make the normal approximation go below
    it, that bound is the pair's p-value. ``"nemenyi"`` is Nemenyi's (1963) test on the average ranks: ``p = P(Q >
    |R_i - R_j| sqrt(2) / sqrt(k (k + 1) / (6 N)))`` for the studentized range ``Q`` of ``k`` means with infinite df
    (Demšar, 2006, sec. 3.2.2).

    Parameters
    ----------
    scores:
        The metric (higher is better) of each model on each dataset: a frame with one row per dataset (its index
        names them) and one column per model, or a mapping ``{model: {dataset: score}}``. At least 2 models and 2
        datasets, every value finite.
    posthoc:
        ``"wilcoxon-holm"`` (default) or ``"nemenyi"``.
    alpha:
        Significance level in (0, 1), default 0.05.

    Returns
    -------
    RankAnalysis

    Raises
    ------
    ValueError
        If ``scores`` has fewer than 2 models or 2 datasets, a missing or non-finite value, a model or dataset named
        twice, or ``posthoc`` or ``alpha`` is out of range.
    """
    validation.one_of(posthoc, "posthoc", POSTHOCS)
    alpha = validation.number(alpha, "alpha", above=0, below=1)
    frame = _scores_frame(scores)
    values = frame.to_numpy(dtype=np.float64)
    n, k = values.shape
    ranks = scipy.stats.rankdata(-values, axis=1).mean(axis=0)
    order = np.argsort(ranks, kind="stable")
    models, ranks, values = tuple(str(frame.columns[i]) for i in order), ranks[order], values[:, order]
    if k >= 3:
        statistic, friedman_p = (float(v) for v in scipy.stats.friedmanchisquare(*values.T))
        friedman_p = 1.0 if math.isnan(friedman_p) else friedman_p  # every dataset ties every model
    else:
        statistic, friedman_p = math.nan, math.nan
    pairs = list(combinations(range(k), 2))
    if posthoc == "nemenyi":
        p = np.array([_nemenyi_p_value(ranks[i] - ranks[j], k, n) for i, j in pairs])
        adjusted = p
    else:
        p = np.array([_wilcoxon_floored(values[:, i] - values[:, j]) for i, j in pairs])
        adjusted = adjust_p_values(p, "holm")
    floor = p_value_floor(k, n, posthoc)
    omnibus = k == 2 or friedman_p <= alpha
    significant = (adjusted <= alpha) & omnibus & (floor <= alpha)
    differs = {(models[i], models[j]) for (i, j), s in zip(pairs, significant, strict=True) if s}
    return RankAnalysis(
        models=models,
        datasets=tuple(map(str, frame.index)),
        average_ranks=ranks,
        friedman_statistic=statistic,
        friedman_p_value=friedman_p,
        posthoc=posthoc,
        alpha=alpha,
        pairs=tuple((models[i], models[j]) for i, j in pairs),
        p_values=p,
        adjusted_p_values=adjusted,
        significant=significant,
        p_value_floor=floor,
        friedman_floor=float(scipy.stats.chi2.sf(n * (k - 1), k - 1)),
        datasets_needed=datasets_needed(k, posthoc, alpha),
        critical_difference=_critical_difference(k, n, alpha) if posthoc == "nemenyi" else math.nan,
        groups=_groups(models, differs),
    )


def p_value_floor(n_models: int, n_datasets: int, posthoc: Posthoc = "wilcoxon-holm") -> float:
    """The smallest adjusted pairwise p-value ``n_datasets`` allow among ``n_models`` models.

    Wilcoxon-Holm: ``min(1, m 2 / 2^N)`` for ``m = k (k - 1) / 2`` pairs, the exact two-sided test's smallest p-value
    (every difference of one sign) at Holm's first step; with 2 models, ``2 / 2^N``. Nemenyi: the p-value of the
    largest possible rank difference, ``k - 1`` (one model first and another last on every dataset).

    Raises
    ------
    ValueError
        If ``n_models`` or ``n_datasets`` is below 2, or ``posthoc`` is unknown.
    """
    k = validation.integer(n_models, "n_models", minimum=2)
    n = validation.integer(n_datasets, "n_datasets", minimum=2)
    validation.one_of(posthoc, "posthoc", POSTHOCS)
    if posthoc == "nemenyi":
        return _nemenyi_p_value(k - 1, k, n)
    return min(1.0, k * (k - 1) / 2 * 2.0 ** (1 - n))


def datasets_needed(n_models: int, posthoc: Posthoc = "wilcoxon-holm", alpha: float = 0.05) -> int:
    """The fewest datasets at which :func:`p_value_floor` is at most ``alpha``: e.g. 6 for two models and 8 for four
    under Wilcoxon-Holm at alpha = 0.05. Raises ValueError as :func:`p_value_floor`, or for ``alpha`` outside (0, 1)."""
    alpha = validation.number(alpha, "alpha", above=0, below=1)
    for n in range(2, _MOST_DATASETS):
        if p_value_floor(n_models, n, posthoc) <= alpha:
            return n
    raise ValueError(f"alpha: expected a level some number of datasets up to {_MOST_DATASETS:,} reaches, found {alpha}")


def _scores_frame(scores: pd.DataFrame | Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    if not isinstance(scores, (pd.DataFrame, Mapping)):
        raise ValueError(
            validation.expected("scores", "a frame (datasets x models) or {model: {dataset: score}}", scores)
        )
    frame = scores if isinstance(scores, pd.DataFrame) else pd.DataFrame(scores)
    for name, labels in (("models", frame.columns), ("datasets", frame.index)):
        if labels.has_duplicates:
            twice = sorted(map(str, set(labels[labels.duplicated()])))
            raise ValueError(f"scores: expected each of the {name} once, found {twice} more than once")
    if min(frame.shape) < 2:
        models, datasets = frame.shape[1], frame.shape[0]
        raise ValueError(f"scores: expected at least 2 models and 2 datasets, found {models} and {datasets}")
    try:
        values = frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("scores: expected numbers, found values that are not") from None
    rows, columns = np.nonzero(~np.isfinite(values))
    if rows.size:
        cells = [f"{frame.columns[m]} on {frame.index[d]}" for d, m in zip(rows, columns, strict=True)]
        raise ValueError(f"scores: expected a finite score of every model on every dataset, found none for {cells[:5]}")
    return frame


def _wilcoxon_floored(d: np.ndarray) -> float:
    """The two-sided Wilcoxon p-value of the differences ``d``, never below the exact test's ``2 / 2^n``."""
    p, _ = wilcoxon_p_value(d, "two-sided", "wilcox")
    n_nonzero = int(np.count_nonzero(d))
    return max(p, min(1.0, 2.0 ** (1 - n_nonzero)))


def _nemenyi_p_value(rank_difference: float, k: int, n: int) -> float:
    q = abs(rank_difference) / math.sqrt(k * (k + 1) / (6 * n))
    return float(scipy.stats.studentized_range.sf(q * math.sqrt(2), k, np.inf))


def _critical_difference(k: int, n: int, alpha: float) -> float:
    q_alpha = scipy.stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return float(q_alpha * math.sqrt(k * (k + 1) / (6 * n)))


def _groups(models: tuple[str, ...], differs: set[tuple[str, str]]) -> tuple[tuple[str, ...], ...]:
    """Maximal runs of neighbours in rank order of which no two differ, each of two models or more."""
    runs: list[tuple[str, ...]] = []
    for i in range(len(models)):
        j = i
        while j + 1 < len(models) and not any((models[a], models[j + 1]) in differs for a in range(i, j + 1)):
            j += 1
        if j > i and not (runs and models[j] == runs[-1][-1]):
            runs.append(models[i : j + 1])
    return tuple(runs)
