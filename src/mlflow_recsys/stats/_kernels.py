"""Compiled resampling kernels (numba).

The kernels fuse drawing and summing, so no ``(B, n)`` matrix of signs or indices is ever held in memory, and spread
blocks of replicates over cores.

Randomness: each block of :data:`BLOCK` replicates has its own xoshiro256** generator (Blackman & Vigna, "Scrambled
linear pseudorandom number generators", ACM TOMS 2021), seeded with four words from a NumPy ``SeedSequence``. A block's
numbers depend only on its seed, never on the thread that ran it, so results are identical on any number of cores.
Bounded integers use Lemire's unbiased multiply-and-reject method (Lemire, "Fast random integer generation in an
interval", ACM TOMACS 2019).

Per metric, each replicate sums in a fixed order, one metric at a time, so a metric's numbers do not depend on which
other metrics are in the call.

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
def _next(s):
    """One 64-bit output of xoshiro256** advancing state ``s`` (uint64[4]) in place."""
    result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
    t = s[1] << np.uint64(17)
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


@numba.njit(inline="always")
def _fill_words(s, words):
    """Fill ``words`` with raw draws: one sign bit per unit, bit ``j % 64`` of word ``j // 64``."""
    for k in range(words.shape[0]):
        words[k] = _next(s)


@numba.njit(inline="always")
def _next32(s, spare):
    """32 random bits, using both halves of each 64-bit draw (``spare`` holds the unused half)."""
    if spare[1]:
        spare[1] = 0
        return spare[0]
    word = _next(s)
    spare[0] = word & _MASK32
    spare[1] = 1
    return word >> np.uint64(32)


@numba.njit(inline="always")
def _fill_indices(s, spare, idx):
    """Fill ``idx`` with unit indices uniform on [0, len(idx)), by Lemire's unbiased method."""
    n = idx.shape[0]
    n64 = np.uint64(n)
    threshold = (np.uint64(4294967296) - n64) % n64
    for j in range(n):
        m = _next32(s, spare) * n64
        while (m & _MASK32) < threshold:
            m = _next32(s, spare) * n64
        idx[j] = m >> np.uint64(32)


@numba.njit(cache=True)
def _nibble_table(d):
    """``table[k, p]`` = sum over the 4 units of group k of +-d, signs given by the bits of p."""
    n = d.shape[0]
    table = np.zeros(((n + 3) // 4, 16), dtype=np.float64)
    for k in range(table.shape[0]):
        for pattern in range(16):
            acc = 0.0
            for t in range(4):
                j = 4 * k + t
                if j < n:
                    if (pattern >> t) & 1:
                        acc += d[j]
                    else:
                        acc -= d[j]
            table[k, pattern] = acc
    return table


@numba.njit(parallel=True, cache=True)
def sign_flip_sums(d, seeds, n_resamples):
    """``sum_j eps_j d[j]`` for each of B random sign vectors eps: float64 ``(B,)``.

    One metric per call (``d`` is 1-D). Signs are read four at a time and looked up in a table of the 16 signed sums of
    each group of four units, so a replicate costs n/4 additions instead of n.
    """
    n = d.shape[0]
    table = _nibble_table(d)
    out = np.empty(n_resamples, dtype=np.float64)
    for block in numba.prange(seeds.shape[0]):
        s = seeds[block].copy()
        words = np.empty((n + 63) // 64, dtype=np.uint64)
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_words(s, words)
            # Four partial sums: independent additions keep the pipeline full.
            acc = np.zeros(4)
            for k in range(table.shape[0]):
                acc[k & 3] += table[k, (words[k >> 4] >> np.uint64(4 * (k & 15))) & np.uint64(15)]
            out[r] = (acc[0] + acc[1]) + (acc[2] + acc[3])
    return out


@numba.njit(parallel=True, cache=True)
def bootstrap_sums(dt, seeds, n_resamples):
    """Per replicate and metric, the sum of ``dt[c, i]`` over n units drawn with replacement: ``(B, m)``.

    ``dt`` is ``(m, n)``, one contiguous row per metric; every metric sees the same draw. The draw is turned into
    per-unit counts, so each metric costs one linear pass instead of n scattered reads.
    """
    m, n = dt.shape
    out = np.empty((n_resamples, m), dtype=np.float64)
    for block in numba.prange(seeds.shape[0]):
        s = seeds[block].copy()
        spare = np.zeros(2, dtype=np.uint64)
        idx = np.empty(n, dtype=np.int32)
        counts = np.empty(n, dtype=np.float64)
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_indices(s, spare, idx)
            counts[:] = 0.0
            for j in range(n):
                counts[idx[j]] += 1.0
            for c in range(m):
                out[r, c] = _dot4(counts, dt[c])
    return out


@numba.njit(inline="always")
def _dot4(a, b):
    """``sum(a * b)`` with four interleaved partial sums, a fixed order on every machine."""
    n = a.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    j = 0
    while j + 4 <= n:
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
        j += 4
    while j < n:
        s0 += a[j] * b[j]
        j += 1
    return (s0 + s1) + (s2 + s3)
