"""Compiled resampling kernels (numba).

The kernels fuse drawing and summing, so no ``(B, n)`` matrix of signs or indices is ever held in memory, and spread
blocks of replicates over cores.

Randomness: each block of :data:`BLOCK` replicates has its own two xoshiro256** generators (Blackman & Vigna,
"Scrambled linear pseudorandom number generators", ACM TOMS 2021), their eight state words drawn by SplitMix64 from one
word of a NumPy ``SeedSequence`` (:func:`~mlflow_recsys.stats._resampling.block_seeds`): signs come from the first,
unit indices from both in turn. A block's numbers depend only on its seed, never on the thread that ran it, so results
are identical on any number of cores.
Bounded integers use Lemire's unbiased multiply-and-reject method (Lemire, "Fast random integer generation in an
interval", ACM TOMACS 2019).

A kernel takes units in segments (the strata of a slice; the whole comparison is one segment), each drawing from its
own seeds. Per column, each replicate sums in a fixed order into the column's own accumulator, so a column's numbers
depend neither on which other columns are in the call nor on the other segments.

This module is imported on first use only: importing :mod:`mlflow_recsys.stats` stays light.
"""

from __future__ import annotations

import numba
import numpy as np

#: Replicates per independently seeded block.
BLOCK = 64

_MASK32 = np.uint64(0xFFFFFFFF)


@numba.njit(inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@numba.njit(inline="always")
def _next(s, o):
    """One 64-bit output of the xoshiro256** generator whose state is ``s[o:o + 4]``, advanced in place."""
    result = _rotl(s[o + 1] * np.uint64(5), 7) * np.uint64(9)
    t = s[o + 1] << np.uint64(17)
    s[o + 2] ^= s[o]
    s[o + 3] ^= s[o + 1]
    s[o + 1] ^= s[o + 2]
    s[o] ^= s[o + 3]
    s[o + 2] ^= t
    s[o + 3] = _rotl(s[o + 3], 45)
    return result


@numba.njit(inline="always")
def _fill_words(s, words):
    """Fill ``words`` with raw draws of the first generator: one sign bit per unit, bit ``j % 64`` of word
    ``j // 64``."""
    for k in range(words.shape[0]):
        words[k] = _next(s, 0)


@numba.njit(inline="always")
def _fill_indices(s, idx):
    """Fill ``idx`` with unit indices uniform on [0, len(idx)), by Lemire's unbiased method.

    The candidates are the 32-bit halves of one output of each of the block's two generators in turn (low half, then
    high; first generator, then second), taken in that order and skipped when rejected; those left when ``idx`` is full
    are dropped. Two independent generators keep two dependency chains in flight: drawing from one was bound by the
    latency of its state update.
    """
    n = idx.shape[0]
    n64 = np.uint64(n)
    threshold = (np.uint64(4294967296) - n64) % n64
    j = 0
    while j < n:
        first, second = _next(s, 0), _next(s, 4)
        m0, m1 = (first & _MASK32) * n64, (first >> np.uint64(32)) * n64
        m2, m3 = (second & _MASK32) * n64, (second >> np.uint64(32)) * n64
        if j + 4 <= n and min(m0 & _MASK32, m1 & _MASK32, m2 & _MASK32, m3 & _MASK32) >= threshold:
            idx[j], idx[j + 1] = m0 >> np.uint64(32), m1 >> np.uint64(32)
            idx[j + 2], idx[j + 3] = m2 >> np.uint64(32), m3 >> np.uint64(32)
            j += 4
            continue
        for m in (m0, m1, m2, m3):  # a rejection, or the last few units: one candidate at a time
            if j < n and (m & _MASK32) >= threshold:
                idx[j] = m >> np.uint64(32)
                j += 1


#: Columns summed together: one replicate adds four adjacent columns of a unit at once, so kernels take column
#: counts padded to a multiple of this (``_segment_rows`` in :mod:`mlflow_recsys.stats._resampling`).
LANES = 4


@numba.njit(cache=True)
def nibble_tables(rows, starts):
    """Per group of four units of a segment, the 16 signed sums of their rows: ``(table, group_starts)``.

    ``rows`` is ``(n, m)`` with segment ``s`` at rows ``starts[s]:starts[s + 1]``; ``table[g, p, c]`` is the sum over
    the (up to) four units of group ``g`` of ``+-rows[unit, c]``, the sign of the ``t``-th unit given by bit ``t`` of
    ``p``; segment ``s`` owns groups ``group_starts[s]:group_starts[s + 1]``, so no group spans two segments.
    """
    m = rows.shape[1]
    n_segments = starts.shape[0] - 1
    group_starts = np.zeros(n_segments + 1, dtype=np.int64)
    for seg in range(n_segments):
        group_starts[seg + 1] = group_starts[seg] + (starts[seg + 1] - starts[seg] + 3) // 4
    table = np.zeros((group_starts[n_segments], 16, m), dtype=np.float64)
    for seg in range(n_segments):
        for g in range(group_starts[seg + 1] - group_starts[seg]):
            for pattern in range(16):
                for t in range(4):
                    unit = starts[seg] + 4 * g + t
                    if unit < starts[seg + 1]:
                        sign = 1.0 if (pattern >> t) & 1 else -1.0
                        for c in range(m):
                            table[group_starts[seg] + g, pattern, c] += sign * rows[unit, c]
    return table, group_starts


@numba.njit(parallel=True, cache=True)
def sign_flip_sums(table, group_starts, seeds, n_resamples):
    """Per replicate, segment and column, ``sum_j eps_j rows[j, c]`` over the segment's units for a random sign
    vector ``eps``: float64 ``(B, S, m)``, from the tables of :func:`nibble_tables`.

    ``seeds`` is uint64 ``(S, n_blocks, 8)`` (:func:`~mlflow_recsys.stats._resampling.block_seeds`; signs use the first
    generator's four words): each segment draws its own signs (unit ``j`` of a segment takes bit ``j % 64``
    of word ``j // 64``), shared by its columns. Signs are read four at a time and each group's signed sums looked up,
    so a replicate costs n/4 additions of :data:`LANES` columns at once instead of n per column. A column sums its
    groups in order into its own accumulator, so its value depends on neither the other columns nor the thread.
    """
    m = table.shape[2]
    n_segments, n_blocks = seeds.shape[0], seeds.shape[1]
    out = np.empty((n_resamples, n_segments, m), dtype=np.float64)
    for task in numba.prange(n_segments * n_blocks):
        seg, block = task // n_blocks, task % n_blocks
        s = seeds[seg, block].copy()
        first, n_groups = group_starts[seg], group_starts[seg + 1] - group_starts[seg]
        words = np.empty((4 * n_groups + 63) // 64, dtype=np.uint64)
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_words(s, words)
            for c in range(0, m, LANES):
                a0 = a1 = a2 = a3 = 0.0
                for k in range(n_groups):
                    sums = table[first + k, (words[k >> 4] >> np.uint64(4 * (k & 15))) & np.uint64(15)]
                    a0 += sums[c]
                    a1 += sums[c + 1]
                    a2 += sums[c + 2]
                    a3 += sums[c + 3]
                out[r, seg, c], out[r, seg, c + 1], out[r, seg, c + 2], out[r, seg, c + 3] = a0, a1, a2, a3
    return out


@numba.njit(parallel=True, cache=True)
def bootstrap_sums(rows, starts, seeds, n_resamples):
    """Per replicate, segment and column, the sum of ``rows[i, c]`` over the segment's ``n_s`` units drawn with
    replacement from it: float64 ``(B, S, m)``.

    ``rows`` is ``(n, m)``, ``m`` a multiple of :data:`LANES`, segment ``s`` at rows ``starts[s]:starts[s + 1]``;
    ``seeds`` is uint64 ``(S, n_blocks, 8)``, two generators' states a block
    (:func:`~mlflow_recsys.stats._resampling.block_seeds`): each segment draws its own units, shared by its columns.
    Each drawn unit's row is read once and added to :data:`LANES` columns at once. A column adds the drawn units in
    draw order into its own accumulator, so its value depends on neither the other columns nor the thread.
    """
    m = rows.shape[1]
    n_segments, n_blocks = seeds.shape[0], seeds.shape[1]
    out = np.empty((n_resamples, n_segments, m), dtype=np.float64)
    for task in numba.prange(n_segments * n_blocks):
        seg, block = task // n_blocks, task % n_blocks
        s = seeds[seg, block].copy()
        first = starts[seg]
        idx = np.empty(starts[seg + 1] - first, dtype=np.int32)
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_indices(s, idx)
            for c in range(0, m, LANES):
                a0 = a1 = a2 = a3 = 0.0
                for j in range(idx.shape[0]):
                    row = rows[first + idx[j]]
                    a0 += row[c]
                    a1 += row[c + 1]
                    a2 += row[c + 2]
                    a3 += row[c + 3]
                out[r, seg, c], out[r, seg, c + 1], out[r, seg, c + 2], out[r, seg, c + 3] = a0, a1, a2, a3
    return out
