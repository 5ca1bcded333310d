"""Resampling kernels: sign-flip null distributions and paired bootstrap replicates.

Both take a matrix of unit differences of shape ``(n_units, n_metrics)`` and draw **one** set of signs (or resampling
indices) shared by every column, so the metrics of one model pair are resampled together. A column's replicates depend
only on the seed and on that column, never on which other columns are present. The work runs in compiled kernels
(:mod:`mlflow_recsys.stats.kernels`) that never hold a ``(B, n)`` matrix; the tests hold them to plain NumPy definitions
on the same draws (``tests/kernel_oracles.py``).

Means (the estimate and every bootstrap replicate) are summed as deviations from a centre that is one of the column's
own values, its lower median, and the centre is added back last. A constant column then sums exact zeros, so each
replicate and the estimate equal the constant exactly, and integer-valued differences (hit rates) keep exact sums;
without this, rounding the sum of ``n`` copies of ``0.1`` put interval ends a few ulps on the wrong side of the
estimate.
"""

from __future__ import annotations

import itertools

import numpy as np

#: Largest number of non-zero units whose 2**n sign patterns are enumerated exactly.
MAX_EXACT_UNITS = 20


def block_seeds(seed_sequence: np.random.SeedSequence, n_resamples: int) -> np.ndarray:
    """Four uint64 seed words per block of replicates, shape ``(ceil(B / BLOCK), 4)``."""
    from mlflow_recsys.stats.kernels import BLOCK

    n_blocks = -(-n_resamples // BLOCK)
    words = seed_sequence.generate_state(n_blocks * 4, dtype=np.uint64).reshape(n_blocks, 4)
    words[(words == 0).all(axis=1)] = 1  # xoshiro's one forbidden state
    return words


def sign_flip_means(differences: np.ndarray, n_resamples: int, seed_sequence: np.random.SeedSequence) -> np.ndarray:
    """Means of randomly sign-flipped differences (the randomization null).

    Parameters
    ----------
    differences:
        float64 ``(n_units, n_metrics)``.
    n_resamples:
        Number of sign assignments B.
    seed_sequence:
        Seeds the per-block generators; the same sequence gives the same signs.

    Returns
    -------
    float64 ``(n_resamples, n_metrics)``: for each assignment ``eps`` in ``{-1, +1}^n`` drawn uniformly, ``mean(eps *
    d)`` (Fisher 1935; Smucker et al. 2007). Every metric sees the same assignments.
    """
    from mlflow_recsys.stats import kernels

    d = np.asarray(differences, dtype=np.float64)
    seeds = block_seeds(seed_sequence, n_resamples)
    # One metric per kernel call: the same seeds give every metric the same signs.
    sums = [kernels.sign_flip_sums(np.ascontiguousarray(d[:, c]), seeds, n_resamples) for c in range(d.shape[1])]
    return np.stack(sums, axis=1) / d.shape[0]


def column_centres(differences: np.ndarray) -> np.ndarray:
    """Lower median of each column, float64 ``(n_metrics,)`` from ``(n_units, n_metrics)``.

    A value of the column itself, so subtracting it is exact for constant and integer-valued columns, and near the mean
    for typical data, so little precision is lost when it is added back.
    """
    d = np.asarray(differences, dtype=np.float64)
    middle = (d.shape[0] - 1) // 2
    return np.partition(d, middle, axis=0)[middle].copy()


def centred_means(differences: np.ndarray) -> np.ndarray:
    """Column means summed as the bootstrap replicates are: float64 ``(n_metrics,)``.

    ``centre + sum(d - centre) / n`` with ``centre`` from :func:`column_centres`; mathematically the plain mean, and the
    point estimate whose rounding matches :func:`bootstrap_means` (every unit drawn once gives this value up to the
    order of summation, and exactly for constant or integer-valued columns).

    Parameters
    ----------
    differences:
        float64 ``(n_units, n_metrics)`` with ``n_units >= 1``.
    """
    d = np.asarray(differences, dtype=np.float64)
    centres = column_centres(d)
    # One 1-D sum per column: its value does not depend on the other columns or the memory layout.
    return np.array([c + np.sum(d[:, j] - c) / d.shape[0] for j, c in enumerate(centres)], dtype=np.float64)


def bootstrap_means(differences: np.ndarray, n_resamples: int, seed_sequence: np.random.SeedSequence) -> np.ndarray:
    """Means of paired bootstrap resamples of the units (Efron 1979).

    Each replicate draws ``n_units`` unit indices uniformly with replacement and averages the differences of the drawn
    units, the same draw for every metric. Sums run over deviations from :func:`column_centres` (see the module notes),
    so a constant column's replicates all equal :func:`centred_means` exactly. The arguments are those of
    :func:`sign_flip_means` (B replicates, the same sequence giving the same draws); returns float64 ``(n_resamples,
    n_metrics)``.
    """
    from mlflow_recsys.stats import kernels

    d = np.asarray(differences, dtype=np.float64)
    centres = column_centres(d)
    dt = np.ascontiguousarray((d - centres).T)
    return centres + kernels.bootstrap_sums(dt, block_seeds(seed_sequence, n_resamples), n_resamples) / dt.shape[1]


def exact_sign_flip_means(differences: np.ndarray) -> np.ndarray:
    """All ``2**k`` sign-flip means of a 1-D array of differences.

    Zero differences are dropped first (their sign changes nothing) but still count in the denominator. Exact
    enumeration (Fisher 1935) is what the Monte Carlo test approximates.

    Parameters
    ----------
    differences:
        float64 ``(n_units,)`` with at most :data:`MAX_EXACT_UNITS` non-zero values.

    Returns
    -------
    float64 ``(2**k,)`` where ``k`` is the number of non-zero differences; for ``k = 0`` (the models tie on every unit)
    the single pattern's mean, ``[0.0]``.

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
            f"differences: expected at most {MAX_EXACT_UNITS} non-zero values for exact enumeration, found {k}"
        )
    # Both dimensions given: with k = 0, reshape(-1, 0) cannot infer the one empty pattern.
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)), dtype=np.float64).reshape(2**k, k)
    return signs @ nonzero / d.shape[0]
