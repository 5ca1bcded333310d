"""The compiled selection behind :func:`~mlflow_recsys.models._ranking.top_k` (numba), imported on first use.

Each row is read once: a heap of the ``k`` best candidates seen so far, worst at its root, so most items cost one
comparison with the root. "Better" is the project's tie rule (higher score, then lower item index), so ties need no
second pass and the result does not depend on the order of the work. Rows run in parallel.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(inline="always")
def _worse(score_a, item_a, score_b, item_b):
    """Whether candidate a ranks after candidate b: a lower score, or the same score and a higher item index."""
    return score_a < score_b or (score_a == score_b and item_a > item_b)


@numba.njit(inline="always")
def _sift_down(scores, items, size, pos):
    """Restore the heap below ``pos`` (each parent ranks after its children: the worst candidate at the root)."""
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and _worse(scores[child + 1], items[child + 1], scores[child], items[child]):
            child += 1
        if not _worse(scores[child], items[child], scores[pos], items[pos]):
            return
        scores[pos], scores[child] = scores[child], scores[pos]
        items[pos], items[child] = items[child], items[pos]
        pos = child


@numba.njit(parallel=True, cache=True)
def top_k_rows(keys, excluded_indptr, excluded_items, take):
    """Per row of ``keys`` ``(n_rows, n_items)`` (float32 or float64, no NaN), the ``take`` best items by the tie rule,
    best first, skipping the row's excluded items (``excluded_items[excluded_indptr[r]:excluded_indptr[r + 1]]``,
    sorted ascending): int64 ``(n_rows, take)``, ``-1`` after the last candidate of a short row."""
    n_rows, n_items = keys.shape
    out = np.full((n_rows, take), -1, dtype=np.int64)
    for r in numba.prange(n_rows):
        row = keys[r]
        scores = np.empty(take, dtype=keys.dtype)
        items = np.empty(take, dtype=np.int64)
        size = 0
        e, e_end = excluded_indptr[r], excluded_indptr[r + 1]
        for j in range(n_items):
            if e < e_end and excluded_items[e] == j:
                e += 1
                continue
            s = row[j]
            if size < take:
                # Grow the heap: place the new candidate at the end and move it up while it ranks after its parent.
                pos = size
                size += 1
                scores[pos], items[pos] = s, j
                while pos > 0:
                    parent = (pos - 1) // 2
                    if not _worse(scores[pos], items[pos], scores[parent], items[parent]):
                        break
                    scores[pos], scores[parent] = scores[parent], scores[pos]
                    items[pos], items[parent] = items[parent], items[pos]
                    pos = parent
            elif _worse(scores[0], items[0], s, j):
                scores[0], items[0] = s, j
                _sift_down(scores, items, size, 0)
        # Empty the heap worst first into the last free slot: the row ends up best first.
        for slot in range(size - 1, -1, -1):
            out[r, slot] = items[0]
            size -= 1
            scores[0], items[0] = scores[size], items[size]
            _sift_down(scores, items, size, 0)
    return out
