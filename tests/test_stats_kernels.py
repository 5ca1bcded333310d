"""Compiled resampling kernels against plain-Python and NumPy references."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
import scipy.stats

from kernel_oracles import (
    bootstrap_means_reference,
    draw_indices,
    draw_signs,
    sign_flip_means_reference,
    xoshiro_words,
)
from mlflow_recsys.stats._resampling import block_seeds, bootstrap_means, exact_sign_flip_means, sign_flip_means

MASK = (1 << 64) - 1


def xoshiro256starstar(state, count):
    """The generator written out in plain Python integers, from its published definition."""
    s = [int(x) for x in state]
    rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & MASK  # noqa: E731
    out = []
    for _ in range(count):
        out.append(rotl((s[1] * 5) & MASK, 7) * 9 & MASK)
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def test_generator_matches_a_plain_python_xoshiro256starstar():
    seed = np.array([1, 2, 3, 4], dtype=np.uint64)
    ours = xoshiro_words(seed, 50).tolist()
    assert ours == xoshiro256starstar([1, 2, 3, 4], 50)
    seed = np.random.SeedSequence(5).generate_state(4, dtype=np.uint64)
    assert xoshiro_words(seed, 20).tolist() == xoshiro256starstar(seed.tolist(), 20)


@pytest.mark.parametrize("n", [1, 2, 5, 63, 64, 65, 130, 1000])
def test_kernels_equal_numpy_reference_on_the_same_draws(n):
    rng = np.random.default_rng(n)
    d = rng.normal(size=(n, 3))
    ss = np.random.SeedSequence(11)
    seeds = block_seeds(ss, 300)
    signs = draw_signs(seeds, n, 300)
    indices = draw_indices(seeds, n, 300)
    np.testing.assert_allclose(sign_flip_means(d, 300, ss), sign_flip_means_reference(d, signs), rtol=0, atol=1e-13)
    np.testing.assert_allclose(bootstrap_means(d, 300, ss), bootstrap_means_reference(d, indices), rtol=0, atol=1e-13)


def test_signs_and_indices_are_uniform():
    seeds = block_seeds(np.random.SeedSequence(3), 2000)
    signs = draw_signs(seeds, 50, 2000)
    assert scipy.stats.binomtest(int(signs.sum()), signs.size).pvalue > 1e-3
    indices = draw_indices(seeds, 37, 2000)
    counts = np.bincount(indices.ravel(), minlength=37)
    assert scipy.stats.chisquare(counts).pvalue > 1e-3
    assert indices.min() == 0 and indices.max() == 36


#: Run in a fresh process started with NUMBA_NUM_THREADS=4, which numba honours whatever the machine's core count
#: (a process started on one core would otherwise have one thread, and nothing to compare).
MANY_THREADS = """
import sys

import numba
import numpy as np

from mlflow_recsys.stats._resampling import bootstrap_means, sign_flip_means


@numba.njit(parallel=True)
def thread_ids(n):
    out = np.empty(n, np.int64)
    for i in numba.prange(n):
        out[i] = numba.get_thread_id()
    return out


d = np.random.default_rng(0).normal(size=(500, 2))
ss = np.random.SeedSequence(1)
np.savez(
    sys.argv[1],
    threads=numba.get_num_threads(),
    used=len(set(thread_ids(64).tolist())),
    sign=sign_flip_means(d, 999, ss),
    boot=bootstrap_means(d, 999, ss),
)
"""


def test_results_do_not_depend_on_the_number_of_threads(tmp_path):
    d = np.random.default_rng(0).normal(size=(500, 2))
    ss = np.random.SeedSequence(1)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = (sign_flip_means(d, 999, ss), bootstrap_means(d, 999, ss))
    finally:
        numba.set_num_threads(before)
    env = {**os.environ, "NUMBA_NUM_THREADS": "4"}
    subprocess.run([sys.executable, "-c", MANY_THREADS, str(tmp_path / "many.npz")], env=env, check=True, timeout=300)
    many = np.load(tmp_path / "many.npz")
    # The setting reached numba, and a parallel loop ran on more than one of its threads.
    assert int(many["threads"]) == 4 and int(many["used"]) > 1
    np.testing.assert_array_equal(one[0], many["sign"])
    np.testing.assert_array_equal(one[1], many["boot"])


def test_a_metrics_replicates_ignore_the_other_columns():
    d = np.random.default_rng(2).normal(size=(300, 3))
    ss = np.random.SeedSequence(4)
    for kernel in (sign_flip_means, bootstrap_means):
        together = kernel(d, 500, ss)
        alone = kernel(d[:, [1]], 500, ss)
        np.testing.assert_array_equal(together[:, 1], alone[:, 0])


def test_exact_enumeration_lists_every_sign_pattern():
    d = np.array([0.5, 0.0, -0.25, 1.0])
    null = np.sort(exact_sign_flip_means(d))
    expected = np.sort([(a * 0.5 + b * -0.25 + c * 1.0) / 4 for a in (1, -1) for b in (1, -1) for c in (1, -1)])
    np.testing.assert_allclose(null, expected)
