"""EASE against an independent dense computation of Steck's (2019) closed form."""

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.models import EASE, EASEConfig
from mlflow_recsys.models import _ease as ease_module
from mlflow_recsys.models._score_kernel import sparse_rows_times_dense


def random_interactions(n_users, n_items, density, seed):
    rng = np.random.default_rng(seed)
    return sp.csr_matrix((rng.random((n_users, n_items)) < density).astype(np.float32))


def dense_closed_form(x_dense, l2):
    """B = I - P diagMat(1 / diag(P)) with P = (X^T X + l2 I)^{-1} (Steck 2019, eq. 8)."""
    p = np.linalg.inv(x_dense.T @ x_dense + l2 * np.eye(x_dense.shape[1]))
    return np.eye(x_dense.shape[1]) - p / np.diag(p)[None, :]


def test_weights_match_dense_inverse_in_float64():
    x = random_interactions(30, 8, 0.3, seed=1)
    model = EASE(EASEConfig(l2=2.5, dtype="float64")).fit(x)
    expected = dense_closed_form(x.toarray().astype(np.float64), 2.5)
    assert model.weights.dtype == np.float64
    np.testing.assert_allclose(model.weights, expected, rtol=1e-10, atol=1e-12)


def test_weights_match_dense_inverse_in_float32():
    x = random_interactions(60, 12, 0.25, seed=2)
    model = EASE(EASEConfig(l2=10.0)).fit(x)
    expected = dense_closed_form(x.toarray().astype(np.float64), 10.0)
    assert model.weights.dtype == np.float32
    np.testing.assert_allclose(model.weights, expected, rtol=1e-4, atol=1e-6)


def test_diagonal_of_weights_is_exactly_zero():
    model = EASE(EASEConfig(l2=1.0)).fit(random_interactions(25, 9, 0.4, seed=3))
    assert np.all(np.diag(model.weights) == 0.0)


def test_weights_satisfy_stationarity_off_the_diagonal():
    # Gradient of ||X - XB||^2 + l2||B||^2 is 2((G + l2 I)B - G); with only
    # diag(B) = 0 constrained, the off-diagonal entries of the gradient vanish.
    x = random_interactions(40, 10, 0.3, seed=4)
    l2 = 3.0
    b = EASE(EASEConfig(l2=l2, dtype="float64")).fit(x).weights
    g = x.toarray().astype(np.float64).T @ x.toarray().astype(np.float64)
    gradient = (g + l2 * np.eye(10)) @ b - g
    off_diagonal = gradient[~np.eye(10, dtype=bool)]
    np.testing.assert_allclose(off_diagonal, 0.0, atol=1e-9)


def test_gram_matrix_built_in_several_row_blocks_equals_dense_product(monkeypatch):
    monkeypatch.setattr(ease_module, "_GRAM_BLOCK_ROWS", 3)
    x = random_interactions(20, 10, 0.35, seed=5)
    gram = ease_module.gram_matrix(x, np.dtype(np.float64))
    dense = x.toarray().astype(np.float64)
    np.testing.assert_array_equal(gram, dense.T @ dense)


def test_scores_are_fold_in_times_weights_as_float32():
    x = random_interactions(30, 8, 0.3, seed=6)
    model = EASE(EASEConfig(l2=1.0)).fit(x)
    source = random_interactions(5, 8, 0.4, seed=7)
    scores = model.score(source)
    assert scores.dtype == np.float32 and scores.shape == (5, 8)
    np.testing.assert_allclose(scores, source.toarray() @ model.weights, rtol=1e-5, atol=1e-6)


def test_item_without_training_interactions_gets_zero_weights():
    dense = np.zeros((6, 4), dtype=np.float32)
    dense[:, :3] = np.random.default_rng(8).random((6, 3)) < 0.6
    model = EASE(EASEConfig(l2=1.0, dtype="float64")).fit(sp.csr_matrix(dense))
    assert np.all(model.weights[3] == 0.0) and np.all(model.weights[:, 3] == 0.0)


def test_save_load_round_trip_gives_identical_scores(tmp_path):
    x = random_interactions(40, 11, 0.3, seed=9)
    model = EASE(EASEConfig(l2=4.0)).fit(x)
    model.save(tmp_path / "ease")
    loaded = EASE.load(tmp_path / "ease")
    assert loaded.config == model.config and loaded.n_items == 11
    np.testing.assert_array_equal(loaded.score(x), model.score(x))
    np.testing.assert_array_equal(loaded.recommend(x, 5)[0], model.recommend(x, 5)[0])


def test_weights_are_kept_in_c_order_after_fit_and_load(tmp_path):
    """Scoring multiplies sparse rows by B; a Fortran-ordered B would be copied whole at every batch."""
    x = random_interactions(40, 11, 0.3, seed=10)
    model = EASE(EASEConfig(l2=4.0)).fit(x)
    assert model.weights.flags.c_contiguous
    reference = model.score(x)
    model.weights = np.asfortranarray(model.weights)  # as a model saved by an earlier version holds it
    model.save(tmp_path / "ease")
    loaded = EASE.load(tmp_path / "ease")
    assert loaded.weights.flags.c_contiguous
    np.testing.assert_array_equal(loaded.score(x), reference)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"l2": 0.0}, r"l2: expected a number in \[1e-06, 1e\+12\], found 0\.0"),
        ({"l2": -1.0}, r"l2: expected a number in \[1e-06, 1e\+12\]"),
        ({"l2": float("inf")}, r"l2: expected a number in \[1e-06, 1e\+12\]"),
        # float32 loses a penalty this small beside the Gram diagonal, and ranks nothing under one this large.
        ({"l2": 1e-320}, r"l2: expected a number in \[1e-06, 1e\+12\], found 1e-320"),
        ({"l2": 1e308}, r"l2: expected a number in \[1e-06, 1e\+12\], found 1e\+308"),
        ({"l2": "500"}, r"l2: expected a number in \[1e-06, 1e\+12\], found '500'"),
        ({"dtype": "float16"}, r"dtype: expected one of \('float32', 'float64'\), found 'float16'"),
    ],
)
def test_invalid_config_raises_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EASEConfig(**kwargs)


def test_config_as_dict_holds_the_hyper_parameters():
    import dataclasses

    assert dataclasses.asdict(EASEConfig(l2=7)) == {"l2": 7.0, "dtype": "float32", "device": "cpu"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n_items", [1, 7, 513, 1100])
def test_tiled_scoring_equals_scipys_product_bit_for_bit(dtype, n_items):
    """The compiled product sums each score's items in SciPy's order and rounding, across tile edges (512 columns)."""
    rng = np.random.default_rng(n_items)
    x = random_interactions(60, n_items, min(1.0, 8 / n_items), seed=n_items)
    weights = rng.standard_normal((n_items, n_items)).astype(dtype)
    rows = x.copy()
    rows.data = rng.uniform(0.5, 3.0, rows.nnz).astype(np.float32)  # values other than 1 exercise the products
    scored = sparse_rows_times_dense(rows, weights)
    np.testing.assert_array_equal(scored, rows.astype(dtype) @ weights)
    assert scored.dtype == np.dtype(dtype)
