"""Interaction matrices in one canonical form, checked one way: every function taking a sparse matrix (models, metrics,
evaluation, splits, digests) passes it through :func:`canonical_csr`, so one mistake gets one exception type everywhere:
``TypeError`` for what is not a sparse matrix, ``ValueError`` for a bad shape or values."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp


# Any, not object: sp.issparse is no type guard, so mypy could not narrow an object to a sparse matrix.
def canonical_csr(matrix: Any, name: str = "matrix") -> sp.csr_matrix:
    """A float32 CSR copy of ``matrix``, duplicates summed, stored zeros dropped, column indices sorted; TypeError if
    it is not a scipy sparse matrix, ValueError if it is not 2-D or holds NaN, infinite or negative values."""
    if not sp.issparse(matrix):
        raise TypeError(f"{name}: expected a scipy.sparse CSR matrix, found {type(matrix).__name__}")
    if matrix.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D sparse matrix, found shape {matrix.shape}")
    csr = sp.csr_matrix(matrix, dtype=np.float32, copy=True)
    csr.sum_duplicates()
    if csr.nnz:
        if not np.isfinite(csr.data).all():
            raise ValueError(f"{name}: expected finite values, found NaN or inf")
        if (csr.data < 0).any():
            raise ValueError(f"{name}: expected non-negative values, found minimum {csr.data.min()}")
    csr.eliminate_zeros()
    csr.sort_indices()
    return csr


def binary_csr(rows: Any, cols: Any, shape: tuple[int, int]) -> sp.csr_matrix:
    """The canonical CSR matrix of ``shape`` with a one at each (row, column) pair, a repeated pair stored once."""
    matrix = canonical_csr(sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=shape))
    matrix.data[:] = 1.0
    return matrix
