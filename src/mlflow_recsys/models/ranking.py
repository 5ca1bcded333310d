"""Top-k selection shared by every model, with fold-in exclusion and a fixed tie rule.

Ranking is the one place where nondeterminism could creep in (``argpartition``
and unstable sorts order tied scores arbitrarily), so every model goes through
:func:`top_k` and inherits the same rule: score descending, then item index
ascending.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

_INDEX_BITS = 32
_INDEX_MASK = np.uint64((1 << _INDEX_BITS) - 1)
_EXCLUDED_KEY = np.uint64(np.iinfo(np.uint64).max)


def top_k(
    scores: np.ndarray,
    k: int,
    exclude: sp.spmatrix | sp.sparray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best items of every row, excluding the given (user, item) pairs.

    Parameters
    ----------
    scores:
        Array of shape ``(n_rows, n_items)``, real dtype; higher is better.
        ``-inf`` is allowed (the item stays a candidate, ranked last); NaN is not.
        float32 input is ranked as is; any other real dtype is ranked in float64.
    k:
        Number of items to return per row, an integer >= 1. May exceed
        ``n_items``; the surplus positions are padding.
    exclude:
        Optional scipy sparse matrix of shape ``(n_rows, n_items)``. Every
        position holding a nonzero value is never returned (fold-in items).
        Explicitly stored zeros do not exclude.

    Returns
    -------
    indices:
        int64 array ``(n_rows, k)``: item column indices, best first. Ties are
        ordered by item index ascending. When a row has fewer than ``k``
        candidate (non-excluded) items, the remaining positions hold ``-1``.
    top_scores:
        float32 array ``(n_rows, k)``: the scores of ``indices``, ``-inf`` at
        padded positions.

    Raises
    ------
    TypeError
        If ``exclude`` is neither None nor a scipy sparse matrix.
    ValueError
        If ``scores`` is not a 2-D real array, contains NaN, has 2**32 or more
        columns, if ``k`` is not an integer >= 1, or if ``exclude`` has a
        different shape from ``scores``.
    """
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores: expected a 2-D array (n_rows, n_items), found shape {scores.shape}")
    if not (np.issubdtype(scores.dtype, np.floating) or np.issubdtype(scores.dtype, np.integer)):
        raise ValueError(f"scores: expected a real-valued array, found dtype {scores.dtype}")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k: expected an integer >= 1, found {k!r}")
    k = int(k)
    n_rows, n_items = scores.shape
    if n_items >= (1 << _INDEX_BITS) - 1:
        raise ValueError(f"scores: expected fewer than 2**32 - 1 columns, found {n_items}")
    if np.issubdtype(scores.dtype, np.floating) and np.isnan(scores).any():
        raise ValueError("scores: expected no NaN values, found at least one")

    excluded_rows, excluded_cols = _excluded_positions(exclude, scores.shape)

    if scores.dtype == np.float32:
        indices = _rank_float32(scores, k, excluded_rows, excluded_cols)
    else:
        indices = _rank_generic(scores.astype(np.float64, copy=False), k, excluded_rows, excluded_cols)

    padded = indices < 0
    safe = np.where(padded, 0, indices)
    top_scores = np.take_along_axis(scores, safe, axis=1).astype(np.float32, copy=False) if n_items else (
        np.zeros(safe.shape, dtype=np.float32)
    )
    top_scores = np.where(padded, np.float32(-np.inf), top_scores).astype(np.float32, copy=False)
    return indices, top_scores


def _excluded_positions(exclude, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    if exclude is None:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if not sp.issparse(exclude):
        raise TypeError(f"exclude: expected a scipy sparse matrix or None, found {type(exclude).__name__}")
    if exclude.shape != shape:
        raise ValueError(f"exclude: expected shape {shape} like scores, found {exclude.shape}")
    rows, cols = sp.coo_matrix(exclude).nonzero()
    return rows.astype(np.int64, copy=False), cols.astype(np.int64, copy=False)


def _rank_float32(scores: np.ndarray, k: int, ex_rows: np.ndarray, ex_cols: np.ndarray) -> np.ndarray:
    """Rank by one unique uint64 key per entry so that ``argpartition`` cannot reorder ties.

    The high 32 bits are an order-reversing image of the float32 score, the low
    32 bits the item index, hence ascending key = score descending, index
    ascending, and all keys of a row are distinct.
    """
    n_rows, n_items = scores.shape
    # Adding +0.0 turns -0.0 into +0.0 so the two zeros tie, as they compare equal.
    bits = (scores + np.float32(0.0)).view(np.uint32)
    negative = (bits >> np.uint32(31)).astype(bool)
    ascending = np.where(negative, ~bits, bits | np.uint32(0x80000000))
    descending = (~ascending).astype(np.uint64)
    keys = (descending << np.uint64(_INDEX_BITS)) | np.arange(n_items, dtype=np.uint64)[None, :]
    if ex_rows.size:
        keys[ex_rows, ex_cols] = _EXCLUDED_KEY

    take = min(k, n_items)
    if take < n_items:
        chosen = np.partition(keys, take - 1, axis=1)[:, :take]
    else:
        chosen = keys
    chosen = np.sort(chosen, axis=1)

    indices = np.full((n_rows, k), -1, dtype=np.int64)
    idx = (chosen & _INDEX_MASK).astype(np.int64)
    indices[:, :take] = np.where(chosen == _EXCLUDED_KEY, -1, idx)
    return indices


def _rank_generic(scores: np.ndarray, k: int, ex_rows: np.ndarray, ex_cols: np.ndarray) -> np.ndarray:
    """Full stable sort: slower, but exact for float64 where the packed key does not fit."""
    n_rows, n_items = scores.shape
    negated = -(scores + 0.0)
    excluded = np.zeros(scores.shape, dtype=bool)
    if ex_rows.size:
        excluded[ex_rows, ex_cols] = True
    # lexsort is stable and sorts by the last key first: excluded last, then score
    # descending; equal keys keep column order, i.e. index ascending.
    order = np.lexsort((negated, excluded), axis=1) if n_items else np.zeros((n_rows, 0), dtype=np.int64)
    take = min(k, n_items)
    order = order[:, :take]
    indices = np.full((n_rows, k), -1, dtype=np.int64)
    indices[:, :take] = np.where(np.take_along_axis(excluded, order, axis=1), -1, order)
    return indices
