"""Global item-exposure metrics of top-k lists, and their paired comparison between models.

Two metrics are computed from all users' lists at once, so they have no per-user value to average:

- ``coverage@k``, catalogue coverage: the share of the ``n_items`` items that appear in at least one user's top-k,
  ``|union_u top-k(u)| / n_items`` (Herlocker, Konstan, Terveen & Riedl 2004, ACM TOIS 22(1); Ge, Delgado-Battenfeld &
  Jannach 2010, RecSys).
- ``gini@k``, the Gini index (Gini 1912) of item exposure over all ``n_items`` items, an item never recommended
  counting with exposure 0: with exposures ``c_(1) <= ... <= c_(n)``, ``G = sum_i (2i - n - 1) c_(i) / (n sum_i c_i)``,
  the form RecBole's ``GiniIndex`` computes (Zhao et al. 2021, CIKM) and equal to the mean absolute difference over
  twice the mean, ``sum_i sum_j |c_i - c_j| / (2 n^2 mean(c))``. 0 is equal exposure, ``1 - 1/n`` all exposure on one
  item; used for recommenders' concentration of sales by Fleder & Hosanagar (2009, Management Science 55(5)).

Both are functions of the whole set of users, so the comparison resamples users and recomputes the metrics: the
interval is a paired bootstrap over users (Efron 1979), each replicate drawing ``n`` users with replacement for both
models and counting a user drawn ``w`` times ``w`` times in every item's exposure; the test exchanges each user's two
lists with probability 1/2 (Fisher 1935), which under the null hypothesis that the two models' lists are exchangeable
leaves the joint distribution unchanged. The heavy work runs in :mod:`mlflow_recsys.stats._exposure_kernels`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from mlflow_recsys._validation import expected, integer, line, metric_keys, number, one_of, seed
from mlflow_recsys.stats._corrections import adjust_p_values
from mlflow_recsys.stats._inference import _percentile_interval, exact_enumeration, null_p_value, stream_seed_sequences
from mlflow_recsys.stats._resampling import block_seeds
from mlflow_recsys.stats._results import significance_level
from mlflow_recsys.stats._settings import ALTERNATIVES, MAX_RESAMPLES
from mlflow_recsys.stats._warnings import FewNonzeroUnitsWarning, LowResamplesWarning, warn

__all__ = [
    "EXPOSURE_COLUMNS",
    "EXPOSURE_METRICS",
    "ExposureAnalysis",
    "GlobalMetricComparison",
    "catalogue_coverage",
    "compare_exposure",
    "gini_index",
]

#: The exposure metrics, by the name their keys start with: ``<name>@<k>``.
EXPOSURE_METRICS = ("coverage", "gini")

_KEY = re.compile(r"(coverage|gini)@([1-9][0-9]*)")
#: The interval of every row: the bootstrap replicates' percentiles once their mean is moved onto the estimate.
INTERVAL_METHOD = "percentile, recentred"
#: Fewest users whose two lists differ for an interval worth reading (as for the per-user differences).
FEW_DIFFERING = 30
#: Largest catalogue: item indices are held as int32.
_MAX_ITEMS = 2**31 - 1


@dataclass(frozen=True, eq=False)
class GlobalMetricComparison:
    """One (pair, metric): ``candidate`` against ``baseline`` on a metric computed from every user's list.

    ``difference`` is ``candidate_value - baseline_value`` on all ``n_units`` users (positive: the candidate covers
    more, or concentrates exposure more). ``bootstrap_standard_error`` is the paired bootstrap replicates' SD around
    ``difference`` and ``bootstrap_bias`` their mean minus ``difference``. Coverage counts distinct items, and a
    bootstrap sample holds only about 63% distinct users, so its replicates cover less than the data: the two models
    lose different amounts, and the replicates of a coverage difference can sit wholly to one side of the estimate
    (measured: 188 MovieLens users, coverage@20 +0.212, replicates 0.049 lower on average); the Gini index has a bias of
    the same kind (repeated users concentrate exposure). That offset belongs to the resampling, not to the estimate,
    so ``ci_low`` / ``ci_high`` (``interval_method`` ``"percentile, recentred"``) are the percentiles of the replicates
    moved by ``-bootstrap_bias`` onto the estimate: their spread, around what was measured (one-sided when
    ``alternative`` is). The randomization test has no such bias.
    ``p_value`` is the list-swap randomization test's: ``"randomization (swap lists)"`` (Monte Carlo, ``(1 +
    #extreme) / (B + 1)``) or ``"randomization-exact (swap lists)"`` (all ``2**n_differing`` exchanges enumerated,
    ``#extreme / 2**n_differing``). ``n_differing`` counts the users whose two top-k lists differ as sets: exchanging
    the others changes nothing. A bootstrap replicate in which a model exposes nothing (possible only when few users
    have a list) has an undefined Gini index, NaN, and then so have the interval and its standard error.
    ``adjusted_p_value`` is Holm's (1979) over every row of the call, a family of its own.

    Attributes
    ----------
    bootstrap_distribution:
        float64 ``(n_resamples,)``: the bootstrap replicates of the difference.
    null_distribution:
        float64: the test's null replicates of the difference, ``(n_resamples,)`` or ``(2**n_differing,)`` when
        exact; its first value is the observed difference when exact.
    """

    metric: str
    baseline: str
    candidate: str
    n_units: int
    n_items: int
    n_differing: int
    baseline_value: float
    candidate_value: float
    difference: float
    ci_low: float
    ci_high: float
    confidence_level: float
    interval_method: str
    bootstrap_standard_error: float
    bootstrap_bias: float
    p_value: float
    adjusted_p_value: float
    alternative: str
    test_method: str
    n_resamples: int
    random_state: int | None
    bootstrap_distribution: np.ndarray = field(repr=False)
    null_distribution: np.ndarray = field(repr=False)


#: The columns of :meth:`ExposureAnalysis.to_frame`, in order: every field of a row but its two arrays.
EXPOSURE_COLUMNS = tuple(
    f.name for f in fields(GlobalMetricComparison) if f.name not in ("bootstrap_distribution", "null_distribution")
)


@dataclass(frozen=True, eq=False)
class ExposureAnalysis:
    """Every (candidate, metric) row of one :func:`compare_exposure` call, each against ``reference``."""

    comparisons: tuple[GlobalMetricComparison, ...]
    reference: str
    n_items: int

    def to_frame(self) -> pd.DataFrame:
        """One row per (candidate, metric), columns :data:`EXPOSURE_COLUMNS`."""
        rows = [{c: getattr(r, c) for c in EXPOSURE_COLUMNS} for r in self.comparisons]
        return pd.DataFrame(rows, columns=list(EXPOSURE_COLUMNS))

    def get(self, metric: str, candidate: str) -> GlobalMetricComparison:
        """The row of ``metric`` and ``candidate``; KeyError naming what exists when there is none."""
        for row in self.comparisons:
            if row.metric == metric and row.candidate == candidate:
                return row
        shown = sorted({(r.metric, r.candidate) for r in self.comparisons})
        raise KeyError(f"no row for metric {metric!r} and candidate {candidate!r}; rows: {shown}")


@dataclass(frozen=True)
class _Request:
    """What :func:`compare_exposure` computes, checked: int32 lists cut to the largest k, the metrics as (key, stat
    index, k), and the resampling options."""

    lists: dict[str, np.ndarray]
    n_items: int
    metrics: tuple[tuple[str, int, int], ...]
    reference: str
    n_resamples: int
    confidence_level: float
    alternative: str
    random_state: int | None

    @property
    def cutoffs(self) -> np.ndarray:
        """The distinct cut-offs, ascending: int64 ``(L,)``."""
        return np.array(sorted({k for _, _, k in self.metrics}), dtype=np.int64)


def catalogue_coverage(lists: np.ndarray, *, n_items: int, k: int) -> float:
    """Catalogue coverage at ``k``: the share of the catalogue in at least one user's top-k (Herlocker et al. 2004; Ge,
    Delgado-Battenfeld & Jannach 2010).

    ``|union over users u of top-k(u)| / n_items``, padding (-1) not counted.

    Parameters
    ----------
    lists:
        Integer array ``(n_users, K)``, ``K >= k``: each row a user's item indices in ``[0, n_items)``, best first,
        padded with -1 (no exposure, wherever it stands); no item twice in a row's first ``k``.
    n_items:
        Size of the catalogue (int >= 1): the denominator.
    k:
        Cut-off (int >= 1): only each row's first ``k`` columns count.

    Returns
    -------
    float in ``[0, 1]``.

    Raises
    ------
    TypeError
        If ``lists`` does not hold integers.
    ValueError
        If ``n_items`` or ``k`` is not an integer >= 1, or ``lists`` is not 2-D, has fewer than ``k`` columns or no
        row, holds an index outside ``[-1, n_items)``, or an item twice in a row's first ``k``.
    """
    counts = _exposure(_point_iv(lists, n_items, k), n_items)
    return int(np.count_nonzero(counts)) / n_items


def gini_index(lists: np.ndarray, *, n_items: int, k: int) -> float:
    """Gini index (Gini 1912) of the exposure of all ``n_items`` items in the users' top-k lists.

    With ``c_i`` the number of top-k lists holding item ``i`` (0 for an item never recommended) sorted ascending,
    ``G = sum_i (2i - n - 1) c_(i) / (n sum_i c_i)``, ``n = n_items``: RecBole's ``GiniIndex``, and the mean absolute
    difference ``sum_i sum_j |c_i - c_j| / (2 n^2 mean(c))``. 0 when every item is equally exposed, ``1 - 1/n`` when one
    item takes every slot (Fleder & Hosanagar 2009 measure recommenders' sales concentration so).

    Parameters
    ----------
    lists:
        Integer array ``(n_users, K)``, ``K >= k``: each row a user's item indices in ``[0, n_items)``, best first,
        padded with -1 (no exposure, wherever it stands); no item twice in a row's first ``k``.
    n_items:
        Size of the catalogue (int >= 1): the items the exposure is spread over.
    k:
        Cut-off (int >= 1): only each row's first ``k`` columns count.

    Returns
    -------
    float in ``[0, 1)``.

    Raises
    ------
    TypeError
        If ``lists`` does not hold integers.
    ValueError
        As :func:`catalogue_coverage`, and if the first ``k`` columns hold no item at all (the index is 0/0).
    """
    cut = _point_iv(lists, n_items, k)
    _check_exposed("lists", cut, k)
    return _gini(_exposure(cut, n_items))


def compare_exposure(
    lists: Mapping[str, np.ndarray],
    *,
    n_items: int,
    metrics: str | Sequence[str] = ("coverage@10", "gini@10"),
    reference: str | None = None,
    n_resamples: int = 9999,
    confidence_level: float = 0.95,
    alternative: str = "two-sided",
    random_state: int | None = 0,
) -> ExposureAnalysis:
    """Compare models on catalogue coverage and the Gini index of exposure, each candidate against ``reference``.

    Per (candidate, metric): the difference of the metric on all users, a percentile interval from the paired bootstrap
    over users, recentred on the estimate (Efron 1979; see :class:`GlobalMetricComparison`; each replicate draws ``n``
    users with replacement, the same users for both models, a user drawn twice counting twice in every item's
    exposure), and the p-value of the randomization test that exchanges
    each user's two lists with probability 1/2 (Fisher 1935), recomputing both metrics. The p-value is the share of
    null differences at least as extreme as the observed one: ``(1 + #extreme) / (B + 1)`` over ``B = n_resamples``
    random exchanges, the +1 counting the observed arrangement, itself one of the equally likely arrangements, so the
    p-value is never 0 and the test keeps its level (Phipson & Smyth 2010); or, when there are no more exchanges than
    ``n_resamples`` (``2**n_differing <= B``, at most 20 differing users), ``#extreme / 2**n_differing`` over all of
    them. Two-sided compares ``|null|`` with ``|observed|``; ``"greater"`` asks whether the candidate's value is
    higher, ``"less"`` lower.

    A pair's draws come from ``random_state`` and the two model names (in either order), never from the other pairs or
    metrics: the same seed gives bit-identical results on any number of threads, and exchanging baseline and
    candidate negates every replicate. One draw of users serves every metric of a pair.

    Parameters
    ----------
    lists:
        Model name -> integer array ``(n_users, K)`` of item indices in ``[0, n_items)``, best first, padded with
        -1 (padding is no exposure, wherever it stands), ``K`` at least the largest ``k`` of ``metrics``, no item
        twice in a row's first ``k``. Rows are aligned: row ``u`` is the same user in every array (only the row counts
        can be checked). At least two models; the order is kept.
    n_items:
        Size of the catalogue (int >= 1).
    metrics:
        Keys ``"coverage@<k>"`` and ``"gini@<k>"`` (default ``("coverage@10", "gini@10")``); several ``k`` share one
        pass over the lists.
    reference:
        The baseline of every pair (default: the first model of ``lists``).
    n_resamples:
        Bootstrap replicates and random exchanges B (default 9999, in ``[1, 1,000,000]``).
    confidence_level:
        Level of the interval, strictly between 0 and 1 (default 0.95).
    alternative:
        ``"two-sided"`` (default), ``"greater"`` or ``"less"``; a one-sided test gets a one-sided interval.
    random_state:
        Seed (int >= 0, default 0), or None for fresh entropy.

    Returns
    -------
    ExposureAnalysis
        Rows in the order of the candidates in ``lists``, then of ``metrics``.

    Raises
    ------
    TypeError
        If ``lists`` is not a mapping, or an array does not hold integers.
    ValueError
        If fewer than two models are given, an array is not 2-D, has fewer columns than the largest ``k`` or no row,
        holds an index outside ``[-1, n_items)``, an item twice in a row's first ``k`` (the largest
        k), no item at all with a ``gini`` metric, or another row count than the first; if a metric key is unknown, or
        ``reference``, ``n_items``, ``n_resamples``, ``confidence_level``, ``alternative`` or ``random_state`` is out
        of its range.

    Warns
    -----
    LowResamplesWarning
        When ``n_resamples < 999``.
    """
    options = {"n_resamples": n_resamples, "confidence_level": confidence_level, "alternative": alternative}
    request = _compare_exposure_iv(lists, n_items, metrics, reference, **options, random_state=random_state)
    if request.n_resamples < 999:
        warn(
            f"n_resamples={request.n_resamples} is below 999: the smallest Monte Carlo p-value is "
            f"1/(B+1) = {1 / (request.n_resamples + 1):.4g}, and the interval's ends rest on few replicates",
            LowResamplesWarning,
        )
    rows = [row for name in request.lists if name != request.reference for row in _pair_rows(request, name)]
    few = sorted({(r.candidate, r.n_differing) for r in rows if r.n_differing < FEW_DIFFERING})
    if few:
        shown = ", ".join(f"{name} ({n})" for name, n in few)
        warn(
            f"fewer than {FEW_DIFFERING} users' lists differ from {request.reference}'s for {shown}: the bootstrap "
            "interval rests on too few users to trust, and the swap test's null is coarse; read its exact p",
            FewNonzeroUnitsWarning,
        )
    adjusted = adjust_p_values(np.array([r.p_value for r in rows]), "holm")
    rows = [dataclasses.replace(r, adjusted_p_value=float(a)) for r, a in zip(rows, adjusted, strict=True)]
    return ExposureAnalysis(tuple(rows), request.reference, request.n_items)


def _pair_rows(request: _Request, candidate: str) -> list[GlobalMetricComparison]:
    """The rows of one (reference, candidate) pair, every metric from one bootstrap draw and one set of exchanges."""
    from mlflow_recsys.stats import _exposure_kernels as kernels

    baseline, B = request.reference, request.n_resamples
    stacked = np.stack([request.lists[baseline], request.lists[candidate]])
    cutoffs = request.cutoffs
    band_of = np.searchsorted(cutoffs, np.arange(cutoffs[-1]), side="right").astype(np.int64)
    # Sorted names: the pair draws the same users and exchanges in either order, so swapping the roles negates.
    signs, boots = stream_seed_sequences(request.random_state, "exposure", *sorted((baseline, candidate)))
    boot = kernels.bootstrap_exposure(stacked, band_of, request.n_items, block_seeds(boots, B), B)
    nulls, differing = _nulls(stacked, band_of, request, signs)
    shared: dict = {
        "baseline": baseline,
        "candidate": candidate,
        "n_units": int(stacked.shape[1]),
        "n_items": request.n_items,
        "confidence_level": request.confidence_level,
        "interval_method": INTERVAL_METHOD,
        "alternative": request.alternative,
        "n_resamples": B,
        "random_state": request.random_state,
    }
    rows = []
    for key, stat, k in request.metrics:
        t = int(np.searchsorted(cutoffs, k))
        values = (
            _point_value(stacked[0, :, :k], request.n_items, stat),
            _point_value(stacked[1, :, :k], request.n_items, stat),
        )
        null, exact = nulls[t]
        replicates = (boot[:, t, 1, stat] - boot[:, t, 0, stat], null[:, 1, stat] - null[:, 0, stat])
        estimate = _estimate(request, values, replicates, exact)
        rows.append(GlobalMetricComparison(metric=key, n_differing=int(differing[t].shape[0]), **shared, **estimate))
    return rows


def _estimate(
    request: _Request, values: tuple[float, float], replicates: tuple[np.ndarray, np.ndarray], exact: bool
) -> dict:
    """A row's numbers from the two models' values and the (bootstrap, null) replicates of the difference."""
    boot_d, null_d = replicates
    observed = values[1] - values[0]
    # The scale of null_p_value's tolerance: the values the difference is taken of.
    p = null_p_value(null_d, observed, request.alternative, max(map(abs, values)), monte_carlo=not exact)
    alpha = significance_level(request.confidence_level)
    # Recentred on the estimate: the replicates' offset is the resampling's own (a bootstrap sample repeats users,
    # which covers fewer items and concentrates exposure), not the estimator's, so only their spread is kept.
    bias = float(np.mean(boot_d - observed))
    low, high = _percentile_interval(boot_d - bias, observed, alpha, request.alternative)
    # A difference of two shares (coverage, Gini) lies in [-1, 1]: the recentring may not carry an end past it.
    low = low if math.isinf(low) else max(low, -1.0)  # a one-sided interval's infinite end stays infinite
    high = high if math.isinf(high) else min(high, 1.0)
    return {
        "baseline_value": values[0],
        "candidate_value": values[1],
        "difference": observed,
        "ci_low": low,
        "ci_high": high,
        # Around the estimate, as the comparison's rows are: replicates equal to it give exactly 0.
        "bootstrap_standard_error": float(np.std(boot_d - observed, ddof=1)) if boot_d.shape[0] > 1 else float("nan"),
        "bootstrap_bias": bias,
        "p_value": float(p),
        "adjusted_p_value": float(p),  # until the call's rows are adjusted together
        "test_method": "randomization-exact (swap lists)" if exact else "randomization (swap lists)",
        "bootstrap_distribution": boot_d,
        "null_distribution": null_d,
    }


def _nulls(
    stacked: np.ndarray, band_of: np.ndarray, request: _Request, signs: np.random.SeedSequence
) -> tuple[list[tuple[np.ndarray, bool]], list[np.ndarray]]:
    """Per cut-off, the null replicates ``(R, 2, 2)`` with whether they are the exact enumeration, and the users whose
    lists differ there (int64).

    A cut-off is enumerated exactly when its differing users allow (:func:`exact_enumeration`), over those users only;
    the others share one Monte Carlo draw, whose bits are indexed by user, so a cut-off's numbers do not depend on
    which other cut-offs are requested.
    """
    from mlflow_recsys.stats import _exposure_kernels as kernels

    B, n_items = request.n_resamples, request.n_items
    cutoffs = request.cutoffs
    differing = [np.flatnonzero(_differ(stacked, int(k))).astype(np.int64) for k in cutoffs]
    exact = [exact_enumeration(users.shape[0], B) for users in differing]
    monte_carlo = None
    if not all(exact):
        moving = np.unique(np.concatenate([u for u, e in zip(differing, exact, strict=True) if not e]))
        monte_carlo = kernels.swap_exposure(stacked, band_of, n_items, moving, block_seeds(signs, B), B)
    nulls = []
    for t, users in enumerate(differing):
        drawn = kernels.swap_exposure_exact(stacked, band_of, n_items, users) if exact[t] else monte_carlo
        assert drawn is not None  # drawn above for every cut-off that is not exact
        nulls.append((drawn[:, t], exact[t]))
    return nulls, differing


def _differ(stacked: np.ndarray, k: int) -> np.ndarray:
    """Bool ``(n_users,)``: whether a user's two top-k lists hold different items (padding sorts first)."""
    return np.any(np.sort(stacked[0, :, :k], axis=1) != np.sort(stacked[1, :, :k], axis=1), axis=1)


def _exposure(lists: np.ndarray, n_items: int) -> np.ndarray:
    """int64 ``(n_items,)``: how many of the lists (checked, already cut to k) hold each item."""
    return np.bincount(lists[lists >= 0], minlength=n_items)


def _gini(counts: np.ndarray) -> float:
    """The sorted form of the Gini index, numerator and denominator exact in int64 and divided once, as the kernel
    does, so the observed arrangement of the test reproduces the point value bit for bit."""
    n = counts.shape[0]
    ranks = np.arange(1, n + 1, dtype=np.int64)
    numerator = int(np.sum((2 * ranks - n - 1) * np.sort(counts).astype(np.int64)))
    total = int(counts.sum())
    if total == 0:
        return float("nan")
    return float(np.float64(numerator) / np.float64(n * total))


def _point_value(lists: np.ndarray, n_items: int, stat: int) -> float:
    """Coverage (``stat`` 0) or Gini (1) of lists already cut to k."""
    counts = _exposure(lists, n_items)
    return int(np.count_nonzero(counts)) / n_items if stat == 0 else _gini(counts)


def _point_iv(lists: object, n_items: object, k: object) -> np.ndarray:
    """The checks of :func:`catalogue_coverage` and :func:`gini_index`: ``lists`` as int32 cut to its first ``k``
    columns."""
    items = integer(n_items, "n_items", minimum=1, maximum=_MAX_ITEMS)
    cut = integer(k, "k", minimum=1)
    return _list_iv(lists, "lists", items, cut)[:, :cut]


def _compare_exposure_iv(
    lists: object, n_items: object, metrics: object, reference: object, **options: object
) -> _Request:
    """Every check of :func:`compare_exposure`, in the order of its parameters; the lists as int32 ``(n, k_max)``."""
    if not isinstance(lists, Mapping):
        what = "a mapping of model name to an integer array (n_users, K)"
        raise TypeError(f"lists: expected {what}, found {type(lists).__name__}")
    if len(lists) < 2:
        raise ValueError(expected("lists", "at least 2 models", list(lists)))
    items = integer(n_items, "n_items", minimum=1, maximum=_MAX_ITEMS)
    parsed = _metrics_iv(metrics)
    k_max = max(k for _, _, k in parsed)
    checked: dict[str, np.ndarray] = {}
    for name, array in lists.items():
        where = f"lists[{name!r}]"
        line(name, f"{where} (the model name)")
        checked[name] = _list_iv(array, where, items, k_max)[:, :k_max]
        first, n_users = next(iter(checked.items()))[0], len(next(iter(checked.values())))
        if len(checked[name]) != n_users:
            raise ValueError(
                f"{where}: expected {n_users} rows (users), as lists[{first!r}], found {len(checked[name])}"
            )
        for _, stat, k in parsed:
            if stat == 1:
                _check_exposed(where, checked[name][:, :k], k)
    names = list(checked)
    return _Request(
        lists=checked,
        n_items=items,
        metrics=parsed,
        reference=names[0] if reference is None else str(one_of(reference, "reference", names)),
        n_resamples=integer(options["n_resamples"], "n_resamples", minimum=1, maximum=MAX_RESAMPLES),
        confidence_level=number(options["confidence_level"], "confidence_level", above=0, below=1),
        alternative=str(one_of(options["alternative"], "alternative", ALTERNATIVES)),
        random_state=None if options["random_state"] is None else seed(options["random_state"], "random_state"),
    )


def _metrics_iv(metrics: object, name: str = "metrics") -> tuple[tuple[str, int, int], ...]:
    """The keys as (key, 0 for coverage or 1 for Gini, k); ValueError naming ``name``."""
    keys = metric_keys(metrics, name)  # type: ignore[arg-type]  # checked there
    matches = [_KEY.fullmatch(key) for key in keys]
    unknown = [key for key, m in zip(keys, matches, strict=True) if m is None]
    if unknown:
        raise ValueError(expected(name, "keys 'coverage@<k>' or 'gini@<k>' with an integer k >= 1", unknown))
    return tuple(
        (key, EXPOSURE_METRICS.index(m.group(1)), int(m.group(2)))
        for key, m in zip(keys, matches, strict=True)
        if m is not None
    )


def _list_iv(array: object, where: str, n_items: int, k: int) -> np.ndarray:
    """One model's lists as int32 ``(n_users, K)``, checked; TypeError or ValueError naming ``where``."""
    a = np.asarray(array)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{where}: expected an integer array of item indices, found dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{where}: expected a 2-D array (n_users, K), found shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{where}: expected at least one row (user), found shape {a.shape}")
    if a.shape[1] < k:
        raise ValueError(f"{where}: expected at least {k} columns (k = {k}), found {a.shape[1]}")
    outside = (a < -1) | (a >= n_items)
    if outside.any():
        row, col = np.argwhere(outside)[0]
        raise ValueError(
            f"{where}: expected item indices in [-1, {n_items}) (-1 pads a short list), "
            f"found {a[row, col]} in row {row}"
        )
    # Padding may stand anywhere (an evaluation keeps a list as ranked): it is no exposure wherever it is.
    head = np.sort(a[:, :k], axis=1)
    repeated = (head[:, 1:] == head[:, :-1]) & (head[:, 1:] >= 0)
    if repeated.any():
        row, col = np.argwhere(repeated)[0]
        raise ValueError(
            f"{where}: expected distinct items in each row's first {k} columns, found item {head[row, col]} twice in "
            f"row {row}"
        )
    return a.astype(np.int32)


def _check_exposed(where: str, lists: np.ndarray, k: int) -> None:
    """ValueError when lists cut to k hold no item: the Gini index of no exposure is 0/0."""
    if not (lists >= 0).any():
        raise ValueError(f"{where}: expected at least one item in the first {k} columns (gini@{k}), found only padding")
