"""ELSA: scalable linear shallow autoencoder, a low-rank item-item model trained by gradient descent.

Source: V. Vančura, R. Alves, P. Kasalický, P. Kordík, "Scalable Linear Shallow Autoencoder for Collaborative
Filtering", RecSys 2022.

The item-item weights are ``Â Âᵀ - I`` with ``Â`` the row-wise L2-normalised ``A ∈ R^(n_items x latent_dim)``;
subtracting the identity removes each item's trivial self-reconstruction, the low-rank form keeps memory linear in
items.

torch is imported where it is used (training, the torch loss and forward functions, checking a non-CPU device), not when
this module is imported: a fitted model scores and loads with numpy alone, and importing :mod:`mlflow_recsys.models`
stays cheap for EASE and Popularity users.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from mlflow_recsys._sparse import canonical_csr
from mlflow_recsys.models._base import Recommender, _checked_config
from mlflow_recsys.models._device import (
    MATMUL_PRECISIONS,
    DeviceRows,
    check_device,
    fitting_on,
    memory_remedy,
)
from mlflow_recsys.settings_schema import check_fields, setting

if TYPE_CHECKING:
    import torch

# Normalising a zero row must give zero, not NaN; F.normalize's default eps does that.
_NORM_EPS = 1e-12


# Upper limits, refused when the config is made rather than deep in torch (an overflow, or an allocation that cannot
# succeed): 65,536 latent columns already take 26 GB of float32 weights for 100,000 items.
MAX_LATENT_DIM = 65_536
MAX_BATCH_SIZE = 2**24
MAX_EPOCHS = 100_000
# torch holds the learning rate and weight decay as float32 (past 3.4e38 it refuses them mid-training); far below that a
# step overshoots to NaN weights. 100 and 1e6 are well past any useful value.
MAX_LR = 100.0
MAX_WEIGHT_DECAY = 1e6

# Optimiser names and their ``torch.optim`` classes, looked up when training starts.
OPTIMIZERS = {"nadam": "NAdam", "adam": "Adam", "sgd": "SGD"}


@dataclass(frozen=True)
class ELSAConfig:
    """Hyper-parameters of ELSA training.

    Attributes
    ----------
    latent_dim:
        Columns of ``A`` (rank of the item model), integer in [1, 65,536], default 256.
    batch_size:
        Users per optimisation step, integer in [1, 2**24], default 1024.
    epochs:
        Passes over the training users, integer in [1, 100,000], default 10.
    lr:
        NAdam learning rate, in (0, 100], default 0.01.
    weight_decay:
        L2 weight decay of the optimiser, in [0, 1e6], default 0.0.
    optimizer:
        ``"nadam"`` (default, as in the ELSA paper), ``"adam"`` or ``"sgd"``.
    device:
        torch device string for training, e.g. ``"cpu"`` (default), ``"cuda"``, ``"cuda:1"``. Scoring runs on the CPU
        with numpy unless :meth:`~mlflow_recsys.models.Recommender.recommend` is given a device.
    matmul_precision:
        ``"fp32"`` (default) or ``"tf32"``: TensorFloat-32 matrix products while training on CUDA (NVIDIA Ampere and
        later; faster, with a 10-bit mantissa in the products). Refused on any other device, where it would change
        nothing.
    seed:
        Integer seeding the weight initialisation and the per-epoch user shuffles, default 0.
    patience:
        Early stopping (integer in [1, 100,000]): stop after this many epochs without a better validation score and keep
        the best epoch's weights. ``None`` (default) trains all ``epochs``. Needs a ``validate`` callback in
        :meth:`ELSA.fit`.

    A field out of range, or a ``device`` that is no torch device string or not on this machine, is a ValueError.
    """

    latent_dim: int = setting(256, "latent dimension", "integer", low=1, high=MAX_LATENT_DIM)
    batch_size: int = setting(1024, "users per batch", "integer", low=1, high=MAX_BATCH_SIZE)
    epochs: int = setting(10, "training epochs", "integer", low=1, high=MAX_EPOCHS)
    lr: float = setting(0.01, "learning rate", "number", low=0, high=MAX_LR, includes_high=True)
    weight_decay: float = setting(
        0.0, "weight decay", "number", low=0, high=MAX_WEIGHT_DECAY, includes_low=True, includes_high=True
    )
    optimizer: str = setting("nadam", "optimiser", "choice", choices=tuple(sorted(OPTIMIZERS)))
    device: str = setting("cpu", "torch device", "name")
    matmul_precision: str = setting(
        "fp32", "matrix products while training on CUDA", "choice", choices=MATMUL_PRECISIONS
    )
    seed: int = setting(0, "training seed", "seed")
    patience: int | None = setting(
        None,
        "stop after this many epochs without a better validation nDCG@100; keep the best",
        "integer",
        low=1,
        high=MAX_EPOCHS,
        optional=True,
    )

    def __post_init__(self) -> None:
        if not isinstance(self.device, str):
            raise ValueError(f"device: expected a torch device string such as 'cpu' or 'cuda', found {self.device!r}")
        check_fields(self)
        # The default needs no check, so building or loading a CPU model does not import torch.
        if self.device != "cpu":
            check_device(self.device)
        if self.matmul_precision != "fp32" and not self.device.startswith("cuda"):
            raise ValueError(
                f"matmul_precision: expected 'fp32' on device {self.device!r} (TF32 is a CUDA setting), "
                f"found {self.matmul_precision!r}"
            )


def normalized_distance_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The ELSA training loss, the mean over rows of ``|| p/||p|| - t/||t|| ||^2`` (a zero row normalises to zero)."""
    import torch.nn.functional as F

    diff = F.normalize(prediction, dim=1, eps=_NORM_EPS) - F.normalize(target, dim=1, eps=_NORM_EPS)
    return diff.pow(2).sum(dim=1).mean()


def elsa_forward(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """ELSA prediction ``ReLU(x Â Âᵀ - x)`` for dense ``x`` ``(batch, n_items)``, ``a`` ``(n_items, d)``."""
    import torch
    import torch.nn.functional as F

    a_hat = F.normalize(a, dim=1, eps=_NORM_EPS)
    return torch.relu((x @ a_hat) @ a_hat.T - x)


class ELSA(Recommender):
    """ELSA model (Vančura et al., RecSys 2022); :meth:`fit` trains it, the one training loop of the package.

    Attributes
    ----------
    config:
        :class:`ELSAConfig` used for training.
    weights:
        ``A``, float32 array ``(n_items, latent_dim)`` (unnormalised) after fit.
    loss_history:
        Mean training loss of each epoch (float), in order.
    n_items:
        Catalogue size after fit, else None.
    """

    name = "ELSA"

    def __init__(self, config: ELSAConfig | None = None) -> None:
        self.config: ELSAConfig = _checked_config(config, ELSAConfig)
        self.weights: np.ndarray | None = None
        self.loss_history: list[float] = []
        self.validation_history: list[float] = []
        self.best_epoch: int | None = None
        self.n_items: int | None = None
        self._normalized: np.ndarray | None = None

    def fit(
        self,
        x_train: sp.spmatrix,
        on_epoch_end: Callable[..., None] | None = None,
        validate: Callable[[ELSA], float] | None = None,
    ) -> ELSA:
        """Train on ``x_train`` by minibatch gradient descent on the normalised-distance loss; returns self.

        Users without any training interaction are skipped. Same data, config, device and torch build -> bit-identical
        weights (deterministic algorithms are enforced during fit), on any number of CPU threads where torch uses
        Intel MKL, since importing :mod:`mlflow_recsys` sets ``MKL_CBWR=AUTO,STRICT`` (unless already set; it has no
        effect if MKL already ran in the process); on a GPU see :class:`ELSATrainer`.

        Parameters
        ----------
        x_train:
            scipy sparse ``(n_users, n_items)`` binary interactions; at least one row must have an interaction.
        on_epoch_end:
            Optional ``callback(epoch, loss, score)`` called after each epoch with the 1-based epoch number, that
            epoch's mean loss over users, and the validation score (``None`` without ``validate``).
        validate:
            Optional ``validate(model) -> float``, higher is better (e.g. nDCG@100 on validation users), called on each
            epoch's weights and passed to ``on_epoch_end``. With ``config.patience`` set, training stops after that many
            epochs without improvement and the model keeps the best epoch's weights; otherwise the last epoch's.

        Returns
        -------
        ELSA
            This model, fitted, with ``loss_history`` (one value per epoch run), ``validation_history`` and
            ``best_epoch`` (1-based; the last epoch without ``validate``).

        Raises
        ------
        TypeError, ValueError
            If ``x_train`` is invalid or has no interactions.
        RuntimeError
            From torch if ``config.device`` is unavailable.
        """
        cfg = self.config
        if cfg.patience is not None and validate is None:
            raise ValueError("validate: config.patience needs a validate callback to know when to stop, found None")
        x = _active_rows(x_train)
        import torch
        from tqdm.auto import tqdm

        device = torch.device(cfg.device)
        history: list[float] = []
        scores: list[float] = []
        best_score, best_epoch, best_weights = -np.inf, 0, None
        work = f"training ELSA on {cfg.device} ({cfg.batch_size:,} users x {x.shape[1]:,} items a batch)"
        remedy = f"lower batch_size (it is {cfg.batch_size:,})"
        with fitting_on(device, cfg.matmul_precision), memory_remedy(work, remedy):
            generator = torch.Generator(device="cpu").manual_seed(cfg.seed)
            a = _initial_weights(x.shape[1], cfg.latent_dim, generator, device)
            optimizer = getattr(torch.optim, OPTIMIZERS[cfg.optimizer])([a], lr=cfg.lr, weight_decay=cfg.weight_decay)
            progress = tqdm(range(1, cfg.epochs + 1), desc="ELSA", unit="epoch", disable=None)
            rows = DeviceRows(x, device)
            for epoch in progress:
                loss = _train_epoch(rows, a, optimizer, generator, cfg.batch_size)
                history.append(loss)
                score = None
                if validate is not None:
                    weights = a.detach().cpu().numpy().copy()
                    probe = ELSA(cfg)
                    probe._set_weights(weights)
                    score = float(validate(probe))
                    scores.append(score)
                    if score > best_score:
                        best_score, best_epoch, best_weights = score, epoch, weights
                progress.set_postfix(loss=f"{loss:.5f}", **({} if score is None else {"val": f"{score:.4f}"}))
                if on_epoch_end is not None:
                    on_epoch_end(epoch, loss, score)
                if cfg.patience is not None and epoch - best_epoch >= cfg.patience:
                    break
            if cfg.patience is None or best_weights is None:
                # Without early stopping the validation score is only watched: keep the last epoch.
                best_weights, best_epoch = a.detach().cpu().numpy().copy(), len(history)
        self._set_weights(best_weights)
        self.loss_history, self.validation_history, self.best_epoch = history, scores, best_epoch
        return self

    def _set_weights(self, weights: np.ndarray) -> None:
        weights = np.ascontiguousarray(weights, dtype=np.float32)
        self.weights = weights
        norms = np.linalg.norm(weights, axis=1, keepdims=True)
        self._normalized = weights / np.maximum(norms, np.float32(_NORM_EPS))
        self.n_items = weights.shape[0]

    def _score_checked(self, x: sp.csr_matrix) -> np.ndarray:
        a_hat = self._normalized
        assert a_hat is not None  # score() has checked n_items, set together with _normalized
        # Sparse x times Â first keeps the cost at O(nnz * d + n * d * n_items).
        scores = np.asarray(x @ a_hat, dtype=np.float32) @ a_hat.T
        scores -= x.toarray()
        return np.maximum(scores, 0.0, out=scores)

    def _device_scorer(self, device: torch.device):
        import torch

        a_hat = torch.from_numpy(self._normalized).to(device)

        def score(rows: DeviceRows, batch: np.ndarray, dense: torch.Tensor) -> torch.Tensor:
            scores = rows.times(batch, a_hat) @ a_hat.T
            scores -= dense
            return torch.relu_(scores)

        return score

    def _to_saved(self):
        return dataclasses.asdict(self.config), {"loss_history": list(self.loss_history)}, {"A": self.weights}

    @classmethod
    def _from_saved(cls, config, state, arrays, n_items) -> ELSA:
        model = cls(ELSAConfig(**config))
        weights = arrays["A"]
        if weights.ndim != 2 or weights.shape[0] != n_items:
            raise ValueError(f"path: expected A with {n_items} rows, found shape {weights.shape}")
        model._set_weights(weights)
        model.loss_history = [float(v) for v in state.get("loss_history", [])]
        return model


class ELSATrainer:
    """Trains :class:`ELSA` (the name the comparison guide uses): ``ELSATrainer(config).fit(x)`` is
    ``ELSA(config).fit(x)``, a new fitted model each call, bit-identical for the same data, config, device and torch.

    On a GPU the fit is repeatable on the same GPU model, driver, CUDA and torch versions (cuBLAS runs with a fixed
    workspace, ``CUBLAS_WORKSPACE_CONFIG``), but its weights differ from a CPU fit in the last bits, because the matrix
    products sum in another order; after many epochs the rankings can differ slightly. Train every seed of one
    comparison on the same kind of device, so the seed spread measures seeds and not hardware.
    """

    def __init__(self, config: ELSAConfig | None = None) -> None:
        self.config = _checked_config(config, ELSAConfig)

    def fit(
        self,
        x_train: sp.spmatrix,
        on_epoch_end: Callable[..., None] | None = None,
        validate: Callable[[ELSA], float] | None = None,
    ) -> ELSA:
        """A new ELSA model trained on ``x_train``: :meth:`ELSA.fit`, whose parameters and exceptions apply."""
        return ELSA(self.config).fit(x_train, on_epoch_end=on_epoch_end, validate=validate)


def _active_rows(x_train: sp.spmatrix) -> sp.csr_matrix:
    """The rows of ``x_train`` with at least one interaction; ValueError if there is none."""
    x = canonical_csr(x_train, "x_train")
    active = np.flatnonzero(np.diff(x.indptr) > 0)
    if active.size == 0:
        raise ValueError(f"x_train: expected at least one interaction, found none in shape {x.shape}")
    return x[active]


def _initial_weights(n_items: int, latent_dim: int, generator: torch.Generator, device: torch.device):
    """``A`` before training: Xavier-uniform from ``generator`` on the CPU, then moved to ``device``."""
    import torch

    initial = torch.empty((n_items, latent_dim), dtype=torch.float32)
    torch.nn.init.xavier_uniform_(initial, generator=generator)
    return torch.nn.Parameter(initial.to(device))


def _train_epoch(x: DeviceRows, a, optimizer, generator: torch.Generator, batch_size: int) -> float:
    """One pass over the users in a shuffled order, one optimiser step per batch; the mean loss over users.

    Each batch's loss stays on the device until the epoch ends: reading it per batch would wait for the device at every
    step. The mean is then summed on the host in batch order, in float64, as the losses were read one by one before.
    """
    import torch

    n_users = x.shape[0]
    order = torch.randperm(n_users, generator=generator).numpy()  # on the CPU: the same shuffles on every device
    starts = range(0, n_users, batch_size)
    losses = torch.empty(len(starts), dtype=torch.float32, device=a.device)
    for step, start in enumerate(starts):
        batch = x.dense(order[start : start + batch_size])
        loss = normalized_distance_loss(elsa_forward(batch, a), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses[step] = loss.detach()
    total = 0.0
    for start, loss_value in zip(starts, losses.cpu().tolist(), strict=True):
        total += loss_value * len(order[start : start + batch_size])
    return total / n_users
