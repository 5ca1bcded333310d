"""The per-user artifact pair: ``per_user.parquet`` and ``evaluation.json``.

``per_user.parquet`` holds one row per evaluation row: ``sample_id`` then one float64 column per metric key.
``evaluation.json`` says what those columns mean (exact definitions), how many rows and users there are, and which
split and targets they were computed on. Readers refuse any other format version.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mlflow_recsys import _envelope
from mlflow_recsys._atomic import atomic_write
from mlflow_recsys._parquet import ParquetRefused, read_columns
from mlflow_recsys.errors import ArtifactError
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.metrics import value_range
from mlflow_recsys.tracking._rankings_artifact import RANKINGS_FILE, read_rankings, write_rankings

if TYPE_CHECKING:
    from mlflow_recsys.stats._levels import LevelIntervals

PER_USER_FILE = "per_user.parquet"
EVALUATION_FILE = "evaluation.json"
FORMAT = "mlflow-recsys-evaluation"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class EvaluationArtifacts:
    """A run's per-user result and the split digest it was computed on."""

    result: EvaluationResult
    split_digest: str | None


def write_evaluation_artifacts(
    result: EvaluationResult,
    directory: str | os.PathLike,
    *,
    split_digest: str | None,
    level_intervals: LevelIntervals | None = None,
) -> list[Path]:
    """Write ``per_user.parquet`` and ``evaluation.json`` into ``directory``, and ``rankings.parquet`` when ``result``
    holds its scored lists.

    With ``level_intervals`` (what a training run logged as ``<metric>.ci_low`` / ``.ci_high``), each metric's
    entry gains ``ci_low`` and ``ci_high``, and ``level_intervals`` states how they were made (its
    :meth:`~mlflow_recsys.stats._levels.LevelIntervals.settings`); readers of this schema version ignore both.

    Each file is written under a temporary name and renamed into place, with
    the mode a new file gets under the umask.

    Returns
    -------
    The paths written.

    Raises
    ------
    ValueError
        If ``result`` has no per-user values.
    """
    from mlflow_recsys import __version__

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    frame = result.to_frame()
    metrics: dict[str, dict[str, object]] = {
        key: {"mean": float(value), "definition": result.definitions.get(key, "")}
        for key, value in result.metrics.items()
    }
    meta: dict[str, object] = {
        "metrics": metrics,
        "n_samples": result.n_samples,
        "n_units": result.n_units,
        "sample_id_kind": "int" if np.issubdtype(np.asarray(result.sample_ids).dtype, np.integer) else "str",
        "targets_fingerprint": result.targets_fingerprint,
        "split_digest": split_digest,
        "package_version": __version__,
    }
    if level_intervals is not None:
        meta["level_intervals"] = level_intervals.settings()
        for key, entry in metrics.items():
            entry |= {"ci_low": level_intervals.ci_low[key], "ci_high": level_intervals.ci_high[key]}
    parquet = directory / PER_USER_FILE
    with atomic_write(parquet) as handle:
        frame.to_parquet(handle, index=False)
    written = [parquet]
    if result.rankings is not None and result.n_items is not None:
        meta["rankings"] = write_rankings(result.rankings, result.n_items, result.sample_ids, directory)
        written.append(directory / RANKINGS_FILE)
    return [*written, _envelope.write_json(directory / EVALUATION_FILE, FORMAT, FORMAT_VERSION, meta)]


def read_evaluation_artifacts(directory: str | os.PathLike, *, origin: str = "") -> EvaluationArtifacts:
    """Read and validate the artifact pair in ``directory``, and the scored lists (``rankings.parquet``) when
    ``evaluation.json`` names them.

    The per-user values are checked, not trusted: each metric column must hold integer or floating-point numbers
    (not booleans), all finite, and for a metric of this package (:func:`mlflow_recsys.metrics.value_range`) all
    within its range, e.g. ``[0, 1]`` for ``ndcg@100``. A key this package does not define (written by a custom
    evaluator) has no known range, so its values are only checked to be finite numbers.

    Parameters
    ----------
    directory:
        Folder holding ``per_user.parquet`` and ``evaluation.json``.
    origin:
        Where they came from (e.g. ``"run 1a2b..."``), used in error messages.

    Raises
    ------
    ArtifactError
        If a file is missing, the schema or its version is unknown, a metric column is missing, boolean or not
        numeric, a value is NaN, infinite or outside its metric's range, the row count disagrees with ``n_samples``,
        or ``sample_id`` and the metric columns would take more than :func:`per_user_byte_limit` bytes uncompressed.
        The message starts with ``origin``.

    Only ``sample_id`` and the metric columns are read, and only after the Parquet footer has shown the row count
    and their uncompressed size: a small file that decodes to gigabytes is refused, and columns a reader does not
    use (another tool's notes) cost nothing.
    """
    where = f"{origin}: " if origin else ""
    directory = Path(directory)
    meta_path, parquet = directory / EVALUATION_FILE, directory / PER_USER_FILE
    for path in (parquet, meta_path):
        if not path.is_file():
            raise ArtifactError(f"{where}expected artifact {path.name}, found none")
    try:
        meta = _envelope.check(meta_path.read_bytes(), EVALUATION_FILE, FORMAT, FORMAT_VERSION)
    except ValueError as exc:
        raise ArtifactError(f"{where}{exc}") from None
    metrics = meta.get("metrics")
    if not isinstance(metrics, dict) or not all(isinstance(v, dict) for v in metrics.values()):
        raise ArtifactError(
            f"{where}{EVALUATION_FILE}: expected 'metrics' to map each metric key to an object, "
            f"found {type(metrics).__name__}"
        )
    keys, n_samples = list(metrics), meta.get("n_samples")
    if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 0:
        raise ArtifactError(
            f"{where}{EVALUATION_FILE}: expected 'n_samples' to be a count of rows, found {n_samples!r}"
        )
    limit = per_user_byte_limit(n_samples, len(keys))
    try:  # decoded only once the footer shows n_samples rows within the limit; no other column
        columns = ["sample_id", *keys]
        table = read_columns(
            parquet, columns, rows=n_samples, rows_from="n_samples", max_bytes=limit, name=PER_USER_FILE
        )
    except ParquetRefused as exc:
        raise ArtifactError(f"{where}{exc}") from None
    frame = table.to_pandas()
    per_user = {key: _metric_values(frame, key, where) for key in keys}
    sample_ids = frame["sample_id"].to_numpy()
    if meta.get("sample_id_kind") == "str":
        sample_ids = sample_ids.astype(str)
    rankings, n_items = read_rankings(directory, meta.get("rankings"), sample_ids, where) or (None, None)
    result = EvaluationResult(
        metrics={k: float(v["mean"]) for k, v in metrics.items()},
        per_user=per_user,
        sample_ids=sample_ids,
        targets_fingerprint=meta.get("targets_fingerprint"),
        definitions={k: v.get("definition", "") for k, v in metrics.items()},
        rankings=rankings,
        n_items=n_items,
    )
    return EvaluationArtifacts(result=result, split_digest=meta.get("split_digest"))


def per_user_byte_limit(n_samples: int, n_metrics: int) -> int:
    """Most uncompressed bytes ``sample_id`` and ``n_metrics`` metric columns of ``n_samples`` rows may take:
    1,024 a sample id (a user id, an e-mail or a hash fits), 16 a metric value (float64 and its share of levels
    and headers), plus 1 MiB of page headers and dictionaries."""
    return n_samples * (1024 + n_metrics * 16) + 1024**2


def _metric_values(frame: pd.DataFrame, key: str, where: str) -> np.ndarray:
    """Column ``key`` as float64, refused unless it holds finite numbers within the metric's range."""
    column = frame[key]
    if column.dtype.kind not in "iuf":  # a boolean is numeric to pandas, but means the column is not a metric
        raise ArtifactError(
            f"{where}{PER_USER_FILE}: column {key!r} expected float64 metric values, found dtype {column.dtype}"
        )
    values = column.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values)
    if bad.any():
        raise ArtifactError(
            f"{where}{PER_USER_FILE}: column {key!r} expected finite values, found {int(bad.sum())} NaN or infinite"
        )
    bounds = value_range(key)
    if bounds is not None:
        low, high = bounds
        outside = (values < low) | (values > high)
        if outside.any():
            first = int(np.flatnonzero(outside)[0])
            raise ArtifactError(
                f"{where}{PER_USER_FILE}: column {key!r} expected values in [{low:g}, {high:g}] (the metric's "
                f"range), found {int(outside.sum())} outside, e.g. {float(values[first])!r} in row {first} "
                f"(sample_id {frame['sample_id'].tolist()[first]!r})"  # a Python value: 11, not np.int64(11)
            )
    return values
