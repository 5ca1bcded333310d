"""The compiled lookup behind :func:`~mlflow_recsys.metrics.hit_matrix` (numba), imported on first use.

Each ranked item is looked up by binary search among its own row's targets, which a canonical CSR matrix keeps sorted
and unique: about log2 of one user's target count steps per item. One NumPy ``searchsorted`` of every row's
``row * n_items + item`` keys among all rows' took log2 of all users' targets, and was a tenth of an EASE evaluation's
time (it runs twice a batch: on the targets, and on the fold-in to find leaked items).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, cache=True)
def hits_in_rows(rankings, indptr, indices):
    """Whether ``rankings[r, j]`` is among row ``r``'s items ``indices[indptr[r]:indptr[r + 1]]`` (sorted ascending,
    unique): bool ``(n, k)`` for integer ``rankings`` ``(n, k)``; a negative entry (padding) is never a hit."""
    n, k = rankings.shape
    hits = np.zeros((n, k), dtype=np.bool_)
    for r in numba.prange(n):
        first, end = indptr[r], indptr[r + 1]
        if first == end:
            continue
        for j in range(k):
            item = rankings[r, j]
            if item < 0:
                continue
            low, high = first, end
            while low < high:
                middle = (low + high) >> 1
                if indices[middle] < item:
                    low = middle + 1
                else:
                    high = middle
            hits[r, j] = low < end and indices[low] == item
    return hits
