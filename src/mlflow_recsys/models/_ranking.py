"""Top-k selection shared by every model, with fold-in exclusion and a fixed tie rule.

Ranking is where nondeterminism would creep in (partition-based selection and unstable sorts order tied scores
arbitrarily), so every model goes through :func:`top_k` and inherits the same rule: score descending, then item index
ascending. The selection itself is compiled (:mod:`mlflow_recsys.models._top_k_kernel`): one pass over each row.
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

    from mlflow_recsys.models._top_k_kernel import top_k_rows

    work_dtype = np.float32 if scores.dtype in (np.float16, np.float32) else np.float64
    keys = np.ascontiguousarray(scores, dtype=work_dtype)
    excluded = _excluded_rows(exclude, scores.shape)
    take = min(k, n_items)
    indices = np.full((n_rows, k), -1, dtype=np.int64)
    top_scores = np.full((n_rows, k), -np.inf, dtype=np.float32)
    if take == 0 or n_rows == 0:
        return indices, top_scores
    indices[:, :take] = top_k_rows(keys, excluded.indptr.astype(np.int64), excluded.indices.astype(np.int64), take)
    padded = indices < 0
    top_scores[:, :take] = np.take_along_axis(scores, np.where(padded[:, :take], 0, indices[:, :take]), axis=1)
    top_scores[padded] = -np.inf
    return indices, top_scores


def _excluded_rows(exclude, shape: tuple[int, int]) -> sp.csr_matrix:
    """The excluded positions as a boolean CSR pattern with each row's columns sorted ascending: one conversion of
    ``exclude`` (none for the CSR rows the models pass), its explicit zeros dropped."""
    if exclude is None:
        return sp.csr_matrix(shape, dtype=bool)
    if not sp.issparse(exclude):
        raise TypeError(f"exclude: expected a scipy sparse matrix or None, found {type(exclude).__name__}")
    if exclude.shape != shape:
        raise ValueError(f"exclude: expected shape {shape} like scores, found {exclude.shape}")
    pattern = sp.csr_matrix(exclude, dtype=bool, copy=True)  # nonzero -> True; a stored zero -> False, dropped next
    pattern.eliminate_zeros()
    pattern.sum_duplicates()  # also sorts each row's columns
    return pattern
