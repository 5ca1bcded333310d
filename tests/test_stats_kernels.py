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
    map_eights,
    replay_bootstrap,
    sign_flip_means_reference,
    stratum_picks,
    xoshiro256starstar,
    xoshiro_words,
)
from mlflow_recsys.stats._kernels import SEED_WORDS, bootstrap_sums, sign_flip_sums
from mlflow_recsys.stats._resampling import (
    block_seeds,
    bootstrap_means,
    column_centres,
    exact_sign_flip_means,
    quantiles,
    sign_flip_means,
    sliced_bootstrap_means,
    splitmix64,
    stratum_sign_flip_means,
)


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


@pytest.mark.parametrize("m", [1, 4, 7, 8, 12, 13, 16, 27])
@pytest.mark.parametrize("n", [65, 130])
def test_every_column_count_sums_like_the_reference_and_each_column_alone(m, n):
    """The kernels add a row's columns twelve, eight or four at a time (odd and even picks apart): every column count
    must give the reference's means, and each column the same replicates as when it is drawn alone."""
    d = np.random.default_rng(m * n).normal(size=(n, m))
    ss = np.random.SeedSequence(m)
    seeds = block_seeds(ss, 200)
    flips, boot = sign_flip_means(d, 200, ss), bootstrap_means(d, 200, ss)
    reference_flips = sign_flip_means_reference(d, draw_signs(seeds, n, 200))
    np.testing.assert_allclose(flips, reference_flips, rtol=0, atol=1e-13)
    np.testing.assert_allclose(boot, bootstrap_means_reference(d, draw_indices(seeds, n, 200)), rtol=0, atol=1e-13)
    for j in {0, m // 2, m - 1}:
        np.testing.assert_array_equal(flips[:, j], sign_flip_means(d[:, [j]], 200, ss)[:, 0])
        np.testing.assert_array_equal(boot[:, j], bootstrap_means(d[:, [j]], 200, ss)[:, 0])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(m=6), "rows: expected a column count that is a multiple of LANES"),
        (dict(starts=[0, 4, 9]), "starts: expected segment bounds within the rows"),
        (dict(starts=[0, 5, 3]), "starts: expected non-decreasing segment bounds"),
        (dict(starts=[-1, 4, 8]), "starts: expected segment bounds within the rows"),
        (dict(starts=[0, 8]), r"seeds: expected \(S, n_blocks, SEED_WORDS\) for the S segments of starts"),
        (dict(words=8), "seeds: expected SEED_WORDS words a block"),
        (dict(n_resamples=129), "seeds: expected a block of seeds for every BLOCK replicates"),
    ],
)
def test_the_kernels_refuse_segments_they_would_read_past(change, match):
    """The row sums have no bounds checks: every bound they rely on is checked before any is read. The sign flips take
    segments with seeds of their own; the bootstrap takes strata after its rows, each within one slice's rows."""
    args = {"m": 4, "starts": [0, 4, 8], "n_resamples": 128, "words": SEED_WORDS} | change
    starts = np.array(args["starts"])
    seeds = np.stack([block_seeds(np.random.SeedSequence(s), 128) for s in range(2)])[:, :, : args["words"]]
    if "starts" not in change or "seeds" in match:
        table = np.zeros((2, 16, args["m"]))  # two groups of four units, one a segment
        with pytest.raises(ValueError, match=match):
            sign_flip_sums(table, starts // 4, seeds, args["n_resamples"])
    if "seeds: expected (S" not in match.replace("\\", ""):
        with pytest.raises(ValueError, match=match):
            bootstrap_sums(np.zeros((8, 4)), seeds[0], args["n_resamples"], np.zeros((8, args["m"])), starts)


@pytest.mark.parametrize(
    ("starts", "match"),
    [
        ([0, 4, 4, 8], "strata_starts: expected non-empty strata"),
        ([0, 3, 6], "each within one slice's n rows"),  # a stratum across the first slice's 4 rows and the next
        ([0, 4, 9], "starts: expected segment bounds within the rows"),
    ],
)
def test_the_bootstrap_refuses_strata_it_cannot_draw(starts, match):
    seeds = block_seeds(np.random.SeedSequence(0), 64)
    with pytest.raises(ValueError, match=match):
        bootstrap_sums(np.zeros((4, 4)), seeds, 64, np.zeros((8, 4)), np.array(starts))


def test_sign_flip_strata_need_one_seed_sequence_each():
    d = np.zeros((8, 2))
    members = [np.arange(4), np.arange(4, 8)]
    with pytest.raises(ValueError, match=r"seed_sequences: expected one per stratum \(2\), found 1"):
        stratum_sign_flip_means(d, members, [np.random.SeedSequence(1)], 10)


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


def test_splitmix64_gives_its_published_first_outputs():
    # The reference outputs of SplitMix64 from state 0 (Steele, Lea & Flood 2014; Vigna's splitmix64.c).
    assert [int(x) for x in splitmix64(np.uint64(0), 3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


def test_block_seeds_are_splitmix64_from_one_word_of_the_sequence():
    """Eight words a block for the first two generators, then four a block for the third."""
    ss = np.random.SeedSequence(9)
    seeds = block_seeds(ss, 200)  # 4 blocks
    start = np.random.SeedSequence(9).generate_state(1, dtype=np.uint64)[0]
    words = splitmix64(start, 48)
    assert seeds.shape == (4, 12)
    np.testing.assert_array_equal(seeds[:, :8].ravel(), words[:32])
    np.testing.assert_array_equal(seeds[:, 8:].ravel(), words[32:])


def test_a_generator_state_of_zeros_is_replaced_by_ones(monkeypatch):
    """xoshiro256** stays at zero from the all-zero state. SplitMix64 gives four zeros in a row with probability
    2**-256, so its words are replaced here: only the two generators given zeros are set to ones."""
    from mlflow_recsys.stats import _resampling

    words = splitmix64(np.uint64(3), 36)
    words[8:12] = 0  # the second block's first generator
    words[32:36] = 0  # the third block's third generator
    monkeypatch.setattr(_resampling, "splitmix64", lambda start, count: words[:count].copy())
    seeds = block_seeds(np.random.SeedSequence(0), 150)  # 3 blocks
    expected = np.hstack([words[:24].reshape(3, 8), words[24:].reshape(3, 4)])
    expected[1, :4] = 1
    expected[2, 8:] = 1
    np.testing.assert_array_equal(seeds, expected)


def test_unit_indices_take_both_generators_in_turn():
    """Replayed in plain Python: per step, the low then high half of the first generator's output, then of the
    second's, each mapped to [0, n) by Lemire's multiply; the candidates left when a replicate is full are dropped."""
    n, count = 7, 3
    seeds = block_seeds(np.random.SeedSequence(21), count)
    first, second = seeds[0, :4].tolist(), seeds[0, 4:].tolist()
    steps = -(-n // 4)
    a, b = xoshiro256starstar(first, steps * count), xoshiro256starstar(second, steps * count)
    expected = []
    for r in range(count):
        candidates = []
        for k in range(r * steps, (r + 1) * steps):
            for word in (a[k], b[k]):
                candidates += [word & 0xFFFFFFFF, word >> 32]
        threshold = (2**32 - n) % n
        accepted = [(c * n) >> 32 for c in candidates if (c * n) & 0xFFFFFFFF >= threshold]
        assert len(accepted) >= n  # no rejection with these seeds, so the replay needs no further draws
        expected.append(accepted[:n])
    np.testing.assert_array_equal(draw_indices(seeds, n, count), np.array(expected))


@pytest.mark.parametrize("n", [1, 2, 3, 10, 9999])
def test_quantiles_equal_numpy_bit_for_bit(n):
    rng = np.random.default_rng(n)
    probabilities = [0.0, 0.025, 0.5, 0.975, 1.0, *rng.random(4).tolist()]
    for x in (rng.normal(size=n), rng.integers(0, 3, n).astype(float), np.full(n, 0.1)):
        np.testing.assert_array_equal(quantiles(x, probabilities), np.quantile(x, probabilities))


def test_sign_flip_strata_drawn_together_equal_each_stratum_drawn_alone():
    rng = np.random.default_rng(5)
    d = rng.normal(size=(90, 5))
    members = [rng.permutation(90)[:k] for k in (2, 31, 57)]  # users in any order
    streams = [np.random.SeedSequence(40 + s) for s in range(3)]
    flips = stratum_sign_flip_means(d, members, streams, 300)
    assert flips.shape == (300, 3, 5)
    for s, idx in enumerate(members):
        np.testing.assert_array_equal(flips[:, s], sign_flip_means(d[idx], 300, streams[s]))


@pytest.mark.parametrize("n", [7, 64, 101, 1500])
def test_strata_resample_themselves_from_the_comparisons_draw(n):
    """Two slices over the same units, checked against the draws replayed in plain Python: each stratum resamples its
    own users, from the candidates at its positions; the comparison's own replicates are the same without slices. At
    1,500 users a block sums its strata in batches of fewer replicates than the block (STRATA_BATCH_BYTES)."""
    rng = np.random.default_rng(n)
    d, x = rng.normal(size=(n, 3)), rng.normal(size=(n, 5))
    order = rng.permutation(n)
    slices = [[order[: n // 3], order[n // 3 :]], [np.arange(1, n, 2), np.arange(0, n, 2), np.arange(0)][:2]]
    ss = np.random.SeedSequence(n)
    means, stratum_means = sliced_bootstrap_means(d, 130, ss, x, slices)
    np.testing.assert_array_equal(means, bootstrap_means(d, 130, ss))
    positions = [(sum(len(m) for m in strata[:s]), len(strata[s])) for strata in slices for s in range(len(strata))]
    indices, picks = replay_bootstrap(block_seeds(ss, 130), n, positions, 130)
    np.testing.assert_allclose(means, bootstrap_means_reference(d, indices), rtol=0, atol=1e-13)
    t = 0
    for k, strata in enumerate(slices):
        assert stratum_means[k].shape == (130, len(strata), 5)
        for s, members in enumerate(strata):
            centre = column_centres(x[members])
            expected = centre + (x[members] - centre)[picks[t]].sum(axis=1) / len(members)
            np.testing.assert_allclose(stratum_means[k][:, s], expected, rtol=0, atol=1e-13)
            t += 1


def test_a_rejected_stratum_candidate_is_replaced_by_the_third_generator():
    """For 3 users Lemire's test rejects the candidate 0 only: those picks come from the low halves of the third
    generator's outputs, in order, each tested again."""
    seed = block_seeds(np.random.SeedSequence(8), 1)[0]
    third = xoshiro256starstar(seed[8:].tolist(), 4)
    replacements = [((w & 0xFFFFFFFF) * 3) >> 32 for w in third if ((w & 0xFFFFFFFF) * 3) & 0xFFFFFFFF >= 1]
    candidates = np.array([0, 2**31, 0], dtype=np.uint32)
    assert stratum_picks(seed, candidates).tolist() == [replacements[0], 1, replacements[1]]
    assert stratum_picks(seed, np.array([0, 2**31, 2**32 - 1, 5], dtype=np.uint32)).tolist() == [
        0,
        2,
        3,
        0,
    ]  # 4 rejects none


def test_a_rejection_among_the_eights_mapped_at_once_is_replaced_in_order_too():
    """Eleven candidates for 11 users: the first eight are mapped as vectors, the last three one at a time; Lemire's
    test for 11 rejects the candidate 0 (low half 0, below its bound 4) wherever it stands."""
    seed = block_seeds(np.random.SeedSequence(9), 1)[0]
    bound = (2**32 - 11) % 11
    replacements = []
    for w in xoshiro256starstar(seed[8:].tolist(), 8):
        if ((w & 0xFFFFFFFF) * 11) & 0xFFFFFFFF >= bound:
            replacements.append(((w & 0xFFFFFFFF) * 11) >> 32)
    candidates = np.array([2**31, 0, *([2**30] * 6), 2**32 - 1, 0, 3 * 2**30], dtype=np.uint32)
    expected = [(int(c) * 11) >> 32 for c in candidates]
    expected[1], expected[9] = replacements[0], replacements[1]
    assert stratum_picks(seed, candidates).tolist() == expected


@pytest.mark.parametrize("length", [0, 1, 7, 8, 9, 16, 23, 1000])
def test_the_eights_mapped_at_once_are_lemires_multiply(length):
    """The vector map against the integer definition: picks (c * n) >> 32 and the least low half (c * n) % 2**32."""
    rng = np.random.default_rng(length)
    for n in (1, 3, 11, 1000, 2**31 - 1):  # picks are int32
        candidates = rng.integers(0, 2**32, length, dtype=np.uint32)
        picks = np.zeros(length, dtype=np.int32)
        lowest = map_eights(candidates, np.uint64(n), picks)
        eights = length // 8 * 8
        products = [int(c) * n for c in candidates[:eights]]
        assert picks[:eights].tolist() == [p >> 32 for p in products]
        assert lowest == min([p & 0xFFFFFFFF for p in products], default=2**32 - 1)


def test_the_eights_are_mapped_no_further_than_the_shorter_array():
    """The map writes without bounds checks: 20 candidates into 9 picks map one eight; 9 into 20 too."""
    candidates = np.arange(1, 21, dtype=np.uint32) * np.uint32(200_000_000)
    for source, room in ((candidates, 9), (candidates[:9], 20)):
        picks = np.full(room, -1, dtype=np.int32)
        lowest = map_eights(source, np.uint64(7), picks)
        assert picks[:8].tolist() == [(int(c) * 7) >> 32 for c in source[:8]]
        assert (picks[8:] == -1).all()
        assert lowest == min((int(c) * 7) & 0xFFFFFFFF for c in source[:8])


def test_a_slice_whose_strata_do_not_partition_the_units_is_refused():
    d = np.zeros((37, 1))
    partial = [[np.arange(0, 2), np.arange(2, 4)], [np.arange(0, 10), np.arange(10, 37)]]
    with pytest.raises(ValueError, match=r"slices: expected strata partitioning the 37 units, found 4 units in all"):
        sliced_bootstrap_means(d, 99, np.random.SeedSequence(0), d, partial)


def test_each_strata_column_of_replicates_is_contiguous_as_its_test_reads_it():
    d = np.random.default_rng(5).normal(size=(40, 3))
    strata = [np.arange(0, 40, 2), np.arange(1, 40, 2)]
    _, (boot,) = sliced_bootstrap_means(d, 99, np.random.SeedSequence(1), d, [strata])
    flips = stratum_sign_flip_means(d, strata, [np.random.SeedSequence(2), np.random.SeedSequence(3)], 99)
    for means in (boot, flips):
        assert means.shape == (99, 2, 3)
        assert all(means[:, s, j].flags.c_contiguous for s in range(2) for j in range(3))


@pytest.mark.parametrize("n", [1, 3, 130, 2500])
def test_the_rows_the_kernels_read_start_on_a_cache_line(n):
    """The kernels read rows as 32-byte vectors: rows 16 bytes past a boundary split every other read in two."""
    from mlflow_recsys.stats._resampling import _stacked

    d = np.random.default_rng(n).normal(size=(n, 5))
    for members in ([np.arange(n)], [np.arange(0, n, 2), np.arange(1, n, 2)]):
        rows, _ = _stacked(d, members, None)
        assert rows.ctypes.data % 64 == 0 and rows.shape == (n, 8)
        np.testing.assert_array_equal(rows[:, :5], d[np.concatenate(members)])
