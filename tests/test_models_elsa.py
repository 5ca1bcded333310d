"""ELSA (Vančura et al., RecSys 2022): forward pass, loss, seeding, learning, persistence."""

import dataclasses
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from mlflow_recsys.models import ELSA, ELSAConfig, ELSATrainer
from mlflow_recsys.models._elsa import normalized_distance_loss

N_BLOCKS, BLOCK_ITEMS = 4, 10


def block_users(n_users=160, seed=0):
    """Each user draws items only from its own block of items, so co-occurrence has structure."""
    rng = np.random.default_rng(seed)
    n_items = N_BLOCKS * BLOCK_ITEMS
    dense = np.zeros((n_users, n_items), dtype=np.float32)
    blocks = rng.integers(0, N_BLOCKS, size=n_users)
    for user, block in enumerate(blocks):
        chosen = rng.choice(BLOCK_ITEMS, size=4, replace=False) + block * BLOCK_ITEMS
        dense[user, chosen] = 1.0
    return sp.csr_matrix(dense), blocks


SMALL = ELSAConfig(latent_dim=8, batch_size=32, epochs=3, lr=0.05, seed=0)


def test_same_seed_gives_bit_identical_weights_and_losses():
    x, _ = block_users()
    first = ELSATrainer(SMALL).fit(x)
    second = ELSATrainer(SMALL).fit(x)
    assert first.weights.tobytes() == second.weights.tobytes()
    assert first.loss_history == second.loss_history


#: Fits ELSA on one thread, then on two, in one process, and prints whether the weights are the same bits. 2,000 items
#: make the products' sums long enough for MKL to split them between threads.
_FIT_ON_ONE_AND_TWO_THREADS = textwrap.dedent(
    """
    import hashlib
    import numpy as np, scipy.sparse as sp, torch
    import mlflow_recsys
    from mlflow_recsys.models import ELSA, ELSAConfig

    x = sp.random(600, 2000, density=0.02, format="csr", random_state=np.random.default_rng(0), dtype=np.float32)
    x.data[:] = 1.0
    digests = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        model = ELSA(ELSAConfig(latent_dim=16, batch_size=128, epochs=2, seed=3)).fit(x)
        digests.append(hashlib.sha256(model.weights.tobytes()).hexdigest())
    print(digests[0] == digests[1])
    """
)


def _same_weights_on_one_and_two_threads(mkl_cbwr: str | None) -> bool:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "MKL_CBWR"}
    if mkl_cbwr is not None:
        env["MKL_CBWR"] = mkl_cbwr
    proc = subprocess.run(
        [sys.executable, "-c", _FIT_ON_ONE_AND_TWO_THREADS], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"True": True, "False": False}[proc.stdout.strip()]


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="this torch build has no MKL to ask for it")
def test_the_thread_count_does_not_change_the_weights():
    # A Ray task trains on one thread and its own process on every core: importing the package asks MKL for sums in
    # one order whatever the thread count. The control is MKL's default, set by hand (a value already set wins).
    if _same_weights_on_one_and_two_threads("AUTO"):
        pytest.skip(f"MKL does not split these sums between threads here ({os.cpu_count()} CPUs): nothing to show")
    assert _same_weights_on_one_and_two_threads(None)


def test_different_seed_gives_different_weights():
    x, _ = block_users()
    first = ELSATrainer(SMALL).fit(x)
    other = ELSATrainer(dataclasses.replace(SMALL, seed=1)).fit(x)
    assert not np.array_equal(first.weights, other.weights)


def test_loss_decreases_and_same_block_items_are_recommended():
    x, blocks = block_users()
    config = dataclasses.replace(SMALL, epochs=15)
    model = ELSATrainer(config).fit(x)
    assert len(model.loss_history) == 15
    assert model.loss_history[-1] < 0.8 * model.loss_history[0]
    indices, _ = model.recommend(x, 3)
    recommended_blocks = indices // BLOCK_ITEMS
    # With 4 blocks a random recommender would be in-block a quarter of the time.
    assert np.mean(recommended_blocks == blocks[:, None]) > 0.9


def test_scores_equal_relu_of_normalised_low_rank_reconstruction_minus_input():
    x, _ = block_users(40)
    model = ELSATrainer(dataclasses.replace(SMALL, epochs=1)).fit(x)
    a = model.weights.astype(np.float64)
    a_hat = a / np.linalg.norm(a, axis=1, keepdims=True)
    dense = x.toarray().astype(np.float64)
    expected = np.maximum(dense @ a_hat @ a_hat.T - dense, 0.0)
    scores = model.score(x)
    assert scores.dtype == np.float32 and scores.shape == x.shape
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5)


def test_loss_is_mean_squared_distance_of_unit_rows():
    prediction = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])
    target = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    # Row 1: (0.6, 0.8, 0) vs (1, 0, 0) -> 0.16 + 0.64 = 0.8; row 2: 0 vs (0, 1, 0) -> 1.
    assert normalized_distance_loss(prediction, target).item() == pytest.approx(0.9)


def test_callback_receives_each_epoch_and_its_loss():
    x, _ = block_users(64)
    seen = []
    model = ELSATrainer(SMALL).fit(x, on_epoch_end=lambda epoch, loss, score: seen.append((epoch, loss)))
    assert [e for e, _ in seen] == [1, 2, 3]
    assert [loss for _, loss in seen] == model.loss_history


def test_deterministic_algorithm_setting_is_restored_after_fit():
    x, _ = block_users(32)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(False)
        ELSATrainer(SMALL).fit(x)
        assert torch.are_deterministic_algorithms_enabled() is False
    finally:
        torch.use_deterministic_algorithms(before)


def test_users_without_interactions_do_not_change_training():
    x, _ = block_users(48)
    padded = sp.vstack([x, sp.csr_matrix((5, x.shape[1]), dtype=np.float32)]).tocsr()
    assert ELSATrainer(SMALL).fit(padded).weights.tobytes() == ELSATrainer(SMALL).fit(x).weights.tobytes()


def test_matrix_without_interactions_raises():
    with pytest.raises(ValueError, match="x_train: expected at least one interaction"):
        ELSATrainer(SMALL).fit(sp.csr_matrix((3, 4), dtype=np.float32))


def test_model_fit_equals_trainer_fit():
    x, _ = block_users(48)
    assert ELSA(SMALL).fit(x).weights.tobytes() == ELSATrainer(SMALL).fit(x).weights.tobytes()


def test_save_load_round_trip_gives_identical_scores(tmp_path):
    x, _ = block_users(48)
    model = ELSATrainer(SMALL).fit(x)
    model.save(tmp_path / "elsa")
    loaded = ELSA.load(tmp_path / "elsa")
    assert loaded.config == model.config and loaded.loss_history == model.loss_history
    np.testing.assert_array_equal(loaded.weights, model.weights)
    np.testing.assert_array_equal(loaded.score(x), model.score(x))


@pytest.mark.parametrize(
    "field, value, expectation",
    [
        ("latent_dim", 0, "an integer in [1, 65,536]"),
        ("latent_dim", 2.5, "an integer in [1, 65,536]"),
        ("latent_dim", 65_537, "an integer in [1, 65,536]"),
        ("batch_size", -4, "an integer in [1, 16,777,216]"),
        ("epochs", 0, "an integer in [1, 100,000]"),
        ("epochs", 100_001, "an integer in [1, 100,000]"),
        ("patience", 0, "an integer in [1, 100,000]"),
        ("lr", 0.0, "a number in (0, 100]"),
        ("lr", float("nan"), "a number in (0, 100]"),
        ("lr", 1e300, "a number in (0, 100]"),
        ("weight_decay", -0.1, "a number in [0, 1e+06]"),
        ("weight_decay", 1e300, "a number in [0, 1e+06]"),
        ("device", "gpu-please", "a torch device string"),
        ("device", 0, "a torch device string"),
        ("seed", -1, "an integer >= 0"),
        ("seed", 1.5, "an integer >= 0"),
    ],
)
def test_invalid_config_raises_naming_field_expectation_and_value(field, value, expectation):
    with pytest.raises(ValueError) as info:
        ELSAConfig(**{field: value})
    message = str(info.value)
    assert message.startswith(f"{field}: expected {expectation}")
    assert repr(value) in message


def test_early_stopping_keeps_the_best_validation_epoch():
    rng = np.random.default_rng(0)
    x = sp.csr_matrix((rng.random((60, 30)) < 0.2).astype(np.float32))
    scores = iter([0.1, 0.3, 0.2, 0.25, 0.28, 0.5, 0.6])  # best at epoch 2, then 3 epochs without gain
    seen = []
    config = ELSAConfig(latent_dim=4, batch_size=16, epochs=7, lr=0.01, seed=0, patience=3)
    model = ELSATrainer(config).fit(
        x, on_epoch_end=lambda e, loss, score: seen.append((e, score)), validate=lambda m: next(scores)
    )
    assert [e for e, _ in seen] == [1, 2, 3, 4, 5] and model.best_epoch == 2
    assert model.validation_history == [0.1, 0.3, 0.2, 0.25, 0.28]
    # The kept weights are epoch 2's: retraining for exactly 2 epochs gives the same weights.
    two = ELSATrainer(ELSAConfig(latent_dim=4, batch_size=16, epochs=2, lr=0.01, seed=0)).fit(x)
    np.testing.assert_array_equal(model.weights, two.weights)


def test_patience_without_validation_and_unknown_optimizer_are_refused():
    x = sp.csr_matrix(np.eye(5, dtype=np.float32))
    with pytest.raises(ValueError, match="validate"):
        ELSATrainer(ELSAConfig(latent_dim=2, epochs=2, patience=1)).fit(x)
    with pytest.raises(ValueError, match="optimizer"):
        ELSAConfig(optimizer="lbfgs")


def test_optimizer_choice_changes_training():
    rng = np.random.default_rng(1)
    x = sp.csr_matrix((rng.random((40, 20)) < 0.3).astype(np.float32))
    weights = {
        name: ELSATrainer(ELSAConfig(latent_dim=3, batch_size=8, epochs=2, optimizer=name)).fit(x).weights
        for name in ("nadam", "adam", "sgd")
    }
    assert not np.array_equal(weights["nadam"], weights["adam"]) and not np.array_equal(weights["adam"], weights["sgd"])


def test_loss_gradient_has_the_shape_of_a_and_matches_finite_differences():
    from mlflow_recsys.models._elsa import elsa_forward

    rng = np.random.default_rng(0)
    x = torch.tensor((rng.random((5, 7)) < 0.4).astype(np.float64))
    x[0, 0] = 1.0
    a = torch.tensor(rng.normal(size=(7, 3)), requires_grad=True)
    loss = normalized_distance_loss(elsa_forward(x, a), x)
    assert loss.shape == ()
    (grad,) = torch.autograd.grad(loss, a)
    assert grad.shape == a.shape == (7, 3)
    # Central differences in float64, independent of autograd's chain rule.
    numeric = np.zeros((7, 3))
    h = 1e-6
    for i in range(7):
        for j in range(3):
            up, down = a.detach().clone(), a.detach().clone()
            up[i, j] += h
            down[i, j] -= h
            numeric[i, j] = (
                normalized_distance_loss(elsa_forward(x, up), x) - normalized_distance_loss(elsa_forward(x, down), x)
            ).item() / (2 * h)
    np.testing.assert_allclose(grad.numpy(), numeric, rtol=1e-5, atol=1e-8)
