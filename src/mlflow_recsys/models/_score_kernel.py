"""Sparse rows times a dense item matrix (numba), the scoring product of the item-item models; imported on first use.

SciPy multiplies a CSR matrix by a dense one row by row on one core, reading a whole row of the dense matrix for every
stored entry: at 5,000 items that is 20 KB per entry, fetched again for every user who has the item. Here the columns
are cut into tiles, one tile per task spread over the cores, and each tile is swept item by item, so a tile's rows of
the dense matrix are read once per batch while the users' partial scores stay in the core's cache. Every score adds
its user's items in ascending item order, each as a product and then a sum (no fused multiply-add), which is the
order and the rounding of SciPy's product on the canonical CSR rows the models score: the scores are bit for bit the
same.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

#: Columns per tile: a tile of a 1,024-user batch's scores (2 MB in float32) stays within one core's L2 cache.
TILE_COLUMNS = 512


def sparse_rows_times_dense(rows: sp.csr_matrix, dense: np.ndarray) -> np.ndarray:
    """``rows @ dense`` for CSR ``rows`` ``(n, n_items)`` with sorted column indices and C-ordered ``dense``
    ``(n_items, m)`` (float32 or float64): an array ``(n, m)`` of ``dense``'s dtype, equal to SciPy's product."""
    by_item = rows.astype(dense.dtype).tocsc()
    by_item.sort_indices()  # users ascending within an item; the sum order is set by the item loop
    return _tiled_product(
        by_item.indptr.astype(np.int64),
        by_item.indices.astype(np.int64),
        by_item.data,
        np.ascontiguousarray(dense),
        rows.shape[0],
    )


@numba.njit(parallel=True, cache=True)
def _tiled_product(item_ptr, users, values, dense, n_rows):
    n_items, n_cols = dense.shape
    width = TILE_COLUMNS  # a module constant: numba compiles it in
    out = np.zeros((n_rows, n_cols), dtype=dense.dtype)
    for tile in numba.prange((n_cols + width - 1) // width):
        start = tile * width
        stop = min(start + width, n_cols)
        for i in range(n_items):
            weights = dense[i, start:stop]
            for p in range(item_ptr[i], item_ptr[i + 1]):
                value = values[p]
                scores = out[users[p], start:stop]
                for c in range(stop - start):
                    scores[c] += value * weights[c]
    return out
