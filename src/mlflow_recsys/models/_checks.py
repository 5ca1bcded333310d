"""Input validation shared by the models: interaction matrices and config fields."""

from __future__ import annotations

import math
import numbers

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


def positive_int(value, field: str) -> int:
    """``value`` as int if it is an integer >= 1, else ValueError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{field}: expected an integer >= 1, found {value!r}")
    return int(value)


def positive_float(value, field: str) -> float:
    """``value`` as float if it is a finite real > 0, else ValueError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{field}: expected a finite number > 0, found {value!r}")
    return float(value)


def non_negative_float(value, field: str) -> float:
    """``value`` as float if it is a finite real >= 0, else ValueError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{field}: expected a finite number >= 0, found {value!r}")
    return float(value)
