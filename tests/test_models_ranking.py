"""top_k: deterministic tie rule, fold-in exclusion and padding, checked against a brute-force ranking."""

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.models._ranking import top_k


def brute_force_top_k(scores, k, excluded):
    """Reference: Python sort of (−score, index) over non-excluded items, padded with (-1, -inf)."""
    n_rows, n_items = scores.shape
    indices = np.full((n_rows, k), -1, dtype=np.int64)
    values = np.full((n_rows, k), -np.inf, dtype=np.float32)
    for r in range(n_rows):
        candidates = [j for j in range(n_items) if not excluded[r, j]]
        ranked = sorted(candidates, key=lambda j: (-float(scores[r, j]), j))[:k]
        indices[r, : len(ranked)] = ranked
        values[r, : len(ranked)] = scores[r, ranked]
    return indices, values


def test_equal_scores_rank_lower_item_index_first():
    scores = np.array([[1.0, 3.0, 3.0, 0.5, 3.0]], dtype=np.float32)
    indices, values = top_k(scores, 4)
    np.testing.assert_array_equal(indices, [[1, 2, 4, 0]])
    np.testing.assert_array_equal(values, [[3.0, 3.0, 3.0, 1.0]])


def test_ties_at_the_cut_keep_the_lowest_indices():
    # Ten tied items compete for the last three slots; partition-based selection
    # must still pick items 0, 1, 2 of the tie group.
    scores = np.zeros((1, 12), dtype=np.float32)
    scores[0, 11] = 5.0
    scores[0, 10] = 4.0
    indices, _ = top_k(scores, 5)
    np.testing.assert_array_equal(indices, [[11, 10, 0, 1, 2]])


def test_negative_and_positive_zero_tie():
    scores = np.array([[0.0, -0.0, 0.0, -1.0]], dtype=np.float32)
    scores[0, 0] = -0.0
    indices, _ = top_k(scores, 3)
    np.testing.assert_array_equal(indices, [[0, 1, 2]])


def test_fold_in_items_are_never_returned():
    scores = np.array([[9.0, 8.0, 7.0, 6.0], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    exclude = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32))
    indices, values = top_k(scores, 2, exclude=exclude)
    np.testing.assert_array_equal(indices, [[1, 3], [2, 1]])
    np.testing.assert_array_equal(values, [[8.0, 6.0], [3.0, 2.0]])


def test_explicit_zero_in_exclude_does_not_exclude():
    exclude = sp.csr_matrix((np.array([0.0], dtype=np.float32), ([0], [0])), shape=(1, 3))
    indices, _ = top_k(np.array([[3.0, 2.0, 1.0]], dtype=np.float32), 1, exclude=exclude)
    np.testing.assert_array_equal(indices, [[0]])


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "dok"])
def test_exclusion_reads_every_sparse_format_with_duplicates_and_unsorted_columns(fmt):
    # The oracle: a full sort of each row by (score desc, item asc) over the items whose stored values sum to nonzero.
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 4, (30, 9)).astype(np.float32)  # many exact ties
    rows, cols = rng.integers(0, 30, 80), rng.integers(0, 9, 80)
    coo = sp.coo_matrix((np.ones(80, dtype=np.float32), (rows, cols)), shape=scores.shape)  # duplicates kept
    unsorted = sp.csr_matrix((coo.data, coo.col, np.r_[0, np.cumsum(np.bincount(coo.row, minlength=30))]))
    order = np.argsort(coo.row, kind="stable")
    unsorted.indices, unsorted.data = coo.col[order], coo.data[order]
    exclude = unsorted if fmt == "csr" else coo.asformat(fmt)
    assert fmt != "csr" or not unsorted.has_sorted_indices
    banned = coo.toarray() != 0
    indices, _ = top_k(scores, 9, exclude=exclude)
    for r in range(30):
        expected = [j for j in sorted(range(9), key=lambda j: (-scores[r, j], j)) if not banned[r, j]]
        np.testing.assert_array_equal(indices[r], expected + [-1] * (9 - len(expected)))


def test_fewer_candidates_than_k_pads_with_minus_one_and_minus_inf():
    scores = np.array([[0.1, 0.9, 0.5]], dtype=np.float32)
    exclude = sp.csr_matrix(np.array([[0, 1, 0]], dtype=np.float32))
    indices, values = top_k(scores, 5, exclude=exclude)
    np.testing.assert_array_equal(indices, [[2, 0, -1, -1, -1]])
    assert values.dtype == np.float32
    np.testing.assert_array_equal(values, np.array([[0.5, 0.1, -np.inf, -np.inf, -np.inf]], dtype=np.float32))


def test_minus_inf_score_item_is_still_a_candidate_ahead_of_padding():
    scores = np.array([[-np.inf, 1.0, -np.inf]], dtype=np.float32)
    exclude = sp.csr_matrix(np.array([[0, 0, 1]], dtype=np.float32))
    indices, values = top_k(scores, 3, exclude=exclude)
    np.testing.assert_array_equal(indices, [[1, 0, -1]])
    np.testing.assert_array_equal(values, [[1.0, -np.inf, -np.inf]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("k", [1, 4, 15, 30])
def test_matches_brute_force_on_random_tied_scores(dtype, k):
    rng = np.random.default_rng(123)
    # Few distinct values so ties are everywhere, including negatives.
    scores = rng.integers(-3, 4, size=(40, 15)).astype(dtype)
    excluded = rng.random((40, 15)) < 0.3
    excluded[0] = True
    indices, values = top_k(scores, k, exclude=sp.csr_matrix(excluded.astype(np.float32)))
    ref_indices, ref_values = brute_force_top_k(scores, k, excluded)
    assert indices.dtype == np.int64 and values.dtype == np.float32
    np.testing.assert_array_equal(indices, ref_indices)
    np.testing.assert_array_equal(values, ref_values)


def test_float64_scores_closer_than_float32_resolution_keep_their_order():
    scores = np.array([[1.0, 1.0 + 1e-12]], dtype=np.float64)
    indices, _ = top_k(scores, 2)
    np.testing.assert_array_equal(indices, [[1, 0]])


@pytest.mark.parametrize("bad_k", [0, -1, 2.0, True, "3"])
def test_invalid_k_raises_naming_k(bad_k):
    with pytest.raises(ValueError, match="k: expected an integer >= 1"):
        top_k(np.zeros((1, 3), dtype=np.float32), bad_k)


def test_nan_scores_raise():
    with pytest.raises(ValueError, match="scores: expected no NaN"):
        top_k(np.array([[0.0, np.nan]], dtype=np.float32), 1)


def test_one_dimensional_scores_raise():
    with pytest.raises(ValueError, match=r"scores: expected a 2-D array.*found shape \(3,\)"):
        top_k(np.zeros(3, dtype=np.float32), 1)


def test_exclude_with_wrong_shape_raises():
    with pytest.raises(ValueError, match=r"exclude: expected shape \(2, 3\)"):
        top_k(np.zeros((2, 3), dtype=np.float32), 1, exclude=sp.csr_matrix((2, 4), dtype=np.float32))


def test_dense_exclude_raises_type_error():
    with pytest.raises(TypeError, match="exclude: expected a scipy sparse matrix"):
        top_k(np.zeros((2, 3), dtype=np.float32), 1, exclude=np.zeros((2, 3)))


def test_matches_brute_force_with_minus_inf_candidates_and_short_rows():
    rng = np.random.default_rng(7)
    scores = rng.integers(-2, 3, size=(60, 9)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.25] = -np.inf
    excluded = rng.random(scores.shape) < 0.5
    for k in (1, 3, 6, 9, 12):
        indices, values = top_k(scores, k, exclude=sp.csr_matrix(excluded.astype(np.float32)))
        ref_indices, ref_values = brute_force_top_k(scores, k, excluded)
        np.testing.assert_array_equal(indices, ref_indices)
        np.testing.assert_array_equal(values, ref_values)


def test_input_scores_are_not_modified():
    scores = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    top_k(scores, 2, exclude=sp.csr_matrix(np.array([[0, 1, 0]], dtype=np.float32)))
    np.testing.assert_array_equal(scores, [[1.0, 2.0, 3.0]])
