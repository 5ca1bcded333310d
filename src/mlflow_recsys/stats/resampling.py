"""Resampling kernels: sign-flip null distributions and paired bootstrap replicates.

Both kernels take a matrix of unit differences of shape ``(n_units, n_metrics)``
and draw **one** set of signs (or resampling indices) shared by every column, so
the metrics of one model pair are resampled together. A column's replicates then
depend only on the generator and on that column, never on which other columns
are present. Work is done in chunks bounded by elements (not by replicates), so
peak memory stays flat however many units there are.
"""

from __future__ import annotations

import itertools

import numpy as np

#: Elements (replicates x units) processed per chunk: 2**22 float64 = 32 MiB.
CHUNK_ELEMENTS = 1 << 22

#: Largest number of non-zero units whose 2**n sign patterns are enumerated exactly.
MAX_EXACT_UNITS = 20


def _chunks(n_resamples: int, n_units: int):
    rows = max(1, CHUNK_ELEMENTS // max(n_units, 1))
    for start in range(0, n_resamples, rows):
        yield start, min(rows, n_resamples - start)


def _columnwise_product(matrix: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``matrix @ d`` one column at a time.

    A single matrix product may sum in a different order depending on how many
    columns ``d`` has; column by column, each metric's numbers are bit-identical
    whichever other metrics are in the call.
    """
    return np.stack([matrix @ np.ascontiguousarray(d[:, j]) for j in range(d.shape[1])], axis=1)


def sign_flip_means(differences: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of randomly sign-flipped differences (the randomization null).

    Parameters
    ----------
    differences:
        float64 ``(n_units, n_metrics)``.
    n_resamples:
        Number of sign assignments B.
    rng:
        Source of the uniform random signs.

    Returns
    -------
    float64 ``(n_resamples, n_metrics)``: for each assignment ``eps`` in
    ``{-1, +1}^n``, ``mean(eps * d)`` (Fisher 1935; Smucker et al. 2007).
    """
    d = np.asarray(differences, dtype=np.float64)
    n, m = d.shape
    total = np.array([np.ascontiguousarray(d[:, j]).sum() for j in range(m)])
    out = np.empty((n_resamples, m), dtype=np.float64)
    for start, b in _chunks(n_resamples, n):
        # One random bit per sign; eps = 2 * bit - 1, so sum(eps * d) = 2 * bits @ d - sum(d).
        packed = rng.integers(0, 256, size=(b * n + 7) // 8, dtype=np.uint8)
        bits = np.unpackbits(packed, count=b * n).reshape(b, n)
        out[start : start + b] = (2.0 * _columnwise_product(bits.astype(np.float64), d) - total) / n
    return out


def exact_sign_flip_means(differences: np.ndarray) -> np.ndarray:
    """All ``2**k`` sign-flip means of a 1-D array of differences.

    Zero differences are dropped first (their sign changes nothing) but still
    count in the denominator. Exact enumeration (Fisher 1935) is what the Monte
    Carlo test approximates.

    Parameters
    ----------
    differences:
        float64 ``(n_units,)`` with at most :data:`MAX_EXACT_UNITS` non-zero values.

    Returns
    -------
    float64 ``(2**k,)`` where ``k`` is the number of non-zero differences.

    Raises
    ------
    ValueError
        If more than :data:`MAX_EXACT_UNITS` differences are non-zero.
    """
    d = np.asarray(differences, dtype=np.float64)
    nonzero = d[d != 0]
    k = nonzero.shape[0]
    if k > MAX_EXACT_UNITS:
        raise ValueError(
            f"differences: expected at most {MAX_EXACT_UNITS} non-zero values for exact "
            f"enumeration, found {k}"
        )
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)), dtype=np.float64).reshape(-1, k)
    return signs @ nonzero / d.shape[0]


def bootstrap_means(differences: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of paired bootstrap resamples of the units (Efron 1979).

    Each replicate draws ``n_units`` unit indices uniformly with replacement and
    averages the differences of the drawn units, the same draw for every metric.

    Parameters
    ----------
    differences:
        float64 ``(n_units, n_metrics)``.
    n_resamples:
        Number of bootstrap replicates B.
    rng:
        Source of the resampling indices.

    Returns
    -------
    float64 ``(n_resamples, n_metrics)``.
    """
    d = np.asarray(differences, dtype=np.float64)
    n, m = d.shape
    out = np.empty((n_resamples, m), dtype=np.float64)
    for start, b in _chunks(n_resamples, n):
        idx = rng.integers(0, n, size=(b, n))
        # Counting how often each unit was drawn turns the gather into one product for all metrics.
        flat = (idx + (np.arange(b) * n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
        out[start : start + b] = _columnwise_product(counts, d) / n
    return out
