"""``rankings.parquet``: the top-k lists an evaluation scored, what the global item-exposure metrics are computed from.

One row per row of ``per_user.parquet``, in its order: ``sample_id`` (checked against that file's on reading, so a list
is never paired with another user's scores) and ``items``, a fixed-size list of ``depth`` int32 item indices, best
first, ``-1`` padding. ``evaluation.json`` names the catalogue's size and the depth under
``"rankings"``; a run without them (logged before, or imported without lists) has no lists, and a comparison then
leaves its global metrics out.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mlflow_recsys._atomic import atomic_write
from mlflow_recsys._parquet import ParquetRefused, read_columns
from mlflow_recsys.errors import ArtifactError
from mlflow_recsys.metrics import MAX_CUTOFF

__all__ = ["RANKINGS_FILE", "read_rankings", "write_rankings"]

RANKINGS_FILE = "rankings.parquet"


def write_rankings(rankings: np.ndarray, n_items: int, sample_ids: np.ndarray, directory: Path) -> dict[str, int]:
    """Write ``rankings`` (int ``(n, depth)``) with their ``sample_ids`` ``(n,)`` as ``directory/rankings.parquet``
    (temporary name, then renamed); return the entry ``evaluation.json`` keeps under ``"rankings"``."""
    arr = np.ascontiguousarray(rankings, dtype=np.int32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1), type=pa.int32()), arr.shape[1])
    with atomic_write(directory / RANKINGS_FILE) as handle:
        pq.write_table(pa.table({"sample_id": np.asarray(sample_ids), "items": column}), handle)
    return {"n_items": int(n_items), "depth": int(arr.shape[1])}


def read_rankings(directory: Path, entry: object, sample_ids: np.ndarray, where: str) -> tuple[np.ndarray, int] | None:
    """The lists ``directory/rankings.parquet`` holds, as (int32 ``(n_samples, depth)``, ``n_items``), checked against
    ``entry`` (``evaluation.json``'s ``"rankings"``) and ``sample_ids`` (``per_user.parquet``'s, in order); None when
    ``entry`` is absent. ArtifactError, starting with ``where``, when the entry or the file is malformed, too large,
    lists other users or in another order, or holds an index outside ``[-1, n_items)`` or an item twice in a list."""
    n_samples = len(sample_ids)
    if entry is None:
        return None
    counts = entry if isinstance(entry, dict) else {}
    n_items, depth = counts.get("n_items"), counts.get("depth")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (n_items, depth)) or (
        isinstance(depth, int) and depth > MAX_CUTOFF
    ):
        raise ArtifactError(
            f"{where}evaluation.json: expected 'rankings' to hold 'n_items' and 'depth' (1 to {MAX_CUTOFF}) counts, "
            f"found {entry!r}"
        )
    assert isinstance(n_items, int) and isinstance(depth, int)
    if not (directory / RANKINGS_FILE).is_file():
        raise ArtifactError(f"{where}expected artifact {RANKINGS_FILE}, found none")
    try:
        table = read_columns(
            os.fspath(directory / RANKINGS_FILE),
            ["sample_id", "items"],
            rows=n_samples,
            rows_from="n_samples",
            max_bytes=n_samples * (depth * 4 + 1024) + 1024**2,  # 1,024 bytes an id, as for per_user.parquet
            name=RANKINGS_FILE,
        )
    except ParquetRefused as exc:
        raise ArtifactError(f"{where}{exc}") from None
    listed = [str(v) for v in table.column("sample_id").to_pylist()]
    if listed != [str(v) for v in np.asarray(sample_ids).tolist()]:
        first = next((i for i, (a, b) in enumerate(zip(listed, map(str, sample_ids), strict=True)) if a != b), 0)
        raise ArtifactError(
            f"{where}{RANKINGS_FILE}: expected the users of per_user.parquet in its order, found another in row {first}"
        )
    column = table.column("items").combine_chunks()
    if not pa.types.is_fixed_size_list(column.type) or column.type.list_size != depth or column.null_count:
        raise ArtifactError(f"{where}{RANKINGS_FILE}: expected lists of {depth} item indices, found {column.type}")
    values = column.flatten()
    if not pa.types.is_integer(values.type) or values.null_count:
        raise ArtifactError(f"{where}{RANKINGS_FILE}: expected integer item indices, found {values.type}")
    arr = values.to_numpy().astype(np.int32).reshape(n_samples, depth)
    if arr.size and (arr.min() < -1 or arr.max() >= n_items):
        raise ArtifactError(
            f"{where}{RANKINGS_FILE}: expected item indices in [0, {n_items}) or -1 padding, found values in "
            f"[{int(arr.min())}, {int(arr.max())}]"
        )
    ordered = np.sort(arr, axis=1)
    if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any():
        raise ArtifactError(f"{where}{RANKINGS_FILE}: expected distinct items within each list, found a repeat")
    return arr, n_items
