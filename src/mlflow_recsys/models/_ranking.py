"""Top-k selection shared by every model, with fold-in exclusion and a fixed tie rule.

Ranking is where nondeterminism would creep in (partition-based selection and unstable sorts order tied scores
arbitrarily), so every model goes through :func:`top_k` and inherits the same rule: score descending, then item index
ascending.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mlflow_recsys import _validation as validation


def top_k(
    scores: np.ndarray,
    k: int,
    exclude: sp.spmatrix | sp.sparray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best items of every row, excluding the given (user, item) pairs.

    Parameters
    ----------
    scores:
        Array of shape ``(n_rows, n_items)``, real dtype; higher is better. ``-inf`` is allowed (the item stays a
        candidate, ranked last); NaN is not. float16/float32 input is compared in float32, any other real dtype in
        float64.
    k:
        Number of items to return per row, an integer >= 1. May exceed ``n_items``; the surplus positions are padding.
    exclude:
        Optional scipy sparse matrix of shape ``(n_rows, n_items)``. Every position holding a nonzero value is never
        returned (fold-in items). Explicitly stored zeros do not exclude.

    Returns
    -------
    indices:
        int64 array ``(n_rows, k)``: item column indices, best first. Ties are ordered by item index ascending. When a
        row has fewer than ``k`` candidate (non-excluded) items, the remaining positions hold ``-1``.
    top_scores:
        float32 array ``(n_rows, k)``: the scores of ``indices``, ``-inf`` at padded positions.

    Raises
    ------
    TypeError
        If ``exclude`` is neither None nor a scipy sparse matrix.
    ValueError
        If ``scores`` is not a 2-D real array or contains NaN, if ``k`` is not an integer >= 1, or if ``exclude`` has a
        different shape from ``scores``.
    """
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores: expected a 2-D array (n_rows, n_items), found shape {scores.shape}")
    if not (np.issubdtype(scores.dtype, np.floating) or np.issubdtype(scores.dtype, np.integer)):
        raise ValueError(f"scores: expected a real-valued array, found dtype {scores.dtype}")
    k = validation.integer(k, "k", minimum=1)
    n_rows, n_items = scores.shape
    if np.issubdtype(scores.dtype, np.floating) and np.isnan(scores).any():
        raise ValueError("scores: expected no NaN values, found at least one")

    work_dtype = np.float32 if scores.dtype in (np.float16, np.float32) else np.float64
    # Ranking ascending on the negated scores; NaN marks excluded items because numpy's partition and sort place NaN
    # after every number, -inf scores included.
    keys = -np.asarray(scores, dtype=work_dtype)
    excluded_rows, excluded_cols = _excluded_positions(exclude, scores.shape)
    keys[excluded_rows, excluded_cols] = np.nan

    take = min(k, n_items)
    indices = np.full((n_rows, k), -1, dtype=np.int64)
    top_scores = np.full((n_rows, k), -np.inf, dtype=np.float32)
    if take == 0 or n_rows == 0:
        return indices, top_scores

    selected = _select_k_smallest(keys, take)
    rows, cols = np.nonzero(selected)
    counts = np.bincount(rows, minlength=n_rows)
    slot = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)

    chosen = np.full((n_rows, take), -1, dtype=np.int64)
    chosen_keys = np.full((n_rows, take), np.nan, dtype=work_dtype)
    chosen[rows, slot] = cols
    chosen_keys[rows, slot] = keys[rows, cols]
    # np.nonzero lists each row's columns in ascending order, so a stable sort leaves tied scores in item index order;
    # padding (NaN) goes last.
    order = np.argsort(chosen_keys, axis=1, kind="stable")
    indices[:, :take] = np.take_along_axis(chosen, order, axis=1)
    padded = indices < 0
    top_scores[:, :take] = np.take_along_axis(scores, np.where(padded[:, :take], 0, indices[:, :take]), axis=1)
    top_scores[padded] = -np.inf
    return indices, top_scores


def _select_k_smallest(keys: np.ndarray, take: int) -> np.ndarray:
    """Boolean mask of each row's ``take`` smallest non-NaN keys, ties resolved toward lower columns.

    Rows with fewer than ``take`` non-NaN keys get all of them. ``argpartition`` alone would pick an arbitrary subset of
    the items tied at the cut, so the cut value is found first and tied items are admitted in column order.
    """
    cut = np.partition(keys, take - 1, axis=1)[:, take - 1 : take]
    short_rows = np.isnan(cut[:, 0])
    below = keys < cut
    at_cut = keys == cut
    missing = take - below.sum(axis=1, keepdims=True)
    selected = below | (at_cut & (np.cumsum(at_cut, axis=1, dtype=np.int32) <= missing))
    if short_rows.any():
        selected[short_rows] = ~np.isnan(keys[short_rows])
    return selected


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
