"""Input validation shared by the models: interaction matrices (scalar settings: :mod:`mlflow_recsys.validation`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def as_interactions(x, name: str, n_items: int | None = None) -> sp.csr_matrix:
    """Validated float32 CSR copy of an interaction matrix with sorted indices.

    Parameters
    ----------
    x:
        scipy sparse matrix of shape ``(n_rows, n_items)`` with finite,
        non-negative values (binary 1.0 by project convention).
    name:
        Argument name used in error messages.
    n_items:
        When given, the required number of columns.

    Raises
    ------
    TypeError
        If ``x`` is not a scipy sparse matrix.
    ValueError
        If ``x`` is not 2-D, has a wrong number of columns, or holds
        non-finite or negative values.
    """
    if not sp.issparse(x):
        raise TypeError(f"{name}: expected a scipy.sparse CSR matrix, found {type(x).__name__}")
    if len(x.shape) != 2:
        raise ValueError(f"{name}: expected a 2-D matrix, found shape {x.shape}")
    if n_items is not None and x.shape[1] != n_items:
        raise ValueError(f"{name}: expected {n_items} columns (the model's item catalogue), found {x.shape[1]}")
    csr = sp.csr_matrix(x, dtype=np.float32, copy=True)
    csr.sum_duplicates()
    csr.sort_indices()
    if csr.nnz:
        if not np.isfinite(csr.data).all():
            raise ValueError(f"{name}: expected finite values, found NaN or inf")
        if (csr.data < 0).any():
            raise ValueError(f"{name}: expected non-negative values, found minimum {csr.data.min()}")
    csr.eliminate_zeros()
    return csr
