"""How popular each item was in the training data: what the item-side metrics and the popularity slice read."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mlflow_recsys._sparse import canonical_csr

__all__ = ["DEFAULT_HEAD_SHARE", "ItemPopularity", "long_tail_items"]

#: Share of the items that makes the short head (Abdollahpouri et al. 2019 split the catalogue 20/80).
DEFAULT_HEAD_SHARE = 0.2


def long_tail_items(item_popularity: np.ndarray, head_share: float = DEFAULT_HEAD_SHARE) -> np.ndarray:
    """Which items are in the long tail: bool ``(n_items,)`` from ``item_popularity``, float or int ``(n_items,)``,
    each item's interactions in the training data.

    The short head is the ``ceil(head_share * n_items)`` most popular items (ties broken by the lower item index), the
    long tail the rest: the head/tail split of Abdollahpouri, Burke & Mobasher ("Managing popularity bias in recommender
    systems with personalized re-ranking", FLAIRS 2019), by share of items. RecBole's ``tail_ratio`` is the tail's
    share instead (``tail_ratio = 1 - head_share``) and counts only items seen in training.

    Raises
    ------
    ValueError
        If ``item_popularity`` is not 1-D, finite and >= 0, or ``head_share`` is not in (0, 1).
    """
    pop = np.asarray(item_popularity, dtype=np.float64)
    if pop.ndim != 1 or pop.size == 0 or not np.all(np.isfinite(pop)) or np.any(pop < 0):
        raise ValueError(f"item_popularity: expected a 1-D array of finite counts >= 0, found shape {pop.shape}")
    if not (isinstance(head_share, numbers.Real) and not isinstance(head_share, bool) and 0 < head_share < 1):
        raise ValueError(f"head_share: expected a share of the items in (0, 1), found {head_share!r}")
    n_head = int(np.ceil(head_share * pop.size))
    order = np.lexsort((np.arange(pop.size), -pop))  # most popular first, lower index first among ties
    tail = np.ones(pop.size, dtype=bool)
    tail[order[:n_head]] = False
    return tail


@dataclass(frozen=True)
class ItemPopularity:
    """Each item's popularity among the training users.

    Attributes
    ----------
    counts:
        int64 ``(n_items,)``: how many training users interacted with each item (``phi(i)`` of Abdollahpouri et al.
        2019).
    n_users:
        Number of training users (``U``, the denominator of an item's self-information).
    head_share:
        Share of the items in the short head (default 0.2); :attr:`long_tail` is the rest.

    ValueError (from the constructor) if ``counts`` is not a 1-D array of integers >= 0, ``n_users`` is not a positive
    int at least the largest count, or ``head_share`` is not in (0, 1).
    """

    counts: np.ndarray
    n_users: int
    head_share: float = DEFAULT_HEAD_SHARE

    #: bool ``(n_items,)``: the items outside the short head (:func:`long_tail_items`), derived from the counts.
    long_tail: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts)
        if counts.ndim != 1 or counts.size == 0 or not np.issubdtype(counts.dtype, np.integer):
            raise ValueError(
                f"counts: expected a non-empty 1-D array of integer counts >= 0, found dtype {counts.dtype} "
                f"shape {counts.shape}"
            )
        if np.any(counts < 0):
            first = int(np.flatnonzero(counts < 0)[0])
            raise ValueError(f"counts: expected counts >= 0, found {counts[first]} for item {first}")
        if isinstance(self.n_users, bool) or not isinstance(self.n_users, numbers.Integral) or self.n_users < 1:
            raise ValueError(f"n_users: expected a positive int, found {self.n_users!r}")
        if int(counts.max()) > self.n_users:
            raise ValueError(f"n_users: expected at least the largest count {int(counts.max())}, found {self.n_users}")
        object.__setattr__(self, "counts", counts.astype(np.int64, copy=False))
        object.__setattr__(self, "n_users", int(self.n_users))
        object.__setattr__(self, "long_tail", long_tail_items(counts, self.head_share))

    @property
    def n_items(self) -> int:
        """Number of items in the catalogue."""
        return int(self.counts.size)

    @classmethod
    def from_interactions(cls, x_train: sp.spmatrix, *, head_share: float = DEFAULT_HEAD_SHARE) -> ItemPopularity:
        """Popularity from a training matrix, sparse ``(n_users, n_items)`` whose stored nonzeros are interactions:
        an item's count is the number of users with a nonzero in its column. TypeError if it is not a scipy sparse
        matrix; ValueError if it holds negative or non-finite values."""
        csr = canonical_csr(x_train, "x_train")
        counts = np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.int64)
        return cls(counts, max(int(csr.shape[0]), 1), head_share)
