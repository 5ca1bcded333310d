"""Behaviour common to all recommenders: batched top-k recommendation with fold-in exclusion, save and load."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import scipy.sparse as sp

from mlflow_recsys import _validation as validation
from mlflow_recsys._sparse import canonical_csr
from mlflow_recsys.models._io import load_model_dir, save_model_dir
from mlflow_recsys.models._ranking import top_k

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch
    from _typeshed import DataclassInstance

    from mlflow_recsys.models._device import DeviceRows

    #: A model's scorer on a device: (the rows on the device, a batch of row numbers, that batch made dense there)
    #: -> the batch's scores there.
    DeviceScorer = Callable[[DeviceRows, np.ndarray, torch.Tensor], torch.Tensor]

_C = TypeVar("_C")


class UnknownItemsWarning(UserWarning):
    """Some input item ids are not in a served model's catalogue and were not scored."""


class Recommender:
    """Base class; subclasses implement ``fit``, ``_score_checked``, ``_to_saved`` and ``_from_saved``."""

    name: str = ""
    n_items: int | None = None
    # Declared, not set: each subclass's __init__ sets its frozen config dataclass, or None without hyper-parameters.
    config: DataclassInstance | None

    def _require_fitted(self) -> int:
        if self.n_items is None:
            raise RuntimeError(f"{self.name} model is not fitted: call fit() or load() first")
        return self.n_items

    def score(self, source_rows: sp.spmatrix) -> np.ndarray:
        """Scores of every catalogue item for each row of ``source_rows`` (scipy sparse ``(n_rows, n_items)``, the
        users' binary fold-in interactions): float32 ``(n_rows, n_items)``, higher is better, fold-in items *not* masked
        (see :meth:`recommend`).

        Raises
        ------
        RuntimeError
            If the model is not fitted.
        TypeError, ValueError
            If ``source_rows`` is not a sparse matrix with ``n_items`` columns and finite non-negative values.
        """
        return self._score_checked(self._source_rows(source_rows))

    def _source_rows(self, source_rows: Any) -> sp.csr_matrix:
        n_items = self._require_fitted()
        x = canonical_csr(source_rows, "source_rows")
        if x.shape[1] != n_items:
            raise ValueError(
                f"source_rows: expected {n_items} columns (the model's item catalogue), found {x.shape[1]}"
            )
        return x

    def _score_checked(self, x: sp.csr_matrix) -> np.ndarray:
        raise NotImplementedError

    def _to_saved(self) -> tuple[dict | None, dict, dict[str, np.ndarray]]:
        """(hyper-parameters or None, fitted metadata beyond ``n_items``, arrays by file stem)."""
        raise NotImplementedError

    @classmethod
    def _from_saved(cls, config: dict | None, state: dict, arrays: dict[str, np.ndarray], n_items: int):
        """A fitted model from what :meth:`_to_saved` wrote; ValueError if the arrays do not fit ``n_items``."""
        raise NotImplementedError

    def save(self, path: str | os.PathLike) -> Path:
        """Write one ``.npy`` per weight array, then ``config.json`` with a SHA-256 per array, into directory ``path``
        (each file written under a temporary name and renamed); returns ``path``. RuntimeError if not fitted."""
        n_items = self._require_fitted()
        config, state, arrays = self._to_saved()
        return save_model_dir(
            path, model_name=self.name, config=config, state={"n_items": n_items, **state}, arrays=arrays
        )

    @classmethod
    def load(cls, path: str | os.PathLike):
        """Read a model written by :meth:`save`, without unpickling anything.

        Each weights file must match the SHA-256 that ``config.json`` records for it. The digests catch corruption,
        truncation and accidental edits, not a deliberate rewrite by anyone who can write the folder (or the artifact
        store holding it): load models only from stores you trust. ``mlflow.pyfunc.load_model`` of a model logged with
        :func:`~mlflow_recsys.tracking._model_logging.log_recommender` also runs the Python code stored with it.
        FileNotFoundError or ValueError if ``path`` is not a saved model of this class, ``config.json`` lacks a digest
        for any array, an array file was changed after saving, or the arrays do not match the saved ``n_items``.
        """
        config, state, arrays = load_model_dir(path, cls.name)
        return cls._from_saved(config, state, arrays, int(state["n_items"]))

    def _device_scorer(self, device: torch.device) -> DeviceScorer:
        """``score(rows, batch, dense) -> float32 (len(batch), n_items)`` on ``device``: the batch's scores as
        :meth:`score` gives them (``dense``, the batch's rows made dense on the device once for the ranking's
        exclusions, is there for a model that needs them too). This default scores on the host and moves the scores; a
        model whose weights can live on the device overrides it."""
        import torch

        def score(rows: DeviceRows, batch: np.ndarray, dense: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(self._score_checked(rows.host[batch])).to(device)

        return score

    def recommend(
        self, source_rows: sp.spmatrix, k: int, *, batch_size: int = 1024, device: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (an integer >= 1) items per row of ``source_rows`` (scipy sparse ``(n_rows, n_items)`` fold-in
        interactions), never the row's own fold-in items; ``batch_size`` rows are scored at once (default 1024, bounding
        memory to ``batch_size * n_items`` float32 scores).

        ``device`` (a torch device string such as ``"cuda"``; default None) scores and ranks each batch on that device
        under the same tie rule, with the model's weights copied there once per call. None ranks on the host with the
        compiled selection, the faster way on a CPU. The lists agree with the host's wherever the scores do; a device's
        matrix products may sum in another order, so scores within a few units in the last place of each other can
        swap places.

        Returns
        -------
        indices:
            int64 ``(n_rows, k)``, best first; ties by item index ascending; ``-1`` where fewer than ``k`` candidate
            items exist.
        scores:
            float32 ``(n_rows, k)``; ``-inf`` at padded positions.

        Raises
        ------
        RuntimeError
            If the model is not fitted.
        TypeError, ValueError
            On an invalid ``source_rows``, ``k``, ``batch_size`` or ``device`` (one this machine lacks included).
        DeviceMemoryError
            If a batch does not fit the device's memory: the message says to lower ``batch_size``.
        """
        x = self._source_rows(source_rows)
        k = validation.integer(k, "k", minimum=1)
        batch_size = validation.integer(batch_size, "batch_size", minimum=1)
        if device is not None:
            return self._recommend_on(device, x, k, batch_size)
        indices = np.empty((x.shape[0], k), dtype=np.int64)
        scores = np.empty((x.shape[0], k), dtype=np.float32)
        for start in range(0, x.shape[0], batch_size):
            batch = x[start : start + batch_size]
            idx, val = top_k(self._score_checked(batch), k, exclude=batch)
            indices[start : start + batch_size] = idx
            scores[start : start + batch_size] = val
        return indices, scores

    def _recommend_on(self, device: str, x: sp.csr_matrix, k: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`recommend` on a torch device (checked here)."""
        import torch

        from mlflow_recsys.models._device import DeviceRows, check_device, memory_remedy, top_k_on_device

        check_device(device)
        target = torch.device(device)
        indices = np.empty((x.shape[0], k), dtype=np.int64)
        scores = np.empty((x.shape[0], k), dtype=np.float32)
        work = f"scoring {self.name} on {device} ({batch_size:,} users x {x.shape[1]:,} items a batch)"
        with torch.no_grad(), memory_remedy(work, f"lower batch_size (it is {batch_size:,})"):
            rows = DeviceRows(x, target)
            score = self._device_scorer(target)
            for start in range(0, x.shape[0], batch_size):
                batch = np.arange(start, min(start + batch_size, x.shape[0]))
                dense = rows.dense(batch)
                batch_scores = score(rows, batch, dense)
                if bool(torch.isnan(batch_scores).any()):
                    raise ValueError(f"scores: expected no NaN values, found at least one ({self.name} on {device})")
                idx, val = top_k_on_device(batch_scores, k, dense != 0)
                indices[batch], scores[batch] = idx, val
        return indices, scores


def _checked_config(config: _C | None, cls: type[_C]) -> _C:
    """``config``, or ``cls()`` for None; TypeError naming ``config`` for anything else."""
    if config is None:
        return cls()
    if not isinstance(config, cls):
        raise TypeError(f"config: expected an {cls.__name__}, found {type(config).__name__}")
    return config
