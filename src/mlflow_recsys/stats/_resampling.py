"""Resampling kernels: sign-flip null distributions and paired bootstrap replicates.

Both take a matrix of unit differences of shape ``(n_units, n_metrics)`` and draw **one** set of signs (or resampling
indices) shared by every column, so the metrics of one model pair are resampled together. A column's replicates depend
only on the seed and on that column, never on which other columns are present. The work runs in compiled kernels
(:mod:`mlflow_recsys.stats._kernels`) that never hold a ``(B, n)`` matrix; tests hold them to plain NumPy definitions
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
    from mlflow_recsys.stats._kernels import BLOCK

    n_blocks = -(-n_resamples // BLOCK)
    words = seed_sequence.generate_state(n_blocks * 4, dtype=np.uint64).reshape(n_blocks, 4)
    words[(words == 0).all(axis=1)] = 1  # xoshiro's one forbidden state
    return words


def sign_flip_means(differences: np.ndarray, n_resamples: int, seed_sequence: np.random.SeedSequence) -> np.ndarray:
    """The randomization null (Fisher 1935; Smucker et al. 2007): float64 ``(B, n_metrics)`` of ``mean(eps * d)``
    for B uniform sign vectors ``eps``, the same for every column of ``differences`` ``(n_units, n_metrics)`` and
    for the same ``seed_sequence``."""
    from mlflow_recsys.stats import _kernels as kernels

    d = np.asarray(differences, dtype=np.float64)
    seeds = block_seeds(seed_sequence, n_resamples)
    # One metric per kernel call: the same seeds give every metric the same signs.
    sums = [kernels.sign_flip_sums(np.ascontiguousarray(d[:, c]), seeds, n_resamples) for c in range(d.shape[1])]
    return np.stack(sums, axis=1) / d.shape[0]


def column_centres(differences: np.ndarray) -> np.ndarray:
    """Lower median of each column, float64 ``(n_metrics,)``: one of its own values, so subtracting it is exact for
    constant and integer-valued columns, and near the mean, so little precision is lost adding it back."""
    d = np.asarray(differences, dtype=np.float64)
    middle = (d.shape[0] - 1) // 2
    return np.partition(d, middle, axis=0)[middle].copy()


def centred_means(differences: np.ndarray) -> np.ndarray:
    """Column means summed as the bootstrap replicates are, ``centre + sum(d - centre) / n``: float64
    ``(n_metrics,)``, the point estimate whose rounding matches :func:`bootstrap_means`."""
    d = np.asarray(differences, dtype=np.float64)
    centres = column_centres(d)
    # One 1-D sum per column, so its value depends on neither the other columns nor the memory layout.
    return np.array([c + np.sum(d[:, j] - c) / d.shape[0] for j, c in enumerate(centres)], dtype=np.float64)


def bootstrap_means(differences: np.ndarray, n_resamples: int, seed_sequence: np.random.SeedSequence) -> np.ndarray:
    """Paired bootstrap means of the units (Efron 1979), float64 ``(B, n_metrics)``: each replicate draws ``n_units``
    units with replacement, the same draw for every column; summed around :func:`column_centres`."""
    from mlflow_recsys.stats import _kernels as kernels

    d = np.asarray(differences, dtype=np.float64)
    centres = column_centres(d)
    dt = np.ascontiguousarray((d - centres).T)
    return centres + kernels.bootstrap_sums(dt, block_seeds(seed_sequence, n_resamples), n_resamples) / dt.shape[1]


def exact_sign_flip_means(differences: np.ndarray) -> np.ndarray:
    """All ``2**k`` sign-flip means (Fisher 1935) of ``differences``, ``(n_units,)`` or ``(n_units, n_columns)``, over
    the ``k`` units with a non-zero value (in any column; one sign flips a unit in every column), zeros still counted
    in the denominator: float64 ``(2**k,)`` or ``(2**k, n_columns)``, a single zero row when every difference is 0.
    Called with ``k`` at most :data:`MAX_EXACT_UNITS`."""
    d = np.asarray(differences, dtype=np.float64)
    moving = d[np.any(d.reshape(d.shape[0], -1) != 0, axis=1)]
    k = moving.shape[0]
    # Both dimensions given: with k = 0, reshape(-1, 0) cannot infer the one empty pattern.
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)), dtype=np.float64).reshape(2**k, k)
    return signs @ moving / d.shape[0]
