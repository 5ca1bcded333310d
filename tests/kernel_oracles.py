"""What the tests hold the compiled resampling kernels to; not part of the installed package.

The draws the kernels make, written out one replicate at a time from the same generator functions
(:mod:`mlflow_recsys.stats._kernels`), and the plain NumPy definitions of the means they compute from them.
"""

import numba
import numpy as np

from mlflow_recsys.stats._kernels import BLOCK, _fill_indices, _fill_words, _map_eights, _stratum_picks
from mlflow_recsys.stats._resampling import column_centres


@numba.njit(cache=True)
def xoshiro_words(seed, count):
    """``count`` raw outputs of xoshiro256** from ``seed`` (uint64[4])."""
    s = seed.copy()
    out = np.empty(count, dtype=np.uint64)
    _fill_words(s, out)
    return out


@numba.njit(cache=True)
def draw_signs(seeds, n, n_resamples):
    """The signs :func:`~mlflow_recsys.stats._kernels.sign_flip_sums` uses: bool ``(B, n)``, True meaning +1."""
    out = np.empty((n_resamples, n), dtype=np.bool_)
    words = np.empty((n + 63) // 64, dtype=np.uint64)
    for block in range(seeds.shape[0]):
        s = seeds[block].copy()
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_words(s, words)
            for j in range(n):
                out[r, j] = (words[j >> 6] >> np.uint64(j & 63)) & np.uint64(1) == np.uint64(1)
    return out


@numba.njit(cache=True)
def draw_indices(seeds, n, n_resamples):
    """The unit indices :func:`~mlflow_recsys.stats._kernels.bootstrap_sums` uses: int64 ``(B, n)``."""
    out = np.empty((n_resamples, n), dtype=np.int64)
    idx = np.empty(n, dtype=np.int32)
    for block in range(seeds.shape[0]):
        s = seeds[block].copy()
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_indices(s, idx, None)
            out[r, :] = idx
    return out


@numba.njit(cache=True)
def stratum_picks(seed, candidates):
    """:func:`~mlflow_recsys.stats._kernels._stratum_picks` of uint32 ``candidates`` from a block's seed words."""
    s = seed.copy()
    picks = np.empty(candidates.shape[0], dtype=np.int32)
    _stratum_picks(s, candidates, picks)
    return picks


@numba.njit(cache=True)
def map_eights(candidates, n64, picks):
    """:func:`~mlflow_recsys.stats._kernels._map_eights` of uint32 ``candidates`` into int32 ``picks``: the least low
    half; the picks past the last whole eight are left as they were."""
    return _map_eights(candidates, n64, picks)


MASK64, MASK32 = (1 << 64) - 1, (1 << 32) - 1


def xoshiro256starstar(state, count):
    """The generator written out in plain Python integers, from its published definition (Blackman & Vigna 2021)."""
    generator = _Generator(state)
    return [generator() for _ in range(count)]


class _Generator:
    """xoshiro256** in plain Python integers: each call one 64-bit output, the state advanced."""

    def __init__(self, state):
        self.s = [int(x) for x in state]

    def __call__(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & MASK64  # noqa: E731
        out = rotl((s[1] * 5) & MASK64, 7) * 9 & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return out


def replay_bootstrap(seeds, n, strata, n_resamples):
    """The draws of :func:`~mlflow_recsys.stats._kernels.bootstrap_sums` replayed in plain Python from the definitions
    its docstrings give, for units ``n`` and strata ``(position, size)`` (in the kernel's order): int ``(B, n)`` unit
    indices and, per stratum, int ``(B, size)`` picks within it.

    Per replicate, steps of the first two generators give the candidates (low then high 32 bits of the first's output,
    then of the second's) until ``n`` are accepted by Lemire's test for ``n``. Stratum ``(p, m)`` maps candidates ``p``
    to ``p + m - 1`` to ``[0, m)`` by the same multiply; one rejected for ``m`` is replaced by low halves of the third
    generator's outputs until one is accepted.
    """
    indices, picks = [], [[] for _ in strata]
    for block in range(seeds.shape[0]):
        first, second, third = (_Generator(seeds[block, 4 * g : 4 * g + 4]) for g in range(3))
        for _ in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            candidates, drawn = [], []
            while len(drawn) < n:
                a, b = first(), second()
                step = [a & MASK32, a >> 32, b & MASK32, b >> 32]
                candidates += step
                drawn += [(c * n) >> 32 for c in step if (c * n) & MASK32 >= (2**32 - n) % n][: n - len(drawn)]
            indices.append(drawn)
            for t, (position, size) in enumerate(strata):
                row = []
                for c in candidates[position : position + size]:
                    while (c * size) & MASK32 < (2**32 - size) % size:
                        c = third() & MASK32
                    row.append((c * size) >> 32)
                picks[t].append(row)
    return np.array(indices), [np.array(p) for p in picks]


def sign_flip_means_reference(differences: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Plain NumPy sign-flip means for given signs (bool ``(B, n)``, True = +1)."""
    d = np.asarray(differences, dtype=np.float64)
    return np.where(signs, 1.0, -1.0) @ d / d.shape[0]


def bootstrap_means_reference(differences: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Plain NumPy bootstrap means for given unit indices (int ``(B, n)``), summed from the same centres."""
    d = np.asarray(differences, dtype=np.float64)
    centres = column_centres(d)
    return centres + (d - centres)[indices].sum(axis=1) / d.shape[0]
