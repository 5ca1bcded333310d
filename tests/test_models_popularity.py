"""Popularity baseline: interaction counts per item, ties by item index."""

import numpy as np
import scipy.sparse as sp

from mlflow_recsys.models import Popularity


def test_counts_are_training_interactions_per_item():
    dense = np.array([[1, 0, 1, 0], [1, 1, 0, 0], [1, 0, 1, 0]], dtype=np.float32)
    model = Popularity().fit(sp.csr_matrix(dense))
    np.testing.assert_array_equal(model.counts, [3.0, 1.0, 2.0, 0.0])
    scores = model.score(sp.csr_matrix((2, 4), dtype=np.float32))
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(scores, [[3.0, 1.0, 2.0, 0.0]] * 2)


def test_ranks_by_count_with_lower_index_first_on_ties():
    # Items 1 and 3 both have 2 interactions; item 4 has 3; items 0 and 2 have 1.
    dense = np.array(
        [[1, 1, 0, 1, 1], [0, 1, 1, 1, 1], [0, 0, 0, 0, 1]],
        dtype=np.float32,
    )
    model = Popularity().fit(sp.csr_matrix(dense))
    indices, scores = model.recommend(sp.csr_matrix((1, 5), dtype=np.float32), 5)
    np.testing.assert_array_equal(indices, [[4, 1, 3, 0, 2]])
    np.testing.assert_array_equal(scores, [[3.0, 2.0, 2.0, 1.0, 1.0]])


def test_recommendations_skip_each_users_fold_in_items():
    dense = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=np.float32)
    model = Popularity().fit(sp.csr_matrix(dense))
    source = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 1, 1]], dtype=np.float32))
    indices, scores = model.recommend(source, 3)
    np.testing.assert_array_equal(indices, [[1, 2, 3], [0, -1, -1]])
    np.testing.assert_array_equal(scores[1], np.array([3.0, -np.inf, -np.inf], dtype=np.float32))


def test_save_load_round_trip_gives_identical_scores(tmp_path):
    x = sp.csr_matrix((np.random.default_rng(0).random((20, 7)) < 0.4).astype(np.float32))
    model = Popularity().fit(x)
    model.save(tmp_path / "pop")
    loaded = Popularity.load(tmp_path / "pop")
    assert loaded.config is None and loaded.n_items == 7
    np.testing.assert_array_equal(loaded.score(x), model.score(x))
