"""Compiled kernels (numba) of the exposure metrics: the paired bootstrap over users and the list-swap randomization
test of catalogue coverage and the Gini index of item exposure.

Every replicate rebuilds both models' exposure counts (int32, one per item) and reads the two metrics off them, so
nothing of size ``(B, n_users)`` is held. Randomness is that of :mod:`mlflow_recsys.stats._kernels`: blocks of
:data:`~mlflow_recsys.stats._kernels.BLOCK` replicates, each with its own xoshiro256** seed, and the same draws per
replicate (``n`` unit indices for the bootstrap, ``ceil(n / 64)`` words of sign bits for the test), so results do not
depend on the number of threads and the tests can replay the draws (``tests/kernel_oracles.py``).

Several cut-offs ``k`` are computed from one pass: column ``j`` of a list falls in *band* ``band_of[j]`` (the number of
requested cut-offs ``<= j``), and the exposure at the ``t``-th cut-off is the sum of bands ``0..t``. Padding (``-1``)
ends a list.

Array layout: ``lists`` is int32 ``(2, n_users, k_max)`` (baseline, candidate); results are float64 ``(R, L, 2, 2)``:
replicate, cut-off, model (0 baseline, 1 candidate), statistic (0 coverage, 1 Gini).

This module is imported on first use only: importing :mod:`mlflow_recsys.stats` stays light.
"""

from __future__ import annotations

import numba
import numpy as np

from mlflow_recsys.stats._kernels import BLOCK, _fill_indices, _fill_words

__all__ = ["bootstrap_exposure", "coverage_and_gini", "swap_exposure", "swap_exposure_exact"]


@numba.njit(cache=True)
def coverage_and_gini(counts, hist):
    """(coverage, Gini) of one exposure vector ``counts`` (int32 ``(n_items,)``, values ``< hist.shape[0]``).

    Gini is ``sum_i (2i - n - 1) c_(i) / (n * sum_i c_i)`` over the ascending counts, NaN when nothing is exposed. The
    counts are bounded integers, so a histogram replaces the sort: a run of ``m`` equal values ``v`` on ascending ranks
    ``r+1..r+m`` adds ``v * (m * (2r + m + 1) - m * (n + 1))``. Numerator and denominator are exact int64; the one
    rounding is the final division. ``hist`` (int32, zeros) is scratch and is left zeroed.
    """
    n_items = counts.shape[0]
    covered = 0
    total = np.int64(0)
    top = 0
    for i in range(n_items):
        v = counts[i]
        if v > 0:
            covered += 1
            total += v
            hist[v] += 1
            top = max(top, v)
    coverage = covered / n_items
    if total == 0:
        return coverage, np.nan
    # The unexposed items hold the lowest ranks and add 0 to the numerator.
    rank = np.int64(n_items - covered)
    numerator = np.int64(0)
    for v in range(1, top + 1):
        m = np.int64(hist[v])
        if m > 0:
            numerator += v * (m * (2 * rank + m + 1) - m * (n_items + 1))
            rank += m
            hist[v] = 0
    return coverage, np.float64(numerator) / np.float64(np.int64(n_items) * total)


@numba.njit(cache=True)
def _add_lists(bands, lists, band_of, weights):
    """Add ``weights[u]`` to ``bands[band_of[j], item]`` for each item of each user's list (int32 ``(n, k_max)``)."""
    for u in range(lists.shape[0]):
        w = weights[u]
        if w == 0:
            continue
        for j in range(lists.shape[1]):
            item = lists[u, j]
            if item < 0:
                break
            bands[band_of[j], item] += w


@numba.njit(cache=True)
def _levels(bands, hist, out):
    """``out[t] = (coverage, Gini)`` at each cut-off ``t``; ``bands`` (int32 ``(L, n_items)``) is summed in place."""
    for t in range(bands.shape[0]):
        if t > 0:
            bands[t] += bands[t - 1]
        out[t, 0], out[t, 1] = coverage_and_gini(bands[t], hist)


@numba.njit(cache=True)
def _swap_user(bands, lists, band_of, u):
    """Exchange user ``u``'s lists between the two models' exposure bands (int32 ``(2, L, n_items)``)."""
    for j in range(lists.shape[2]):
        t = band_of[j]
        a = lists[0, u, j]
        b = lists[1, u, j]
        if a >= 0:
            bands[0, t, a] -= 1
            bands[1, t, a] += 1
        if b >= 0:
            bands[0, t, b] += 1
            bands[1, t, b] -= 1


@numba.njit(cache=True)
def _base_bands(lists, band_of, n_items):
    """Both models' exposure bands with every user counted once: int32 ``(2, L, n_items)``."""
    bands = np.zeros((2, band_of[-1] + 1, n_items), dtype=np.int32)
    ones = np.ones(lists.shape[1], dtype=np.int32)
    for side in range(2):
        _add_lists(bands[side], lists[side], band_of, ones)
    return bands


@numba.njit(parallel=True, cache=True)
def bootstrap_exposure(lists, band_of, n_items, seeds, n_resamples):
    """Paired bootstrap (Efron 1979): per replicate, ``n`` users drawn with replacement, the same draw for both models,
    each drawn user's list counted as many times as it was drawn. float64 ``(B, L, 2, 2)``."""
    n = lists.shape[1]
    n_levels = band_of[-1] + 1
    out = np.empty((n_resamples, n_levels, 2, 2), dtype=np.float64)
    for block in numba.prange(seeds.shape[0]):
        s = seeds[block].copy()
        idx = np.empty(n, dtype=np.int32)
        weights = np.empty(n, dtype=np.int32)
        bands = np.empty((n_levels, n_items), dtype=np.int32)
        hist = np.zeros(n + 1, dtype=np.int32)  # an item's exposure is at most the number of draws
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_indices(s, idx, None)
            weights[:] = 0
            for j in range(n):
                weights[idx[j]] += 1
            for side in range(2):
                bands[:] = 0
                _add_lists(bands, lists[side], band_of, weights)
                _levels(bands, hist, out[r, :, side, :])
    return out


@numba.njit(parallel=True, cache=True)
def swap_exposure(lists, band_of, n_items, users, seeds, n_resamples):
    """Randomization null (Fisher 1935): per replicate, each user's two lists are exchanged when its sign bit (bit
    ``u % 64`` of word ``u // 64``, the draw of :func:`~mlflow_recsys.stats._kernels.sign_flip_sums`) is 0. Only
    ``users`` (int64, the users whose lists differ as sets) are visited; the others would change nothing.
    float64 ``(B, L, 2, 2)``."""
    n = lists.shape[1]
    base = _base_bands(lists, band_of, n_items)
    out = np.empty((n_resamples, base.shape[1], 2, 2), dtype=np.float64)
    for block in numba.prange(seeds.shape[0]):
        s = seeds[block].copy()
        words = np.empty((n + 63) // 64, dtype=np.uint64)
        bands = np.empty_like(base)
        hist = np.zeros(n + 1, dtype=np.int32)
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_words(s, words)
            bands[:] = base
            for u in users:
                if (words[u >> 6] >> np.uint64(u & 63)) & np.uint64(1) == np.uint64(0):
                    _swap_user(bands, lists, band_of, u)
            for side in range(2):
                _levels(bands[side], hist, out[r, :, side, :])
    return out


@numba.njit(parallel=True, cache=True)
def swap_exposure_exact(lists, band_of, n_items, users):
    """Every one of the ``2**len(users)`` exchanges of the lists of ``users``: pattern ``p`` exchanges ``users[t]`` when
    bit ``t`` of ``p`` is set, so pattern 0 is the observed arrangement. float64 ``(2**len(users), L, 2, 2)``."""
    n = lists.shape[1]
    base = _base_bands(lists, band_of, n_items)
    n_patterns = 1 << users.shape[0]
    out = np.empty((n_patterns, base.shape[1], 2, 2), dtype=np.float64)
    for block in numba.prange((n_patterns + BLOCK - 1) // BLOCK):
        bands = np.empty_like(base)
        hist = np.zeros(n + 1, dtype=np.int32)
        for p in range(block * BLOCK, min(n_patterns, (block + 1) * BLOCK)):
            bands[:] = base
            for t in range(users.shape[0]):
                if (p >> t) & 1:
                    _swap_user(bands, lists, band_of, users[t])
            for side in range(2):
                _levels(bands[side], hist, out[p, :, side, :])
    return out
