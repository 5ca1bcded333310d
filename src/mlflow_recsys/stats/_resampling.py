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
from collections.abc import Sequence

import numpy as np

#: Largest number of non-zero units whose 2**n sign patterns are enumerated exactly.
MAX_EXACT_UNITS = 20


#: SplitMix64's increment and output multipliers (Steele, Lea & Flood, "Fast splittable pseudorandom number
#: generators", OOPSLA 2014), the seeding Blackman & Vigna (2021) advise for xoshiro256**.
_SPLITMIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def splitmix64(start: np.uint64, count: int) -> np.ndarray:
    """The first ``count`` outputs of SplitMix64 (Steele, Lea & Flood 2014) from state ``start``: uint64 ``(count,)``.
    uint64 arithmetic wraps modulo 2**64 in NumPy, as the generator's does."""
    gamma, mul1, mul2 = _SPLITMIX
    z = np.uint64(start) + gamma * np.arange(1, count + 1, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * mul1
    z = (z ^ (z >> np.uint64(27))) * mul2
    return z ^ (z >> np.uint64(31))


def block_seeds(seed_sequence: np.random.SeedSequence, n_resamples: int) -> np.ndarray:
    """The seed words of each block of replicates, uint64 ``(ceil(B / BLOCK), SEED_WORDS)``: the states of the block's
    three generators, from consecutive outputs of :func:`splitmix64` started at one word of ``seed_sequence`` (a
    ``SeedSequence`` spends about as long on each word it gives as the kernels on a replicate, so it gives one). The
    first ``8 * n_blocks`` outputs seed the first two generators, eight a block; the next ``4 * n_blocks`` the third."""
    from mlflow_recsys.stats._kernels import BLOCK, SEED_WORDS

    n_blocks = -(-n_resamples // BLOCK)
    start = seed_sequence.generate_state(1, dtype=np.uint64)[0]
    words = splitmix64(start, n_blocks * SEED_WORDS)
    seeds = np.hstack([words[: n_blocks * 8].reshape(n_blocks, 8), words[n_blocks * 8 :].reshape(n_blocks, 4)])
    states = seeds.reshape(n_blocks, 3, 4)
    states[~states.any(axis=2)] = 1  # xoshiro's one forbidden state
    return seeds


def sign_flip_means(differences: np.ndarray, n_resamples: int, seed_sequence: np.random.SeedSequence) -> np.ndarray:
    """The randomization null (Fisher 1935; Smucker et al. 2007): float64 ``(B, n_metrics)`` of ``mean(eps * d)``
    for B uniform sign vectors ``eps``, the same for every column of ``differences`` ``(n_units, n_metrics)`` and
    for the same ``seed_sequence``."""
    d = np.asarray(differences, dtype=np.float64)
    return stratum_sign_flip_means(d, [np.arange(d.shape[0])], [seed_sequence], n_resamples)[:, 0, :]


def stratum_sign_flip_means(
    differences: np.ndarray,
    members: Sequence[np.ndarray],
    seed_sequences: Sequence[np.random.SeedSequence],
    n_resamples: int,
) -> np.ndarray:
    """:func:`sign_flip_means` of each stratum's rows of ``differences`` ``(n_units, n_metrics)``: float64
    ``(B, S, n_metrics)``; stratum ``s`` holds the units ``members[s]`` (int indices, non-empty) and draws from
    ``seed_sequences[s]``, so its means equal ``sign_flip_means(differences[members[s]], B, seed_sequences[s])``."""
    from mlflow_recsys.stats import _kernels as kernels

    d = np.asarray(differences, dtype=np.float64)
    if len(seed_sequences) != len(members):
        raise ValueError(f"seed_sequences: expected one per stratum ({len(members)}), found {len(seed_sequences)}")
    rows, starts = _stacked(d, members, centres=None)
    seeds = np.stack([block_seeds(ss, n_resamples) for ss in seed_sequences])
    table, group_starts = kernels.nibble_tables(rows, starts)
    sums = kernels.sign_flip_sums(table, group_starts, seeds, n_resamples)
    return _stratum_means(sums, d.shape[1], np.diff(starts))


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
    return sliced_bootstrap_means(differences, n_resamples, seed_sequence)[0]


def sliced_bootstrap_means(
    differences: np.ndarray,
    n_resamples: int,
    seed_sequence: np.random.SeedSequence,
    stratified: np.ndarray | None = None,
    slices: Sequence[Sequence[np.ndarray]] = (),
) -> tuple[np.ndarray, list[np.ndarray]]:
    """:func:`bootstrap_means` of ``differences`` ``(n_units, n_metrics)`` and, from the same draw, the stratified
    bootstrap of ``stratified`` ``(n_units, m2)`` within the strata of each slice: ``(means (B, n_metrics), [float64
    (B, S_k, m2) per slice])``.

    A slice is a sequence of strata, each a non-empty int array of unit indices, the strata a partition of the units
    (ValueError if they hold another number of units). Stratum ``s`` resamples its own ``len(members[s])`` units with
    replacement, as a stratified bootstrap does, summed around its own :func:`column_centres`; its draws reuse the
    random words of the comparison's draw at the stratum's positions (the strata one after another), so slices cost no
    draws of their own and leave ``means`` unchanged (the kernel, :func:`~mlflow_recsys.stats._kernels.bootstrap_sums`,
    says how).
    """
    from mlflow_recsys.stats import _kernels as kernels

    d = np.asarray(differences, dtype=np.float64)
    n = d.shape[0]
    centres = column_centres(d)
    rows, _ = _stacked(d, [np.arange(n)], centres[None, :])
    x = np.zeros((n, 0)) if stratified is None else np.asarray(stratified, dtype=np.float64)
    held = [sum(len(idx) for idx in members) for members in slices]
    for units in held:  # a replicate draws one candidate per unit, so each slice's strata hold the n units
        if units != n:
            raise ValueError(f"slices: expected strata partitioning the {n} units, found {units} units in all")
    stratum_centres = [np.stack([column_centres(x[idx]) for idx in members]) for members in slices]
    # Every slice's strata one after another: n rows a slice.
    strata_rows, strata_starts = _stacked(
        x, [idx for members in slices for idx in members], np.vstack([np.zeros((0, x.shape[1])), *stratum_centres])
    )
    sums, stratum_sums = kernels.bootstrap_sums(
        rows, block_seeds(seed_sequence, n_resamples), n_resamples, strata_rows, strata_starts
    )
    bounds = np.cumsum([len(members) for members in slices])[:-1]
    per_slice, sizes = (
        (np.split(stratum_sums, bounds), np.split(np.diff(strata_starts), bounds)) if slices else ([], [])
    )
    stratum_means = [
        _stratum_means(s, x.shape[1], size, c) for c, s, size in zip(stratum_centres, per_slice, sizes, strict=True)
    ]
    return centres + sums[:, : d.shape[1]] / n, stratum_means


def _stratum_means(sums: np.ndarray, m: int, sizes: np.ndarray, centres: np.ndarray | None = None) -> np.ndarray:
    """``centres + sums / sizes`` of the first ``m`` columns of the kernels' stratum sums ``(S, m_padded, B)``, with
    ``sizes`` ``(S,)`` and ``centres`` ``(S, m)``: float64 ``(B, S, m)``, a view in which each column ``[:, s, j]`` is
    contiguous, as the tests and intervals read it. Computed in ``sums``, whose pages the kernel has touched: a fresh
    array of that size costs more in page faults than the arithmetic."""
    means = sums[:, :m, :]
    np.divide(means, sizes[:, None, None], out=means)
    if centres is not None:
        means += centres[:, :, None]
    return means.transpose(2, 0, 1)


def padded_width(m: int) -> int:
    from mlflow_recsys.stats._kernels import LANES

    return -(-m // LANES) * LANES


def _aligned_zeros(n_rows: int, width: int) -> np.ndarray:
    """Zeros, float64 ``(n_rows, width)``, from a 64-byte boundary. The kernels read rows as vectors of 32 bytes; NumPy
    often places an array 16 bytes past a boundary, which splits every other read across two cache lines and made the
    bootstrap about a fifth slower in the processes it happened to."""
    size = n_rows * width * 8
    buffer = np.zeros(size + 64, dtype=np.uint8)
    start = -buffer.ctypes.data % 64
    return buffer[start : start + size].view(np.float64).reshape(n_rows, width)


def _stacked(d: np.ndarray, members: Sequence[np.ndarray], centres: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the strata ``members`` one after another, less their ``centres`` (``(S, m)``), columns zero-padded to
    the kernels' lane width, from a cache line (:func:`_aligned_zeros`): ``(rows (n, m_padded), starts (S + 1,))``."""
    sizes = np.array([len(idx) for idx in members], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    m = d.shape[1]
    rows = _aligned_zeros(int(starts[-1]), padded_width(m))
    for s, idx in enumerate(members):
        rows[starts[s] : starts[s + 1], :m] = d[idx] if centres is None else d[idx] - centres[s]
    return rows, starts


def quantiles(replicates: np.ndarray, probabilities: Sequence[float]) -> np.ndarray:
    """``np.quantile(replicates, probabilities)`` (its default "linear" method, Hyndman & Fan 1996 type 7), equal to
    it bit for bit, for a 1-D float array: float64 ``(len(probabilities),)``.

    It selects the order statistics one at a time, each in what the last left: NumPy's partition around one index is
    several times faster than around several at once, which is how ``np.quantile`` asks for them, and intervals are
    read from every bootstrap column of a comparison. The order statistic just above one selected is the smallest of
    the rest, found by a scan.
    """
    x = np.asarray(replicates, dtype=np.float64)
    h = np.asarray(probabilities, dtype=np.float64) * (x.shape[0] - 1)
    below = np.floor(h).astype(np.intp)
    above = np.minimum(below + 1, x.shape[0] - 1)
    part = x.copy()
    start = 0
    for k in np.unique(np.concatenate([below, above])):
        if k == start:  # the smallest of what is left (an interpolation's upper neighbour): a scan, not a selection
            smallest = start + int(np.argmin(part[start:]))
            part[start], part[smallest] = part[smallest], part[start]
        else:
            part[start:].partition(k - start)
        start = k + 1
    a, b, t = part[below], part[above], h - below
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)  # NumPy's own interpolation, both branches


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
