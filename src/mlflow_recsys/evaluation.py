"""Evaluate a recommender on held-out users and keep the per-user values.

The per-user values are what the paired statistics in :mod:`mlflow_recsys.stats`
work on, so they are collected by default.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp


@dataclass(frozen=True)
class EvaluationResult:
    """Aggregate and per-user metric values of one model on one set of users.

    Attributes
    ----------
    metrics:
        Metric key (``"ndcg@100"``) -> mean of the per-row values (float).
    per_user:
        Metric key -> float64 array of shape ``(n_samples,)``, one value per
        evaluation row, aligned with ``sample_ids``. ``None`` when the result was
        evaluated with ``collect_per_user=False``; such a result cannot be compared.
    sample_ids:
        Array of shape ``(n_samples,)``: the user id of each evaluation row as in
        the split (int64 or str). Repeated ids mean one user owns several rows.
    targets_fingerprint:
        SHA-256 hex digest identifying (sample ids, fold-in rows, target rows), or
        ``None`` when unknown (then pairing cannot be verified).
    definitions:
        Metric key -> a one-line exact definition of the metric.
    """

    metrics: dict[str, float]
    per_user: dict[str, np.ndarray] | None
    sample_ids: np.ndarray
    targets_fingerprint: str | None = None
    definitions: dict[str, str] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        """Number of evaluation rows."""
        return int(len(self.sample_ids))

    @property
    def n_units(self) -> int:
        """Number of distinct users behind the rows."""
        return int(len(pd.unique(np.asarray(self.sample_ids))))

    @property
    def metric_keys(self) -> list[str]:
        """Metric keys in evaluation order."""
        return list(self.metrics)

    def to_frame(self) -> pd.DataFrame:
        """Per-user values as a frame: ``sample_id`` then one float64 column per key.

        Raises
        ------
        ValueError
            If the result holds no per-user values.
        """
        if self.per_user is None:
            raise ValueError(
                "this EvaluationResult holds no per-user values "
                "(it was evaluated with collect_per_user=False)"
            )
        frame = pd.DataFrame({"sample_id": np.asarray(self.sample_ids)})
        for key, values in self.per_user.items():
            frame[key] = np.asarray(values, dtype=np.float64)
        return frame

    @classmethod
    def from_per_user(
        cls,
        values: pd.DataFrame | Mapping[str, np.ndarray],
        *,
        sample_ids: np.ndarray | None = None,
        targets_fingerprint: str | None = None,
        definitions: Mapping[str, str] | None = None,
    ) -> "EvaluationResult":
        """Build a comparable result from per-user values computed elsewhere.

        Parameters
        ----------
        values:
            Either a DataFrame with a ``sample_id`` column and one numeric column
            per metric key, or a mapping metric key -> 1-D array of shape
            ``(n_samples,)``.
        sample_ids:
            Shape ``(n_samples,)``. Required with a mapping unless the rows are
            independent users numbered positionally (then ``0..n-1`` is used);
            must be omitted with a DataFrame (its ``sample_id`` column is used).
        targets_fingerprint:
            Digest of the evaluated users and targets, if known.
        definitions:
            Optional metric key -> definition text.

        Raises
        ------
        ValueError
            If there are no metric columns, arrays are not 1-D, lengths differ, or
            ``sample_ids`` is given twice.
        """
        if isinstance(values, pd.DataFrame):
            if "sample_id" not in values.columns:
                raise ValueError(
                    "values: expected a DataFrame with a 'sample_id' column, "
                    f"found columns {list(values.columns)}"
                )
            if sample_ids is not None:
                raise ValueError(
                    "sample_ids: expected None when values is a DataFrame "
                    "(its 'sample_id' column is used)"
                )
            sample_ids = values["sample_id"].to_numpy()
            arrays = {
                str(c): values[c].to_numpy() for c in values.columns if c not in ("sample_id", "draw")
            }
        else:
            arrays = {str(k): np.asarray(v) for k, v in dict(values).items()}
        if not arrays:
            raise ValueError("values: expected at least one metric column, found none")
        per_user: dict[str, np.ndarray] = {}
        n = None
        for key, arr in arrays.items():
            arr = np.asarray(arr, dtype=np.float64)
            if arr.ndim != 1:
                raise ValueError(f"values[{key!r}]: expected a 1-D array, found shape {arr.shape}")
            if n is None:
                n = arr.shape[0]
            elif arr.shape[0] != n:
                raise ValueError(
                    f"values[{key!r}]: expected {n} values like the other metrics, found {arr.shape[0]}"
                )
            per_user[key] = arr
        if sample_ids is None:
            sample_ids = np.arange(n, dtype=np.int64)
        sample_ids = np.asarray(sample_ids)
        if sample_ids.ndim != 1 or sample_ids.shape[0] != n:
            raise ValueError(
                f"sample_ids: expected shape ({n},) to match the per-user values, "
                f"found {sample_ids.shape}"
            )
        means = {k: float(np.mean(v)) if len(v) else float("nan") for k, v in per_user.items()}
        return cls(
            metrics=means,
            per_user=per_user,
            sample_ids=sample_ids,
            targets_fingerprint=targets_fingerprint,
            definitions=dict(definitions or {}),
        )


def targets_fingerprint(source: sp.spmatrix, targets: sp.spmatrix, sample_ids: np.ndarray) -> str:
    """SHA-256 hex digest of (sample ids, fold-in rows, target rows).

    Matrices are canonicalised (CSR, sorted indices, binary) first so that equal
    interaction sets give equal digests whatever their storage order or dtype.
    """
    h = hashlib.sha256()
    ids = np.asarray(sample_ids)
    h.update(b"sample_ids:" + str(ids.dtype.kind).encode())
    h.update("\x1f".join(map(str, ids.tolist())).encode())
    for name, m in (("source", source), ("targets", targets)):
        csr = sp.csr_matrix(m, copy=True)
        csr.sum_duplicates()
        csr.sort_indices()
        csr.eliminate_zeros()
        h.update(f"{name}:{csr.shape[0]}x{csr.shape[1]}".encode())
        h.update(np.asarray(csr.indptr, dtype=np.int64).tobytes())
        h.update(np.asarray(csr.indices, dtype=np.int64).tobytes())
    return h.hexdigest()
