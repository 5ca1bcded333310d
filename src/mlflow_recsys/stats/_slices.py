"""Exploratory subgroup analysis: the paired comparison within each stratum of a :class:`~mlflow_recsys.stats.Slice`.

Per model pair, metric and stratum: the mean difference over the stratum's users, its stratified bootstrap interval
(each stratum resamples its own users, reusing the random words of the pair's own bootstrap, so slices add no draws) and
the comparison's test (the sign flips of each stratum from a stream of its own, named by the seed, the slice, the
stratum and the pair). Per slice, p-values are adjusted by Holm (1979) over every row of the slice (its strata, pairs
and metrics), a family of its own that never touches the primary one. Per pair, metric and slice, Cochran's (1954) Q
tests whether the strata share one mean difference: ``Q = sum_s w_s (m_s - m_w)^2`` with ``w_s = n_s / var_s`` (the
inverse squared standard error of the stratum mean), ``m_w`` the ``w``-weighted mean, against chi-square with ``S - 1``
degrees of freedom; ``I^2 = max(0, (Q - df) / Q)`` (Higgins & Thompson 2002) is the share of the spread beyond chance.
Every result here is exploratory: strata were not what the study was powered for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
import scipy.special

from mlflow_recsys.stats._corrections import adjust_p_values
from mlflow_recsys.stats._inference import (
    _Column,
    _interval,
    _test,
    exact_enumeration,
    stream_seed_sequences,
)
from mlflow_recsys.stats._pairing import PairedDifferences
from mlflow_recsys.stats._resampling import centred_means, stratum_sign_flip_means
from mlflow_recsys.stats._results import significance_level
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.stats._strata import MIN_STRATUM_USERS, Slice

__all__ = [
    "HETEROGENEITY_COLUMNS",
    "SLICE_COLUMNS",
    "SliceAnalysis",
    "StratumComparison",
    "slice_analysis",
    "slice_members",
]


@dataclass(frozen=True)
class StratumComparison:
    """One (slice, stratum, pair, metric): the paired comparison over the stratum's users, exploratory.

    ``difference`` is the candidate's mean minus the baseline's over the ``n_units`` users of the stratum; ``ci_low`` /
    ``ci_high`` its bootstrap interval (``interval_method``); ``p_value`` the comparison's test on those users, and
    ``adjusted_p_value`` Holm's within ``family`` (``"slice:<name>"``, ``family_size`` rows).
    """

    slice: str
    stratum: str
    metric: str
    baseline: str
    candidate: str
    n_units: int
    wins: int
    ties: int
    losses: int
    baseline_mean: float
    candidate_mean: float
    difference: float
    ci_low: float
    ci_high: float
    confidence_level: float
    interval_method: str
    p_value: float
    adjusted_p_value: float
    family: str
    family_size: int
    significant: bool
    test_method: str
    exploratory: bool = True


@dataclass(frozen=True)
class Heterogeneity:
    """Cochran's Q across the strata of one slice, for one pair and metric; ``q``, ``p_value`` and ``i_squared`` are
    NaN when some stratum's differences have no spread (its weight would be infinite)."""

    slice: str
    metric: str
    baseline: str
    candidate: str
    n_strata: int
    q: float
    df: int
    p_value: float
    i_squared: float
    exploratory: bool = True


SLICE_COLUMNS = tuple(f.name for f in fields(StratumComparison))
HETEROGENEITY_COLUMNS = tuple(f.name for f in fields(Heterogeneity))


@dataclass(frozen=True, eq=False)
class SliceAnalysis:
    """Every stratum row and heterogeneity test of a comparison's slices, with each slice's definition."""

    strata: tuple[StratumComparison, ...]
    heterogeneity: tuple[Heterogeneity, ...]
    definitions: dict[str, str]

    def to_frame(self) -> pd.DataFrame:
        """One row per (slice, stratum, pair, metric), columns :data:`SLICE_COLUMNS`."""
        return pd.DataFrame([vars(r) for r in self.strata], columns=list(SLICE_COLUMNS))

    def heterogeneity_frame(self) -> pd.DataFrame:
        """One row per (slice, pair, metric), columns :data:`HETEROGENEITY_COLUMNS`."""
        return pd.DataFrame([vars(r) for r in self.heterogeneity], columns=list(HETEROGENEITY_COLUMNS))


def check_slices(slices: object) -> tuple[Slice, ...]:
    """``slices`` as a tuple of distinct :class:`Slice` objects; TypeError or ValueError naming ``slices``."""
    if isinstance(slices, Slice):
        slices = (slices,)
    if not isinstance(slices, Sequence) or isinstance(slices, str):
        raise TypeError(f"slices: expected a sequence of Slice objects, found {type(slices).__name__}")
    for i, s in enumerate(slices):
        if not isinstance(s, Slice):
            raise TypeError(f"slices[{i}]: expected a Slice, found {type(s).__name__}")
    names = [s.name for s in slices]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"slices: expected each slice name once, found {repeated} twice")
    return tuple(slices)


def slice_members(slices: Sequence[Slice], ids: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Per slice, each of its non-empty strata's compared users as indices into ``ids`` (the comparison's users):
    checked before any resampling.

    Raises
    ------
    ValueError
        If a compared user has no stratum, the compared users all fall in one stratum (nothing to set apart, and no
        heterogeneity to test), or a stratum holds fewer than :data:`MIN_STRATUM_USERS` users.
    """
    out = []
    for sl in slices:
        codes = sl.unit_strata(ids)
        members = {s: np.flatnonzero(codes == k) for k, s in enumerate(sl.strata)}
        members = {s: idx for s, idx in members.items() if idx.size}
        if len(members) < 2:
            raise ValueError(
                f"slices[{sl.name!r}]: expected the compared users in at least 2 strata, found them all in "
                f"{next(iter(members))!r}"
            )
        small = {s: int(idx.size) for s, idx in members.items() if idx.size < MIN_STRATUM_USERS}
        if small:
            raise ValueError(
                f"slices[{sl.name!r}]: expected at least {MIN_STRATUM_USERS} compared users per stratum, found {small}"
            )
        out.append(members)
    return out


def slice_analysis(
    pairs: Sequence[PairedDifferences],
    slices: Sequence[Slice],
    members: Sequence[dict[str, np.ndarray]],
    stratum_means: Sequence[Sequence[np.ndarray]],
    settings: ComparisonSettings,
) -> SliceAnalysis:
    """The stratum rows of every pair on every slice (its strata's users ``members``, from :func:`slice_members`),
    Holm-adjusted within each slice, and their heterogeneity. ``stratum_means[p][k]`` holds pair ``p``'s stratified
    bootstrap means on slice ``k``, float64 ``(B, S_k, n_metrics)``, drawn with the pair's own bootstrap
    (:func:`~mlflow_recsys.stats._inference.pair_rows`)."""
    alpha = significance_level(settings.confidence_level)
    rows: list[StratumComparison] = []
    tests: list[Heterogeneity] = []
    for k, (sl, strata) in enumerate(zip(slices, members, strict=True)):
        slice_rows: list[dict] = []
        for pair, means in zip(pairs, stratum_means, strict=True):
            pair_rows, pair_tests = _pair_on_slice(pair, sl.name, strata, means[k], settings)
            slice_rows.extend(pair_rows)
            tests.extend(pair_tests)
        adjusted = adjust_p_values(np.array([r["p_value"] for r in slice_rows]), "holm")
        size = len(slice_rows)  # the family is the whole slice: every stratum, pair and metric
        rows.extend(
            StratumComparison(**r, adjusted_p_value=float(p), significant=bool(p <= alpha), family_size=size)
            for r, p in zip(slice_rows, adjusted, strict=True)
        )
    return SliceAnalysis(tuple(rows), tuple(tests), {sl.name: sl.definition for sl in slices})


def _pair_on_slice(
    pair: PairedDifferences,
    name: str,
    members: dict[str, np.ndarray],
    boot: np.ndarray,
    settings: ComparisonSettings,
) -> tuple[list[dict], list[Heterogeneity]]:
    """One pair's stratum rows on one slice (unadjusted, :func:`_stratum_row`), and per metric the heterogeneity of
    its strata."""
    B = settings.n_resamples
    groups = list(members.values())
    streams = [
        stream_seed_sequences(settings.random_state, "slice", name, stratum, pair.baseline, pair.candidate)
        for stratum in members
    ]
    # Per stratum, each metric's differences (and each side's values) contiguous: every statistic below reads them
    # by metric, and a contiguous row sums exactly as the 1-D column it replaces.
    parts = [np.ascontiguousarray(pair.differences[idx].T) for idx in groups]
    sides = [np.ascontiguousarray(pair.sides[:, idx].transpose(0, 2, 1)) for idx in groups]
    n_nonzero = np.array([np.count_nonzero(d, axis=1) for d in parts])
    # One kernel call flips every stratum's signs, each from its own stream: a stratum's null ignores the other strata.
    monte_carlo = settings.test_method == "randomization" and not all(exact_enumeration(k, B) for k in n_nonzero.flat)
    flips = (
        stratum_sign_flip_means(pair.differences, groups, [signs for signs, _ in streams], B) if monte_carlo else None
    )
    out = []
    for s, stratum in enumerate(members):
        d, side_means = parts[s], sides[s].mean(axis=2)
        estimates = centred_means(d.T)
        for j, metric in enumerate(pair.metrics):
            col = _Column(
                metric=metric,
                label=f"{pair.candidate} vs {pair.baseline} on {metric}, {name} = {stratum}",
                baseline=pair.baseline,
                baseline_mean=float(side_means[0, j]),
                candidate_mean=float(side_means[1, j]),
                d=d[j],
                observed=float(estimates[j]),
                n_nonzero=int(n_nonzero[s, j]),
                boot=boot[:, s, j],
                flips=None if flips is None else flips[:, s, j],
                seeds=streams[s],
                sides=sides[s][:, j],
            )
            out.append(_stratum_row(col, name, stratum, pair.candidate, settings))
    means = np.array([d.mean(axis=1) for d in parts])
    variances = np.array([d.var(axis=1, ddof=1) / d.shape[1] for d in parts])
    tests = [
        Heterogeneity(
            name, metric, pair.baseline, pair.candidate, len(groups), *cochran_q(means[:, j], variances[:, j])
        )
        for j, metric in enumerate(pair.metrics)
    ]
    return out, tests


def _stratum_row(col: _Column, name: str, stratum: str, candidate: str, settings: ComparisonSettings) -> dict:
    """One stratum's row from its column, less what the adjustment over the slice sets: the comparison's test and
    interval on the stratum's users."""
    _, p, method = _test(col, settings)
    low, high, interval_method = _interval(col, significance_level(settings.confidence_level), settings)
    wins, losses, n = int((col.d > 0).sum()), int((col.d < 0).sum()), int(col.d.shape[0])
    return {
        "slice": name,
        "stratum": stratum,
        "metric": col.metric,
        "baseline": col.baseline,
        "candidate": candidate,
        "n_units": n,
        "wins": wins,
        "ties": n - wins - losses,
        "losses": losses,
        "baseline_mean": col.baseline_mean,
        "candidate_mean": col.candidate_mean,
        "difference": col.observed,
        "ci_low": low,
        "ci_high": high,
        "confidence_level": float(settings.confidence_level),
        "interval_method": interval_method,
        "p_value": float(p),
        "family": f"slice:{name}",
        "test_method": method,
    }


def cochran_q(means: np.ndarray, variances: np.ndarray) -> tuple[float, int, float, float]:
    """Cochran's (1954) Q of estimates ``means`` with sampling ``variances`` (float ``(S,)``, S >= 2) -> (Q, df = S - 1,
    chi-square p-value, I^2 of Higgins & Thompson 2002); NaN but df when a variance is 0 (an infinite weight)."""
    m = np.asarray(means, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    df = int(m.shape[0]) - 1
    if np.any(v <= 0) or df < 1:
        return float("nan"), df, float("nan"), float("nan")
    w = 1.0 / v
    pooled = float(np.sum(w * m) / np.sum(w))
    q = float(np.sum(w * (m - pooled) ** 2))
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    # scipy.stats.chi2.sf computes chdtrc(df, q); the ufunc skips the distribution object's argument handling.
    return q, df, float(scipy.special.chdtrc(df, q)), i2
