"""A model's item catalogue: the raw item id of every model column, and the one mapping from ids to columns.

Models score columns ``0..n_items-1``; people speak in the dataset's item ids. Every place that turns ids into columns
goes through :class:`ItemCatalogue`: :func:`mlflow_recsys._evaluation_by_ids.evaluate_by_ids`, the ``recsys`` MLflow
evaluator and the served pyfunc model. It never drops an id silently: the methods that build matrices also return the
ids the catalogue does not hold, and each caller states what it does with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys._sparse import binary_csr


class ItemCatalogue:
    """The raw item ids of a model's columns, in column order.

    Parameters
    ----------
    item_ids:
        1-D array-like of distinct integer or string ids; ``item_ids[j]`` is the id of model column ``j``.
    name:
        The argument name used in error messages (default ``"item_ids"``).

    Attributes
    ----------
    kind:
        ``"integer"`` (ids stored as int64) or ``"string"`` (stored as str).

    An ``item_ids`` empty, not 1-D, not all integers or all strings, or repeating an id is a ValueError.
    """

    def __init__(self, item_ids: Any, *, name: str = "item_ids"):
        ids = np.asarray(item_ids)
        if ids.ndim != 1:
            raise ValueError(f"{name}: expected a 1-d array of ids, found shape {ids.shape}")
        if ids.size == 0:
            raise ValueError(f"{name}: expected at least one item id, found none")
        kind = id_kind(ids, name)
        ids = ids.astype(np.int64) if kind == "integer" else ids.astype(str)
        index = pd.Index(ids)
        if not index.is_unique:
            repeated = index[index.duplicated()].unique()
            raise ValueError(
                f"{name}: expected distinct ids, found {len(repeated)} repeated, such as {plain_id(repeated[0])!r}"
            )
        self._ids = ids
        self._index = index
        self.kind = kind

    @property
    def item_ids(self) -> np.ndarray:
        """The ids in column order: int64 or str array of shape ``(n_items,)``."""
        return self._ids

    def __len__(self) -> int:
        return int(self._ids.shape[0])

    def __repr__(self) -> str:
        return f"ItemCatalogue({len(self)} {self.kind} ids)"

    def indices(self, ids: Any) -> np.ndarray:
        """The column of each id, ``-1`` where the catalogue does not hold it: int64, one entry per id, in order.

        Ids compare by value, so a NumPy integer, a Python int and an id read back from JSON find the same column; a
        string never matches an integer id (``"7"`` is not ``7``).
        """
        return self._index.get_indexer(_object_array(ids)).astype(np.int64, copy=False)

    def matrix_from_pairs(self, rows: Any, ids: Any, n_rows: int) -> tuple[sp.csr_matrix, np.ndarray]:
        """A binary matrix with a one at ``(rows[j], column of ids[j])`` for every id the catalogue holds, ``rows``
        integers in ``[0, n_rows)`` and ``ids`` as many item ids -> (the canonical float32 CSR matrix of shape
        ``(n_rows, n_items)``, a repeated pair stored once; a boolean mask, one entry per pair, true where the id is not
        in the catalogue and so not in the matrix)."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = self.indices(ids)
        unknown = cols < 0
        return binary_csr(rows[~unknown], cols[~unknown], (int(n_rows), len(self))), unknown

    def matrix_from_lists(self, lists: Iterable[Any]) -> tuple[sp.csr_matrix, list[list]]:
        """A binary matrix with one row per list of ids (``None`` or NaN is an empty list), as :meth:`matrix_from_pairs`
        builds it, and per row the ids the catalogue does not hold, as plain Python values in input order."""
        lists = list(lists)
        n_rows = len(lists)
        rows, ids, _ = flatten_id_lists(lists)
        matrix, unknown = self.matrix_from_pairs(rows, ids, n_rows)
        missing: list[list] = [[] for _ in range(n_rows)]
        for row, item in zip(rows[unknown].tolist(), ids[unknown].tolist(), strict=True):
            missing[row].append(plain_id(item))
        return matrix, missing


def flatten_id_lists(lists: Iterable[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every id of a sequence of id lists as (int64 rows, an object array of the ids, int64 positions in their list);
    ``None`` or a float NaN stands for an empty list (a missing cell of a frame)."""
    rows: list[int] = []
    flat: list[Any] = []
    positions: list[int] = []
    for row, items in enumerate(lists):
        items = _as_list(items)
        rows.extend([row] * len(items))
        positions.extend(range(len(items)))
        flat.extend(items)
    return np.asarray(rows, dtype=np.int64), _object_array(flat), np.asarray(positions, dtype=np.int64)


def id_kind(ids: np.ndarray, name: str) -> str:
    """``"integer"`` or ``"string"``: the kind of a non-empty array of ids; ValueError naming ``name`` if they are
    floats, booleans, missing or a mix of kinds."""
    inferred = pd.api.types.infer_dtype(ids, skipna=False)
    if inferred in ("integer", "string"):
        return inferred
    raise ValueError(f"{name}: expected integer or string ids, found {_describe(ids, inferred)}")


def plain_id(item_id: Any) -> Any:
    """A NumPy scalar as the Python value it holds (JSON serving gives Python ints and strs)."""
    return item_id.item() if isinstance(item_id, np.generic) else item_id


def _describe(ids: np.ndarray, inferred: str) -> str:
    if ids.dtype != object:
        return f"dtype {ids.dtype}"
    kinds = sorted({type(v).__name__ for v in ids.tolist()})
    return f"{inferred} values of types {kinds}"


def _as_list(items: Any) -> list:
    if items is None or (isinstance(items, float) and np.isnan(items)):
        return []
    return list(items)


def _object_array(values: Any) -> np.ndarray:
    """Values as a 1-D array without coercing kinds (``[1, "a"]`` stays an int and a str)."""
    if isinstance(values, pd.Series):
        values = values.to_numpy()
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values
    values = list(values)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
