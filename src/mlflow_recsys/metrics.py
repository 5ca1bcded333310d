"""Top-N ranking metrics with binary relevance, computed per evaluation row.

Every metric works from one boolean *hit matrix*: ``hits[i, r]`` says whether the item at rank ``r + 1`` of row ``i`` is
one of that row's target items. Building it once and deriving all metrics from it keeps the metrics consistent with each
other and lets :mod:`mlflow_recsys.evaluation` share the work between metrics.

Notation used in the definitions: ``R_u`` is the set of target items of a row, ``r`` a 1-based rank, ``hits@k`` the
number of target items among the top ``k``. Rows with no targets have no defined value; ``compute`` returns NaN for them
and the evaluation leaves them out (trec_eval and ranx score such a query 0).

Where a metric shares its name with trec_eval, ranx or ir_measures it has their value, except ``map@k``, which divides
by ``min(k, |R_u|)`` where they divide by ``|R_u|``; the metrics reference page has the table, and
``tests/test_metrics_crosscheck.py`` checks it user by user.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from mlflow_recsys import _validation as validation
from mlflow_recsys._item_popularity import ItemPopularity, long_tail_items
from mlflow_recsys._sparse import canonical_csr

__all__ = [
    "APLT",
    "ARP",
    "ItemMetric",
    "ItemPopularity",
    "Novelty",
    "long_tail_items",
    "CalibratedRecall",
    "HitRate",
    "KEY_PATTERN",
    "MAP",
    "MAX_CUTOFF",
    "METRIC_CLASSES",
    "MRR",
    "NDCG",
    "Precision",
    "RankingMetric",
    "Recall",
    "has_better_side",
    "higher_is_better",
    "hit_matrix",
    "metric_from_key",
    "parse_metric_keys",
    "relevant_counts",
    "value_range",
]

#: The form of a metric key, ``name@k``: the metric's name, then its cutoff.
KEY_PATTERN = re.compile(r"^([a-z_]+)@([0-9]+)$")


#: The largest cutoff: a top-N list is read in batches of users × k ranks, so k bounds the memory an evaluation takes
#: (10,000 ranks of 1,024 users hold 80 MB of item indices), and no top-N protocol looks further.
MAX_CUTOFF = 10_000


def _validate_k(k: object, name: str = "k") -> int:
    return validation.integer(k, name, minimum=1, maximum=MAX_CUTOFF)


def _validate_ks(k: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(k, numbers.Integral) and not isinstance(k, bool):
        return (_validate_k(k),)
    if isinstance(k, (str, bytes)) or not isinstance(k, Iterable):
        raise ValueError(f"k: expected a positive int or a sequence of them, found {k!r}")
    ks = tuple(dict.fromkeys(_validate_k(value) for value in k))
    if not ks:
        raise ValueError("k: expected at least one cutoff, found an empty sequence")
    return ks


def _validate_rankings(rankings: object, min_columns: int, n_items: int) -> np.ndarray:
    arr = np.asarray(rankings)
    if arr.ndim != 2:
        raise ValueError(f"rankings: expected a 2-D array (n, k), found shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"rankings: expected an integer array, found dtype {arr.dtype}")
    if arr.shape[1] < min_columns:
        raise ValueError(f"rankings: expected at least {min_columns} columns (the largest k), found {arr.shape[1]}")
    arr = arr[:, :min_columns].astype(np.int64, copy=False)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -1 or hi >= n_items:
            raise ValueError(
                f"rankings: expected item indices in [0, {n_items}) or -1 padding, found values in [{lo}, {hi}]"
            )
        # a repeated item would be counted as several hits and push recall above 1
        ordered = np.sort(arr, axis=1)
        repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
        if repeated.any():
            row = int(np.flatnonzero(repeated.any(axis=1))[0])
            raise ValueError(f"rankings: expected distinct items within each row, found a repeated item in row {row}")
    return arr


def relevant_counts(targets: sp.spmatrix) -> np.ndarray:
    """Number of target items per row, ``|R_u|``: an int64 array of shape ``(n,)`` for a sparse ``targets`` of shape
    ``(n, n_items)`` whose stored nonzeros are the targets.

    Raises
    ------
    TypeError
        If ``targets`` is not a scipy sparse matrix.
    ValueError
        If it is not 2-D or holds NaN, infinite or negative values.
    """
    return np.diff(canonical_csr(targets, "targets").indptr).astype(np.int64)


def hit_matrix(rankings: np.ndarray, targets: sp.spmatrix, k: int) -> np.ndarray:
    """Which of the top ``k`` (a positive int) ranked items are targets: a bool array of shape ``(n, k)``.

    ``rankings`` is an integer array of shape ``(n, >= k)`` whose ``[i, r]`` is the item index at rank ``r + 1`` of row
    ``i`` (``-1`` is padding, never a hit); ``targets`` a sparse matrix of shape ``(n, n_items)`` whose stored nonzeros
    are the targets.

    Raises
    ------
    ValueError
        If ``k`` is not a positive int, ``rankings`` is not a 2-D integer array with at least ``k`` columns, holds
        indices outside ``[-1, n_items)`` or repeats an item within a row, or ``targets`` is not 2-D with as many rows
        as ``rankings`` and finite non-negative values.
    TypeError
        If ``targets`` is not a scipy sparse matrix.
    """
    return _checked_hits(rankings, targets, _validate_k(k))[0]


def _checked_hits(rankings: Any, targets: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`hit_matrix`, :func:`relevant_counts`) once the arguments are checked."""
    arr, csr = _paired(rankings, targets)
    return _hits(_validate_rankings(arr, k, csr.shape[1]), csr), np.diff(csr.indptr)


def _paired(rankings: Any, targets: Any) -> tuple[np.ndarray, sp.csr_matrix]:
    """``rankings`` as a 2-D array and ``targets`` as canonical CSR with as many rows, else ValueError."""
    arr = np.asarray(rankings)
    if arr.ndim != 2:
        raise ValueError(f"rankings: expected a 2-D array (n, k), found shape {arr.shape}")
    csr = canonical_csr(targets, "targets")
    if csr.shape[0] != arr.shape[0]:
        raise ValueError(f"targets: expected {arr.shape[0]} rows to match rankings, found {csr.shape[0]}")
    return arr, csr


def _hits(rankings: np.ndarray, csr: sp.csr_matrix) -> np.ndarray:
    from mlflow_recsys._hits_kernel import hits_in_rows

    if csr.nnz == 0 or rankings.size == 0:
        return np.zeros(rankings.shape, dtype=bool)
    return hits_in_rows(rankings, csr.indptr, csr.indices)


def _row_sums(values: np.ndarray) -> np.ndarray:
    # A running sum adds each row left to right, so a row's value does not depend on how many rows are evaluated
    # together; BLAS products and pairwise sums may reorder the additions with the batch shape and change the last bit.
    return np.cumsum(values, axis=1)[:, -1]


class RankingMetric:
    """Base class: a ranking metric evaluated at one or more cutoffs ``k``.

    ``k`` is a positive int or a sequence of them (duplicates dropped, order kept). Subclasses set ``name``,
    ``_formula`` and ``_source`` and implement ``_values`` (per-row values for one cutoff from the hit matrix); one
    whose values can leave ``[0, 1]`` sets ``value_range`` too. ValueError if ``k`` is not a positive int or a
    non-empty sequence of positive ints.
    """

    name: ClassVar[str] = ""
    #: The definition after ``name@k: `` (``{k}`` stands for the cutoff) and its source, in parentheses after it.
    _formula: ClassVar[str] = ""
    _source: ClassVar[str] = ""
    #: Closed interval holding every defined per-row value. Each metric here is a 0/1 indicator, 1/rank, or hits over a
    #: denominator no smaller than the hits can reach (ranked items are distinct), so all of them lie in [0, 1].
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    #: Whether a higher value is the better one: True for accuracy; None where neither side is (a list's popularity).
    higher_is_better: ClassVar[bool | None] = True

    def __init__(self, k: int | Sequence[int]):
        self.ks: tuple[int, ...] = _validate_ks(k)

    @property
    def keys(self) -> list[str]:
        """Metric keys, one per cutoff, e.g. ``["recall@20", "recall@50"]``."""
        return [f"{self.name}@{k}" for k in self.ks]

    @property
    def max_k(self) -> int:
        """Largest cutoff: the number of ranked columns ``compute`` needs."""
        return max(self.ks)

    @property
    def definitions(self) -> dict[str, str]:
        """Metric key -> one-line exact definition including its source."""
        return {
            f"{self.name}@{k}": f"{self.name}@{k}: {self._formula.format(k=k)}; binary relevance ({self._source})"
            for k in self.ks
        }

    def compute(self, rankings: np.ndarray, targets: sp.spmatrix) -> dict[str, np.ndarray]:
        """Per-row values for every cutoff: metric key -> float64 array of shape ``(n,)``, NaN for rows without targets.

        ``rankings`` is an integer array of shape ``(n, >= max_k)``, item indices best first, ``-1`` padding (never a
        hit; extra columns are ignored); ``targets`` a sparse matrix of shape ``(n, n_items)`` whose stored nonzeros are
        the relevant items (binary relevance).

        Raises
        ------
        ValueError
            If ``rankings`` is not a 2-D integer array with at least ``max_k`` columns, holds indices outside
            ``[-1, n_items)`` or repeats an item within a row, or ``targets`` is not 2-D with as many rows.
        TypeError
            If ``targets`` is not a scipy sparse matrix.
        """
        return self.from_hits(*_checked_hits(rankings, targets, self.max_k))

    def from_hits(self, hits: np.ndarray, n_relevant: np.ndarray) -> dict[str, np.ndarray]:
        """Per-row values from ``hits``, a bool array of shape ``(n, >= max_k)`` as :func:`hit_matrix` returns, and
        ``n_relevant``, an int array of ``|R_u|`` of shape ``(n,)``: metric key -> float64 array of shape ``(n,)``, NaN
        where ``n_relevant`` is 0. ValueError if ``hits`` is not 2-D with at least ``max_k`` columns or ``n_relevant``
        does not have one entry per row."""
        hits = np.asarray(hits, dtype=bool)
        n_relevant = np.asarray(n_relevant, dtype=np.int64)
        if hits.ndim != 2 or hits.shape[1] < self.max_k:
            raise ValueError(f"hits: expected a 2-D array with at least {self.max_k} columns, found shape {hits.shape}")
        if n_relevant.shape != (hits.shape[0],):
            raise ValueError(f"n_relevant: expected shape ({hits.shape[0]},), found {n_relevant.shape}")
        empty = n_relevant == 0
        out: dict[str, np.ndarray] = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for key, k in zip(self.keys, self.ks, strict=True):
                values = np.asarray(self._values(hits[:, :k], n_relevant, k), dtype=np.float64)
                values[empty] = np.nan
                out[key] = values
        return out

    def _values(self, hits: np.ndarray, n_relevant: np.ndarray, k: int) -> np.ndarray:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.ks == other.ks

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.ks))

    def __repr__(self) -> str:
        k = self.ks[0] if len(self.ks) == 1 else list(self.ks)
        return f"{type(self).__name__}({k!r})"


_HITS_AT = "hits@{k} = number of R_u items in the top {k}"


class Recall(RankingMetric):
    """Recall at k: ``hits@k / |R_u|`` (standard IR; Manning, Raghavan & Schütze 2008).

    Can stay below 1 even for a perfect ranking when ``|R_u| > k``; see :class:`CalibratedRecall` for the variant that
    cannot. Equal to trec_eval's ``recall_k`` and ranx's ``recall@k``.
    """

    name = "recall"
    _formula = "hits@{k} / |R_u|, " + _HITS_AT
    _source = "standard IR recall; Manning, Raghavan & Schütze 2008"

    def _values(self, hits, n_relevant, k):
        return hits.sum(axis=1) / n_relevant


class CalibratedRecall(RankingMetric):
    """Recall at k normalised by what is reachable: ``hits@k / min(k, |R_u|)``.

    Source: Liang, Krishnan, Hoffman & Jebara 2018, "Variational Autoencoders for Collaborative Filtering" (WWW). A
    perfect ranking scores 1. No counterpart in trec_eval or ranx: ``calibrated_recall@k * min(k, |R_u|)`` equals their
    ``recall@k * |R_u|`` (both are ``hits@k``).
    """

    name = "calibrated_recall"
    _formula = "hits@{k} / min({k},|R_u|), " + _HITS_AT
    _source = "Liang et al. 2018, VAE-CF"

    def _values(self, hits, n_relevant, k):
        return hits.sum(axis=1) / np.minimum(k, n_relevant)


class Precision(RankingMetric):
    """Precision at k: ``hits@k / k`` (standard IR; Manning, Raghavan & Schütze 2008).

    The denominator is ``k`` even when the ranking is padded with ``-1``.
    """

    name = "precision"
    _formula = "hits@{k} / {k}, " + _HITS_AT
    _source = "standard IR precision; Manning, Raghavan & Schütze 2008"

    def _values(self, hits, n_relevant, k):
        return hits.sum(axis=1) / float(k)


class HitRate(RankingMetric):
    """Hit rate at k: 1 if any target is in the top k, else 0.

    Source: Deshpande & Karypis 2004, "Item-based top-N recommendation algorithms" (ACM TOIS).
    """

    name = "hit_rate"
    _formula = "1 if hits@{k} >= 1 else 0, " + _HITS_AT
    _source = "Deshpande & Karypis 2004"

    def _values(self, hits, n_relevant, k):
        return hits.any(axis=1).astype(np.float64)


class NDCG(RankingMetric):
    """Normalised discounted cumulative gain at k with binary relevance.

    ``DCG = sum_{r<=k, hit} 1/log2(r+1)``; the ideal DCG puts ``min(k, |R_u|)`` targets at the top, so
    ``IDCG = sum_{r<=min(k,|R_u|)} 1/log2(r+1)`` and a perfect ranking scores 1. Source: Järvelin & Kekäläinen 2002,
    "Cumulated gain-based evaluation of IR techniques" (ACM TOIS).
    """

    name = "ndcg"
    _formula = "sum_{{r<={k}, hit}} 1/log2(r+1) / sum_{{r<=min({k},|R_u|)}} 1/log2(r+1)"
    _source = "Järvelin & Kekäläinen 2002"

    def _values(self, hits, n_relevant, k):
        discounts = 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))
        dcg = _row_sums(np.where(hits, discounts, 0.0))
        ideal_by_count = np.concatenate(([0.0], np.cumsum(discounts)))
        return dcg / ideal_by_count[np.minimum(k, n_relevant)]


class MRR(RankingMetric):
    """Reciprocal rank of the first hit within the top k, 0 without a hit.

    Averaged over rows this is the mean reciprocal rank. Source: Voorhees 1999, "The TREC-8 Question Answering Track
    Report" (TREC-8).
    """

    name = "mrr"
    _formula = "1/r for the smallest hit rank r<={k}, 0 if no hit"
    _source = "Voorhees 1999, TREC-8 QA"

    def _values(self, hits, n_relevant, k):
        first = hits.argmax(axis=1)
        return np.where(hits.any(axis=1), 1.0 / (first + 1.0), 0.0)


class MAP(RankingMetric):
    """Average precision truncated at k, normalised by ``min(k, |R_u|)``.

    ``AP@k = sum_{r<=k, hit} (hits@r / r) / min(k, |R_u|)``; the ``min`` makes a perfect ranking score 1 when
    ``|R_u| > k``. Averaged over rows this is MAP@k. Source: average precision as in Manning, Raghavan & Schütze 2008,
    "Introduction to Information Retrieval", ch. 8, truncated at k.

    Not the same number as trec_eval's ``map_cut_k`` (ir_measures ``AP@k``) or ranx's ``map@k``, which divide the same
    sum by ``|R_u|``: per row, ``ours * min(k, |R_u|) == theirs * |R_u|``, so the two agree when ``|R_u| <= k`` and ours
    is ``|R_u| / k`` times theirs otherwise. The ``min(k, |R_u|)`` normaliser is RecBole's (Zhao et al. 2021, CIKM);
    with ``|R_u|`` a user with more targets than ``k`` could score at most ``k / |R_u|``.
    """

    name = "map"
    _formula = "sum_{{r<={k}, hit}} (hits@r / r) / min({k},|R_u|), hits@r = number of R_u items in the top r"
    _source = "truncated average precision; Manning, Raghavan & Schütze 2008"

    def _values(self, hits, n_relevant, k):
        hit_float = hits.astype(np.float64)
        precision_at_r = np.cumsum(hit_float, axis=1) / np.arange(1, k + 1, dtype=np.float64)
        return _row_sums(precision_at_r * hit_float) / np.minimum(k, n_relevant)


class ItemMetric(RankingMetric):
    """Base class of the item-side metrics: a value of each list from its items' training popularity, whatever the
    targets.

    Per row, the mean of ``_item_value`` over the items present among the top ``k`` (``-1`` padding is no item); a list
    with no item has no such mean: NaN (a 0 would read as the least popular list there is, and an evaluation refuses
    it). They read the ranked items, so they come from :meth:`from_lists` (or an evaluation given ``item_popularity``),
    not from a hit matrix.
    """

    value_range = (0.0, float("inf"))
    # More popular or more novel lists are not better in themselves: what a study wants of them is its own call.
    higher_is_better = None

    @property
    def definitions(self) -> dict[str, str]:
        """Metric key -> one-line exact definition including its source."""
        return {
            f"{self.name}@{k}": f"{self.name}@{k}: {self._formula.format(k=k)}; training popularity ({self._source})"
            for k in self.ks
        }

    def from_hits(self, hits: np.ndarray, n_relevant: np.ndarray) -> dict[str, np.ndarray]:
        """Not defined: TypeError (an item-side metric reads the ranked items; see :meth:`from_lists`)."""
        raise TypeError(f"{self.keys[0]}: an item-side metric reads the ranked items, not hits: call from_lists")

    def from_lists(self, rankings: np.ndarray, popularity: ItemPopularity) -> dict[str, np.ndarray]:
        """Per-row values for every cutoff: metric key -> float64 array of shape ``(n,)``.

        ``rankings`` is an integer array of shape ``(n, >= max_k)``, item indices best first, ``-1`` padding;
        ``popularity`` the :class:`~mlflow_recsys.metrics.ItemPopularity` of the training data the model was fit on.
        ValueError if ``rankings`` is not such an array over ``popularity.n_items`` items (distinct within a row);
        TypeError if ``popularity`` is not an ``ItemPopularity``.
        """
        if not isinstance(popularity, ItemPopularity):
            raise TypeError(f"popularity: expected an ItemPopularity, found {type(popularity).__name__}")
        return self._from_checked(_validate_rankings(rankings, self.max_k, popularity.n_items), popularity)

    def _from_checked(self, arr: np.ndarray, popularity: ItemPopularity) -> dict[str, np.ndarray]:
        """:meth:`from_lists` of lists already checked (an evaluation checks them once, for every metric)."""
        per_item = self._item_value(popularity)
        out: dict[str, np.ndarray] = {}
        for key, k in zip(self.keys, self.ks, strict=True):
            items = arr[:, :k]
            present = items >= 0
            n_present = present.sum(axis=1)
            total = _row_sums(np.where(present, per_item[np.where(present, items, 0)], 0.0))
            out[key] = np.divide(total, n_present, out=np.full(total.shape, np.nan), where=n_present > 0)
        return out

    def _item_value(self, popularity: ItemPopularity) -> np.ndarray:
        raise NotImplementedError


class ARP(ItemMetric):
    """Average recommendation popularity at k: the mean training popularity ``phi(i)`` (users who interacted with
    ``i``) of the listed items, ``sum_{i in L_u} phi(i) / |L_u|``.

    Source: Abdollahpouri, Burke & Mobasher 2019, "Managing popularity bias in recommender systems with personalized
    re-ranking" (FLAIRS). Counts, not shares, as there; RecBole's ``AveragePopularity`` is the same number.
    """

    name = "arp"
    _formula = "sum_{{i in L_u}} phi(i) / |L_u|, L_u = the items of the top {k}, phi(i) = training users of i"
    _source = "Abdollahpouri et al. 2019"

    def _item_value(self, popularity):
        return popularity.counts.astype(np.float64)


class APLT(ItemMetric):
    """Average percentage of long-tail items at k: the share of the listed items outside the short head,
    ``|L_u ∩ tail| / |L_u|`` (:attr:`ItemPopularity.long_tail`: the ``ceil(head_share * n_items)`` most popular items
    are the head).

    Source: Abdollahpouri, Burke & Mobasher 2019, "Managing popularity bias in recommender systems with personalized
    re-ranking" (FLAIRS). RecBole's ``TailPercentage`` gives the same share with its ``tail_ratio = 1 - head_share``.
    """

    name = "aplt"
    _formula = "|L_u ∩ long tail| / |L_u|, L_u = the items of the top {k}, head = the ceil(share·n_items) most popular"
    _source = "Abdollahpouri et al. 2019"
    value_range = (0.0, 1.0)

    def _item_value(self, popularity):
        return popularity.long_tail.astype(np.float64)


class Novelty(ItemMetric):
    """Novelty at k: the mean self-information of the listed items, ``sum_{i in L_u} -log2(phi(i) / U) / |L_u|`` in
    bits, ``phi(i)`` the item's training users and ``U`` the number of training users.

    Source: Zhou et al. 2010, "Solving the apparent diversity-accuracy dilemma of recommender systems" (PNAS). An item
    no training user had would carry infinite information; it counts as seen once (``log2 U`` bits), the most any seen
    item carries.
    """

    name = "novelty"
    _formula = (
        "sum_{{i in L_u}} -log2(max(phi(i),1) / U) / |L_u| bits, L_u = the items of the top {k}, U = training users"
    )
    _source = "Zhou et al. 2010"

    def _item_value(self, popularity):
        return -np.log2(np.maximum(popularity.counts, 1) / popularity.n_users)


METRIC_CLASSES: dict[str, type[RankingMetric]] = {
    cls.name: cls for cls in (Recall, CalibratedRecall, NDCG, MRR, MAP, Precision, HitRate, ARP, APLT, Novelty)
}
"""Metric name (the part of a key before ``@``) -> metric class."""


def _split_key(key: object) -> tuple[type[RankingMetric], int]:
    if not isinstance(key, str):
        raise ValueError(f"key: expected a string of the form 'name@k', found {key!r}")
    match = KEY_PATTERN.match(key)
    if match is None:
        raise ValueError(f"key: expected the form 'name@k' (e.g. 'ndcg@100'), found {key!r}")
    name, k = match.group(1), int(match.group(2))
    if name not in METRIC_CLASSES:
        raise ValueError(
            f"key: unknown metric name {name!r} in {key!r}; known names: {', '.join(sorted(METRIC_CLASSES))}"
        )
    return METRIC_CLASSES[name], _validate_k(k, f"the cutoff of {key!r}")


def value_range(key: str) -> tuple[float, float] | None:
    """Closed interval of the per-row values of metric ``key``, e.g. ``(0.0, 1.0)`` for ``"ndcg@100"``.

    Returns None for a string that is not a key of a metric of this package (e.g. one a custom evaluator wrote), whose
    range is unknown here.
    """
    try:
        cls, _ = _split_key(key)
    except ValueError:
        return None
    return cls.value_range


def higher_is_better(key: str) -> bool | None:
    """Whether a higher value of metric ``key`` is the better one: True for the accuracy metrics and for a key this
    package does not define (a custom evaluator's scores are read as such), None for the item-side metrics, whose
    direction is the study's to judge."""
    try:
        cls, _ = _split_key(key)
    except ValueError:
        return True
    return cls.higher_is_better


def has_better_side(key: str) -> bool:
    """Whether one side of metric ``key`` is the better one (:func:`higher_is_better` is not None): a higher score on
    it is an improvement, while on an item-side metric such as ``arp@k`` it is only higher."""
    return higher_is_better(key) is not None


def metric_from_key(key: str) -> RankingMetric:
    """Metric object for one key, e.g. ``metric_from_key("ndcg@100") == NDCG(100)``; ValueError if ``key`` is not of
    the form ``"name@k"``, the name is unknown (the message lists the known names) or ``k`` is not positive."""
    cls, k = _split_key(key)
    return cls(k)


def parse_metric_keys(keys: str | Iterable[str]) -> list[RankingMetric]:
    """Metric objects for a list of keys, one object per metric class.

    Keys of the same class are grouped into one object (so its hit matrix columns are shared); classes appear in order
    of their first key, cutoffs in the order given; duplicate keys are dropped. A single string is treated as one key.

    Example: ``["ndcg@100", "recall@20", "ndcg@10"]`` -> ``[NDCG([100, 10]), Recall(20)]``. ValueError if ``keys`` is
    empty or any key is malformed or unknown (see :func:`metric_from_key`).
    """
    if isinstance(keys, str):
        keys = [keys]
    grouped: dict[type[RankingMetric], list[int]] = {}
    for key in keys:
        cls, k = _split_key(key)
        ks = grouped.setdefault(cls, [])
        if k not in ks:
            ks.append(k)
    if not grouped:
        raise ValueError("keys: expected at least one metric key, found none")
    return [cls(ks) for cls, ks in grouped.items()]
