"""The verdict of a study across datasets: each candidate's paired effect over the reference pooled by a random-effects
meta-analysis (:mod:`~mlflow_recsys.stats._meta`), and every model's rank per metric tested over the datasets
(:mod:`~mlflow_recsys.stats._ranks`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlflow_recsys import _validation as validation
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._meta import META_COLUMNS, MetaAnalysis, Scale, paired_effect, random_effects
from mlflow_recsys.stats._ranks import RANK_COLUMNS, Posthoc, RankAnalysis, rank_across_datasets
from mlflow_recsys.stats._results import significance_level

#: Columns of :meth:`StudyVerdict.effects_frame`: the candidate and metric, then :data:`META_COLUMNS`.
EFFECT_COLUMNS = ("candidate", "metric", *META_COLUMNS)


@dataclass(frozen=True)
class StudyVerdict:
    """What a study concludes across its datasets.

    ``effects`` holds, for each candidate and metric (in that order), the random-effects meta-analysis of the
    candidate's paired effect over ``reference`` on every dataset where both were scored (at least 2); empty without
    a reference. ``ranks`` holds, per metric, the rank analysis of the models scored on every dataset (at least 2 of
    them, on at least 2 datasets); ``unranked`` the models left out of it, scored on some datasets only. Effects are
    in units of ``scale``; ``notes`` says which effects could not be pooled and why (a log ratio of a mean of 0).
    """

    reference: str | None
    scale: Scale
    effects: tuple[tuple[str, str, MetaAnalysis], ...]
    ranks: tuple[tuple[str, RankAnalysis], ...]
    unranked: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def effects_frame(self) -> pd.DataFrame:
        """Each meta-analysis's rows (its datasets, then ``"pooled"``), columns :data:`EFFECT_COLUMNS`."""
        frames = [m.to_frame().assign(candidate=c, metric=k) for c, k, m in self.effects]
        return pd.concat(frames, ignore_index=True)[list(EFFECT_COLUMNS)] if frames else _empty(EFFECT_COLUMNS)

    def ranks_frame(self) -> pd.DataFrame:
        """Each metric's pairs of models, columns ``metric`` then :data:`RANK_COLUMNS`."""
        columns = ("metric", *RANK_COLUMNS)
        frames = [r.to_frame().assign(metric=k) for k, r in self.ranks]
        return pd.concat(frames, ignore_index=True)[list(columns)] if frames else _empty(columns)


def verdict_across_datasets(
    results: Mapping[str, Mapping[str, EvaluationResult]],
    *,
    metrics: Sequence[str],
    reference: str | None = None,
    scale: Scale = "difference",
    posthoc: Posthoc = "wilcoxon-holm",
    confidence_level: float = 0.95,
) -> StudyVerdict:
    """Pool each candidate's effect over the reference across datasets, and test the models' ranks per metric.

    Parameters
    ----------
    results:
        Dataset -> model -> :class:`~mlflow_recsys.evaluation.EvaluationResult` with per-user values (a seeded
        model's averaged over its seeds, :func:`~mlflow_recsys.stats.average_over_seeds`); within a dataset every
        model scored the same users in the same order.
    metrics:
        Metric keys, each scored by every model.
    reference:
        The model every other is pooled against (:func:`~mlflow_recsys.stats.paired_effect`, then
        :func:`~mlflow_recsys.stats.random_effects`); None: ranks only.
    scale:
        ``"difference"`` (default) or ``"log-ratio"``.
    posthoc:
        The pairwise test of :func:`~mlflow_recsys.stats.rank_across_datasets`, default ``"wilcoxon-holm"``.
    confidence_level:
        Of the pooled intervals; ``1 - confidence_level`` is the ranks' alpha. Default 0.95.

    Returns
    -------
    StudyVerdict

    Raises
    ------
    ValueError
        If ``results`` is empty, a model lacks a metric or per-user values, two models of one dataset scored other
        users, or a setting is out of range (as the functions named above raise).
    """
    if not isinstance(results, Mapping) or not results:
        raise ValueError(validation.expected("results", "a mapping dataset -> model -> EvaluationResult", results))
    metrics = validation.metric_keys(metrics)
    alpha = significance_level(validation.number(confidence_level, "confidence_level", above=0, below=1))
    _check_users(results, metrics)
    effects, notes = [], []
    models = list(dict.fromkeys(m for by_model in results.values() for m in by_model))
    for candidate in [m for m in models if m != reference]:
        if reference is None:
            break  # ranks only
        both = {d: by_model for d, by_model in results.items() if reference in by_model and candidate in by_model}
        for metric in metrics:
            pairs = {d: (_values(m[candidate], metric), _values(m[reference], metric)) for d, m in both.items()}
            try:
                pooled = _pooled(pairs, scale, confidence_level)
            except ValueError as exc:  # a log ratio of a mean of 0: this effect alone is not pooled
                notes.append(f"{candidate} vs {reference} on {metric} not pooled: {exc}")
                continue
            if pooled is not None:
                effects.append((candidate, metric, pooled))
    everywhere = [m for m in models if all(m in by_model for by_model in results.values())]
    ranks = []
    if len(results) >= 2 and len(everywhere) >= 2:
        for metric in metrics:
            scores = {m: {d: by_model[m].metrics[metric] for d, by_model in results.items()} for m in everywhere}
            ranks.append((metric, rank_across_datasets(scores, posthoc=posthoc, alpha=alpha)))
    unranked = tuple(m for m in models if m not in everywhere) if ranks else ()
    return StudyVerdict(reference, scale, tuple(effects), tuple(ranks), unranked, tuple(notes))


def _pooled(pairs: Mapping[str, tuple[np.ndarray, np.ndarray]], scale: Scale, level: float) -> MetaAnalysis | None:
    """The meta-analysis of dataset -> (candidate's, reference's per-user values); None with fewer than two."""
    if len(pairs) < 2:
        return None
    effects, errors = {}, {}
    for dataset, (c, b) in pairs.items():
        try:
            effects[dataset], errors[dataset] = paired_effect(c, b, scale)
        except ValueError as exc:
            raise ValueError(f"on {dataset}, {exc}") from None
    return random_effects(effects, errors, confidence_level=level, scale=scale)


def _check_users(results: Mapping[str, Mapping[str, EvaluationResult]], metrics: list[str]) -> None:
    for dataset, by_model in results.items():
        first = None
        for model, result in by_model.items():
            missing = [m for m in metrics if m not in (result.per_user or {})]
            if missing:
                raise ValueError(f"results: {model} on {dataset} holds no per-user values of {missing}")
            if first is None:
                first = (model, result.sample_ids)
            elif not np.array_equal(first[1], result.sample_ids):
                raise ValueError(
                    f"results: {model} and {first[0]} on {dataset} scored other users, or in another order"
                )


def _values(result: EvaluationResult, metric: str) -> np.ndarray:
    assert result.per_user is not None  # _check_users has made sure
    return result.per_user[metric]


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=list(columns))
