"""EASE: closed-form item-item linear autoencoder.

Source: H. Steck, "Embarrassingly Shallow Autoencoders for Sparse Data", The Web Conference (WWW) 2019.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from mlflow_recsys._sparse import canonical_csr
from mlflow_recsys.models._base import Recommender, _checked_config
from mlflow_recsys.models._device import DeviceRows, check_device, device_type, memory_remedy
from mlflow_recsys.settings_schema import check_fields, setting

if TYPE_CHECKING:
    import torch

_DTYPES = ("float32", "float64")
# Rows of the Gram matrix built per sparse product; bounds the temporary sparse block (at most this many x n_items
# entries) well below the dense matrix.
_GRAM_BLOCK_ROWS = 512

# The range of l2: below 1e-6 the penalty vanishes in the float32 sum with the Gram diagonal (1e-320 is 0 there), above
# 1e12 the weights shrink towards float32's smallest numbers and every score rounds to the same value.
MIN_L2, MAX_L2 = 1e-6, 1e12


@dataclass(frozen=True)
class EASEConfig:
    """Hyper-parameters of :class:`EASE`, each declared once (:func:`~mlflow_recsys.settings_schema.setting`).

    Attributes
    ----------
    l2:
        L2 penalty lambda added to the diagonal of the Gram matrix, in [1e-6, 1e12] (default 500.0, the magnitude Steck
        2019 reports for MovieLens-20M/Netflix).
    dtype:
        Floating type of the Gram matrix, its Cholesky factor and the weights: ``"float32"`` (default; half the memory)
        or ``"float64"``.
    device:
        torch device string of the fit. ``"cpu"`` (default): SciPy's sparse products and LAPACK on the host, without
        torch, the faster way on a CPU. Any other (``"cuda"``, ``"cuda:1"``, ``"mps"``): the Gram matrix built from the
        sparse interactions on that device and inverted there (Cholesky), with torch; the weights come back to the
        host. The Gram matrix of binary interactions holds whole numbers, exact in either dtype, so the two fits differ
        only by the rounding of the inversion (float64: within 1e-4 relative).

    A field out of range is a ValueError.
    """

    l2: float = setting(
        500.0, "L2 regularisation", "number", low=MIN_L2, high=MAX_L2, includes_low=True, includes_high=True
    )
    dtype: str = setting("float32", "floating type of the Gram matrix and weights", "choice", choices=_DTYPES)
    device: str = setting("cpu", "torch device", "name")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.device != "cpu":  # the default needs no check, so the host fit does not import torch
            check_device(self.device)


def gram_matrix(x: sp.csr_matrix, dtype: np.dtype) -> np.ndarray:
    """Dense ``X^T X``, filled a block of rows at a time from sparse products (``x`` is never densified)."""
    n_items = x.shape[1]
    x = x.astype(dtype)
    xt = x.T.tocsr()
    gram = np.zeros((n_items, n_items), dtype=dtype)
    for start in range(0, n_items, _GRAM_BLOCK_ROWS):
        stop = min(start + _GRAM_BLOCK_ROWS, n_items)
        block = (xt[start:stop] @ x).tocsr()
        block.sum_duplicates()
        # Row slices of a C-ordered array are contiguous, so toarray can fill them in place.
        block.toarray(out=gram[start:stop])
    return gram


def _mirror_lower(m: np.ndarray, block: int = 512) -> None:
    """Copy the lower triangle of square ``m`` onto its upper triangle, in place, a strip at a time."""
    n = m.shape[0]
    for start in range(0, n, block):
        stop = min(start + block, n)
        diag = m[start:stop, start:stop]
        diag[...] = np.tril(diag) + np.tril(diag, -1).T
        m[start:stop, stop:] = m[stop:, start:stop].T


class EASE(Recommender):
    """EASE recommender (Steck, WWW 2019).

    Fitting solves ``min_B ||X - X B||_F^2 + l2 ||B||_F^2`` subject to ``diag(B) = 0``, whose solution is
    ``P = (X^T X + l2 I)^{-1}`` and ``B_ij = -P_ij / P_jj`` for ``i != j``, ``B_jj = 0``. Scores are ``X_src B``.

    Attributes
    ----------
    config:
        :class:`EASEConfig`.
    weights:
        ``B``, array ``(n_items, n_items)`` of ``config.dtype`` after fit.
    n_items:
        Catalogue size after fit, else None.
    """

    name = "EASE"

    def __init__(self, config: EASEConfig | None = None) -> None:
        self.config: EASEConfig = _checked_config(config, EASEConfig)
        self.weights: np.ndarray | None = None
        self.n_items: int | None = None

    def fit(self, x_train: sp.spmatrix) -> EASE:
        """Fit the item-item weights ``B`` on ``x_train``, scipy sparse ``(n_users, n_items)`` binary interactions with
        n_items >= 1; returns self. Memory is about two dense ``n_items x n_items`` matrices of ``config.dtype`` at peak
        (the factor and the inverse).

        Raises
        ------
        TypeError, ValueError
            If ``x_train`` is not a valid interaction matrix.
        numpy.linalg.LinAlgError
            If the Cholesky factorisation fails (only possible through round-off with a tiny ``l2`` in float32).
        """
        x = canonical_csr(x_train, "x_train")
        if x.shape[1] < 1:
            raise ValueError(f"x_train: expected at least one item column, found shape {x.shape}")
        if device_type(self.config.device) != "cpu":
            self.weights, self.n_items = fit_on_device(x, self.config, self.config.device), x.shape[1]
            return self
        dtype = np.dtype(self.config.dtype)
        n_items = x.shape[1]
        gram = gram_matrix(x, dtype)
        gram[np.diag_indices(n_items)] += dtype.type(self.config.l2)
        # LAPACK works in Fortran order; G is symmetric, so its transpose is G in Fortran order, factorised in place.
        factor = scipy.linalg.cho_factor(gram.T, lower=True, overwrite_a=True, check_finite=False)
        del gram
        # ?potri inverts from the factor in place, about twice as fast as solving against the identity; it fills the
        # lower triangle only, so mirror it.
        potri = scipy.linalg.lapack.get_lapack_funcs("potri", (factor[0],))
        inverse, info = potri(factor[0], lower=True, overwrite_c=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"EASE: inverting the regularised Gram matrix failed (LAPACK info={info})")
        del factor
        _mirror_lower(inverse)
        # LAPACK left P in Fortran order. P is symmetric, so its transpose is P in C order: scoring (sparse rows times
        # B) reads B by rows, and a Fortran-ordered B is copied whole (n_items ** 2 values) at every product.
        p = inverse.T
        diagonal = np.diag(p).copy()
        p /= -diagonal[None, :]
        p[np.diag_indices(n_items)] = 0.0
        self.weights = p.astype(dtype, copy=False)
        self.n_items = n_items
        return self

    def _score_checked(self, x: sp.csr_matrix) -> np.ndarray:
        from mlflow_recsys.models._score_kernel import sparse_rows_times_dense

        assert self.weights is not None  # score() has checked n_items, set together with the weights
        return np.asarray(sparse_rows_times_dense(x, self.weights), dtype=np.float32)

    def _device_scorer(self, device: torch.device):
        import torch

        weights = torch.from_numpy(self.weights).to(device)

        def score(rows: DeviceRows, batch: np.ndarray, dense: torch.Tensor) -> torch.Tensor:
            return rows.times(batch, weights).to(torch.float32)

        return score

    def _to_saved(self):
        return dataclasses.asdict(self.config), {}, {"B": self.weights}

    @classmethod
    def _from_saved(cls, config, state, arrays, n_items) -> EASE:
        model = cls(EASEConfig(**config))
        weights = arrays["B"]
        if weights.shape != (n_items, n_items):
            raise ValueError(f"path: expected B of shape ({n_items}, {n_items}), found {weights.shape}")
        model.weights = np.ascontiguousarray(weights)  # a model saved in Fortran order is copied once, here
        model.n_items = n_items
        return model


def fit_on_device(x: sp.csr_matrix, config: EASEConfig, device_name: str) -> np.ndarray:
    """EASE's ``B`` (C order, ``config.dtype``) fitted with torch on ``device_name`` (any torch device, the CPU
    included): the Gram matrix a block of item columns at a time from the sparse interactions there (a
    sparse-times-dense product), then Cholesky and its inverse there. Memory on the device: the interactions, and about
    two ``n_items x n_items`` matrices at peak."""
    import torch

    device, dtype = torch.device(device_name), getattr(torch, config.dtype)
    n_items = x.shape[1]
    work = f"fitting EASE on {device_name} ({n_items:,} x {n_items:,} {config.dtype} matrices)"
    remedy = "use dtype='float32'" if config.dtype == "float64" else "fit on the host (device 'cpu')"
    with torch.no_grad(), memory_remedy(work, remedy):
        xt = x.T.tocsr()  # row i: the users of item i
        items = DeviceRows(xt, device)
        coordinates = np.vstack([np.repeat(np.arange(n_items), items.row_lengths), xt.indices]).astype(np.int64)
        transposed = torch.sparse_coo_tensor(
            torch.from_numpy(coordinates),
            torch.from_numpy(xt.data).to(dtype),
            size=xt.shape,
            device=device,
            is_coalesced=True,  # row-major coordinates without repeats, as CSR holds them
            check_invariants=False,
        )
        gram = torch.empty((n_items, n_items), dtype=dtype, device=device)
        for start in range(0, n_items, _GRAM_BLOCK_ROWS):
            block = np.arange(start, min(start + _GRAM_BLOCK_ROWS, n_items))
            columns = items.dense(block).to(dtype).T  # (n_users, block)
            gram[:, block] = torch.sparse.mm(transposed, columns)
        del transposed, columns
        gram.diagonal().add_(config.l2)
        factor, info = torch.linalg.cholesky_ex(gram)
        del gram
        info = int(info)
        if info != 0:
            raise np.linalg.LinAlgError(f"EASE: the regularised Gram matrix is not positive definite (info={info})")
        p = torch.cholesky_inverse(factor)
        del factor
        p /= -torch.diagonal(p)[None, :]
        p.fill_diagonal_(0.0)
        return np.ascontiguousarray(p.cpu().numpy())
