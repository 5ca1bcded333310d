"""What the tests hold the compiled resampling kernels to; not part of the installed package.

The draws the kernels make, written out one replicate at a time from the same generator functions
(:mod:`mlflow_recsys.stats._kernels`), and the plain NumPy definitions of the means they compute from them.
"""

import numba
import numpy as np

from mlflow_recsys.stats._kernels import BLOCK, _fill_indices, _fill_words
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
            _fill_indices(s, idx)
            out[r, :] = idx
    return out


def sign_flip_means_reference(differences: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Plain NumPy sign-flip means for given signs (bool ``(B, n)``, True = +1)."""
    d = np.asarray(differences, dtype=np.float64)
    return np.where(signs, 1.0, -1.0) @ d / d.shape[0]


def bootstrap_means_reference(differences: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Plain NumPy bootstrap means for given unit indices (int ``(B, n)``), summed from the same centres."""
    d = np.asarray(differences, dtype=np.float64)
    centres = column_centres(d)
    return centres + (d - centres)[indices].sum(axis=1) / d.shape[0]
