"""One path for any torch device (issue 33), run here on ``device="cpu"``: the fold-in rows held on the device, the tie
rule of the ranking there, EASE fitted and every model scored there, training that never waits on the device per batch,
the one-line out-of-memory error, and the device type a run records. The CUDA tests skip without a GPU."""

import dataclasses
import re
import warnings

import mlflow
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from conftest import copy_training_run, trained_copy
from mlflow_recsys.errors import DeviceMemoryError
from mlflow_recsys.evaluation import evaluate_recommender
from mlflow_recsys.models import EASE, ELSA, EASEConfig, ELSAConfig, Popularity
from mlflow_recsys.models._device import DeviceRows, fitting_on, memory_remedy, top_k_on_device
from mlflow_recsys.models._ease import fit_on_device
from mlflow_recsys.models._ranking import top_k
from mlflow_recsys.stats import ComparisonSettings, MixedDevicesWarning
from mlflow_recsys.tracking import compare_runs

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def interactions(n_users=300, n_items=120, density=0.05, seed=0, copies=3):
    """Binary interactions whose last ``copies`` item columns repeat the first ones, so that scores tie exactly."""
    rng = np.random.default_rng(seed)
    dense = (rng.random((n_users, n_items - copies)) < density).astype(np.float32)
    dense = np.hstack([dense, dense[:, :copies]]) if copies else dense
    dense[:5] = 0  # users without any interaction
    return sp.csr_matrix(dense)


def test_rows_on_the_device_densify_and_multiply_as_scipy_does():
    x = interactions()
    x.data = np.random.default_rng(1).random(x.nnz).astype(np.float32)  # weighted, not only binary
    held = DeviceRows(x, torch.device("cpu"))
    rows = np.array([7, 0, 299, 3, 3, 150])  # any order, an empty row, a repeat
    assert np.array_equal(held.dense(rows).numpy(), x[rows].toarray())
    assert np.array_equal(held.gathered(rows).numpy(), x[rows].toarray())  # as off the host
    weights = np.random.default_rng(2).standard_normal((x.shape[1], 9)).astype(np.float32)
    product = held.times(rows, torch.from_numpy(weights)).numpy()
    np.testing.assert_allclose(product, x[rows] @ weights, rtol=1e-5, atol=1e-6)
    binary = interactions()
    exact = DeviceRows(binary, torch.device("cpu")).times(rows, torch.from_numpy(weights)).numpy()
    # Binary rows: each score is a sum of weights in the stored order, as SciPy adds them.
    assert np.array_equal(exact, binary[rows] @ weights)


def test_ranking_on_the_device_follows_the_host_tie_rule():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 4, size=(40, 30)).astype(np.float32)  # many exact ties
    scores[rng.random(scores.shape) < 0.1] = -np.inf  # candidates ranked last, not excluded
    excluded = (rng.random(scores.shape) < 0.3).astype(np.float32)
    excluded[0] = 1.0  # a row with no candidate: all padding
    excluded = sp.csr_matrix(excluded)
    mask = torch.from_numpy(excluded.toarray() != 0)
    for k in (1, 5, 30, 45):  # k past n_items pads
        want = top_k(scores, k, exclude=excluded)
        got = top_k_on_device(torch.from_numpy(scores), k, mask)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert (top_k_on_device(torch.from_numpy(scores), 3, mask)[0][0] == -1).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_model_ranks_on_the_device_as_on_the_host(dtype):
    x = interactions()
    ease = EASE(EASEConfig(l2=5.0, dtype=dtype)).fit(x)
    elsa = ELSA(ELSAConfig(latent_dim=8, batch_size=64, epochs=2, seed=1)).fit(x)
    for model in (ease, elsa, Popularity().fit(x)):
        host = model.recommend(x, 20)
        device = model.recommend(x, 20, batch_size=37, device="cpu")
        assert np.array_equal(host[0], device[0]) and np.array_equal(host[1], device[1]), model.name


def test_ease_fitted_on_the_device_matches_the_host_fit():
    x = interactions(n_users=600, n_items=200)
    config = EASEConfig(l2=5.0, dtype="float64")
    host = EASE(config).fit(x)
    device = fit_on_device(x, config, "cpu")  # what EASE(EASEConfig(device="cuda")).fit runs, on this machine's CPU
    assert device.dtype == np.float64 and device.flags.c_contiguous
    assert np.all(np.diag(device) == 0)
    scale = np.abs(host.weights).max()
    assert np.abs(device - host.weights).max() <= 1e-4 * scale
    # float32: the two inversions round apart, so exact ties (the repeated columns) may break either way; the issue's
    # measure is taken on interactions without them.
    x = interactions(n_users=600, n_items=200, copies=0)
    host32 = EASE(EASEConfig(l2=5.0)).fit(x)
    device32 = EASE(EASEConfig(l2=5.0))
    device32.weights, device32.n_items = fit_on_device(x, device32.config, "cpu"), x.shape[1]
    host32, device32 = host32.recommend(x, 100)[0], device32.recommend(x, 100)[0]
    assert np.mean(host32 == device32) >= 0.999


def test_evaluation_on_the_device_gives_the_host_values():
    x = interactions(n_users=400)
    targets = sp.csr_matrix(interactions(n_users=400, seed=9).toarray() * (x.toarray() == 0))
    model = EASE(EASEConfig(l2=5.0)).fit(x)
    host = evaluate_recommender(model, source=x, targets=targets, metrics=["ndcg@20", "recall@10"])
    device = evaluate_recommender(
        model, source=x, targets=targets, metrics=["ndcg@20", "recall@10"], batch_size=64, device="cpu"
    )
    for key in host.per_user:
        assert np.array_equal(host.per_user[key], device.per_user[key])
    assert np.array_equal(host.rankings, device.rankings)


class ListsOnly:
    """A model from elsewhere: it ranks, and knows nothing of devices."""

    n_items = 120

    def recommend(self, source_rows, k):
        return np.tile(np.arange(k), (source_rows.shape[0], 1)), np.zeros((source_rows.shape[0], k))


@pytest.mark.filterwarnings("ignore:5 of 300 evaluation rows have no targets")
def test_a_device_is_refused_for_a_model_that_takes_none_and_for_one_that_is_not_here():
    x = interactions()
    with pytest.raises(ValueError, match=r"^device: expected None for a model that is not one of mlflow_recsys"):
        evaluate_recommender(ListsOnly(), source=x, targets=x, metrics=["ndcg@10"], device="cpu")
    with pytest.raises(ValueError, match=r"^device: expected a torch device string .* found 'meta'"):
        EASE(EASEConfig(l2=5.0)).fit(x).recommend(x, 5, device="meta")
    with pytest.raises(ValueError, match=r"^device: expected a torch device string .* found 'abacus'"):
        EASEConfig(device="abacus")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"^device: expected a device this machine has, found 'cuda'"):
            EASEConfig(device="cuda")
    if not torch.backends.mps.is_available():  # refused here, not by torch's own error at the first copy
        for config in (EASEConfig, ELSAConfig):
            with pytest.raises(ValueError, match=r"^device: expected a device this machine has, found 'mps:0' .*MPS"):
                config(device="mps:0")
        with pytest.raises(ValueError, match=r"^device: expected a device this machine has, found 'mps'"):
            EASE(EASEConfig(l2=5.0)).fit(x).recommend(x, 5, device="mps")


def test_tf32_is_a_cuda_setting_and_the_callers_setting_comes_back():
    with pytest.raises(ValueError, match=r"^matmul_precision: expected 'fp32' on device 'cpu' .* found 'tf32'"):
        ELSAConfig(matmul_precision="tf32")
    with pytest.raises(ValueError, match=r"^matmul_precision: expected one of"):
        ELSAConfig(matmul_precision="bf16")
    before = torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled()
    with fitting_on(torch.device("cpu"), "fp32"):
        assert torch.are_deterministic_algorithms_enabled()
    assert (torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled()) == before


def test_running_out_of_memory_is_one_line_naming_the_setting_to_lower():
    for exhausted in (
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.31 GiB\nmore lines"),
        MemoryError(),
    ):
        with pytest.raises(DeviceMemoryError) as caught:
            with memory_remedy("scoring EASE on cuda (1,024 users x 20,000 items a batch)", "lower batch_size (1,024)"):
                raise exhausted
        text = str(caught.value)
        assert "\n" not in text and text.endswith("; lower batch_size (1,024)")
        assert text.startswith("scoring EASE on cuda (1,024 users x 20,000 items a batch) ran out of memory (")
        assert isinstance(caught.value, RuntimeError)
    with pytest.raises(KeyError):  # anything else passes through unchanged
        with memory_remedy("work", "remedy"):
            raise KeyError("x")


def host_batches_training(x, config):
    """ELSA's training as it ran before its batches were built on the device: each batch densified on the host and
    its loss read after every step."""
    from mlflow_recsys.models._elsa import elsa_forward, normalized_distance_loss

    generator = torch.Generator().manual_seed(config.seed)
    initial = torch.empty((x.shape[1], config.latent_dim))
    torch.nn.init.xavier_uniform_(initial, generator=generator)
    a = torch.nn.Parameter(initial)
    optimizer = torch.optim.NAdam([a], lr=config.lr)
    history = []
    with fitting_on(torch.device("cpu")):
        for _ in range(config.epochs):
            order, total = torch.randperm(x.shape[0], generator=generator).numpy(), 0.0
            for start in range(0, x.shape[0], config.batch_size):
                rows = order[start : start + config.batch_size]
                batch = torch.from_numpy(x[rows].toarray())
                loss = normalized_distance_loss(elsa_forward(batch, a), batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * len(rows)
            history.append(total / x.shape[0])
    return a.detach().numpy(), history


def test_training_on_device_rows_gives_the_weights_and_losses_of_host_batches():
    x = interactions(n_users=500)
    x = x[np.diff(x.indptr) > 0]  # ELSA trains on the users with an interaction
    config = ELSAConfig(latent_dim=16, batch_size=48, epochs=3, seed=4)
    model = ELSA(config).fit(x)
    weights, history = host_batches_training(x, config)
    assert np.array_equal(model.weights, weights)
    assert model.loss_history == history


@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewNonzeroUnitsWarning")
def test_a_comparison_of_runs_trained_on_two_device_types_warns(trained_store, tmp_path):
    with trained_copy(trained_store, tmp_path, "devices") as trained:
        tags = mlflow.get_run(trained["ease"]).data.tags
        assert tags["recsys.device"] == "cpu"
        gpu = copy_training_run(trained["ease"], tmp_path / "gpu", model="EASE-gpu", tags={"recsys.device": "cuda"})
        settings = ComparisonSettings(metrics=["ndcg@100"], n_resamples=999)
        with pytest.warns(
            MixedDevicesWarning,
            match=re.escape("devices: these runs were trained on cpu and cuda (EASE: cpu; EASE-gpu: cuda)"),
        ):
            compare_runs(run_ids=[trained["ease"], gpu], settings=settings)
        same = copy_training_run(trained["ease"], tmp_path / "same", model="EASE-again")
        with warnings.catch_warnings():
            warnings.simplefilter("error", MixedDevicesWarning)
            compare_runs(run_ids=[trained["ease"], same], settings=settings)


@CUDA
def test_on_a_gpu_scoring_ranks_as_the_host_and_training_repeats_bit_for_bit():
    x = interactions(n_users=2000, n_items=500)
    ease = EASE(EASEConfig(l2=5.0, dtype="float64")).fit(x)
    assert np.array_equal(ease.recommend(x, 50)[0], ease.recommend(x, 50, device="cuda")[0])
    gpu = EASE(EASEConfig(l2=5.0, dtype="float64", device="cuda")).fit(x)
    assert np.abs(gpu.weights - ease.weights).max() <= 1e-4 * np.abs(ease.weights).max()
    config = ELSAConfig(latent_dim=32, batch_size=128, epochs=2, seed=3, device="cuda")
    assert np.array_equal(ELSA(config).fit(x).weights, ELSA(config).fit(x).weights)
    with pytest.raises(ValueError, match=r"^device: expected a device this machine has, .* numbered from 0$"):
        EASEConfig(device=f"cuda:{torch.cuda.device_count()}")
    tf32 = dataclasses.replace(config, matmul_precision="tf32")
    assert np.array_equal(ELSA(tf32).fit(x).weights, ELSA(tf32).fit(x).weights)
