"""The per-user artifact pair: ``per_user.parquet`` and ``evaluation.json``.

``per_user.parquet`` holds one row per evaluation row: ``sample_id`` then one
float64 column per metric key. ``evaluation.json`` says what those columns mean
(exact definitions), how many rows and users there are, and which split and
targets they were computed on. Readers refuse any other schema version.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mlflow_recsys.evaluation import EvaluationResult

PER_USER_FILE = "per_user.parquet"
EVALUATION_FILE = "evaluation.json"
SCHEMA = "mlflow-recsys-evaluation"
SCHEMA_VERSION = 1


class ArtifactError(ValueError):
    """A per-user artifact is missing or malformed."""


@dataclass(frozen=True)
class EvaluationArtifacts:
    """What a run's per-user artifacts hold beyond the result itself."""

    result: EvaluationResult
    split_digest: str | None
    package_version: str | None


def write_evaluation_artifacts(result: EvaluationResult, directory: str | os.PathLike, *, split_digest: str | None) -> list[Path]:
    """Write ``per_user.parquet`` and ``evaluation.json`` into ``directory``.

    Each file is written under a temporary name and renamed into place.

    Returns
    -------
    The two paths written.

    Raises
    ------
    ValueError
        If ``result`` has no per-user values.
    """
    from mlflow_recsys import __version__

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    frame = result.to_frame()
    meta = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "metrics": {
            key: {"mean": float(value), "definition": result.definitions.get(key, "")}
            for key, value in result.metrics.items()
        },
        "n_samples": result.n_samples,
        "n_units": result.n_units,
        "sample_id_kind": "int" if np.issubdtype(np.asarray(result.sample_ids).dtype, np.integer) else "str",
        "targets_fingerprint": result.targets_fingerprint,
        "split_digest": split_digest,
        "package_version": __version__,
    }
    parquet = directory / PER_USER_FILE
    tmp = directory / f".{PER_USER_FILE}.tmp"
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, parquet)
    meta_path = directory / EVALUATION_FILE
    tmp = directory / f".{EVALUATION_FILE}.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
    os.replace(tmp, meta_path)
    return [parquet, meta_path]


def read_evaluation_artifacts(directory: str | os.PathLike, *, origin: str = "") -> EvaluationArtifacts:
    """Read and validate the artifact pair in ``directory``.

    Parameters
    ----------
    directory:
        Folder holding ``per_user.parquet`` and ``evaluation.json``.
    origin:
        Where they came from (e.g. ``"run 1a2b..."``), used in error messages.

    Raises
    ------
    ArtifactError
        If a file is missing, the schema or its version is unknown, a metric
        column is missing or not numeric, a value is NaN or infinite, or the row
        count disagrees with ``n_samples``.
    """
    where = f"{origin}: " if origin else ""
    directory = Path(directory)
    meta_path, parquet = directory / EVALUATION_FILE, directory / PER_USER_FILE
    for path in (meta_path, parquet):
        if not path.is_file():
            raise ArtifactError(f"{where}expected artifact {path.name}, found none")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{where}{EVALUATION_FILE} is not valid JSON ({exc})") from None
    if meta.get("schema") != SCHEMA or meta.get("schema_version") != SCHEMA_VERSION:
        raise ArtifactError(
            f"{where}{EVALUATION_FILE}: expected schema {SCHEMA!r} version {SCHEMA_VERSION}, found "
            f"{meta.get('schema')!r} version {meta.get('schema_version')!r}"
        )
    frame = pd.read_parquet(parquet)
    keys = list(meta.get("metrics", {}))
    missing = [c for c in ["sample_id", *keys] if c not in frame.columns]
    if missing:
        raise ArtifactError(f"{where}{PER_USER_FILE}: expected columns {missing}, found {list(frame.columns)}")
    if len(frame) != meta.get("n_samples"):
        raise ArtifactError(
            f"{where}{PER_USER_FILE}: expected {meta.get('n_samples')} rows (n_samples), found {len(frame)}"
        )
    per_user = {}
    for key in keys:
        if not pd.api.types.is_numeric_dtype(frame[key]):
            raise ArtifactError(f"{where}{PER_USER_FILE}: column {key!r} expected float64, found {frame[key].dtype}")
        values = frame[key].to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ArtifactError(
                f"{where}{PER_USER_FILE}: column {key!r} expected finite values, found {int(bad.sum())} NaN or infinite"
            )
        per_user[key] = values
    sample_ids = frame["sample_id"].to_numpy()
    if meta.get("sample_id_kind") == "str":
        sample_ids = sample_ids.astype(str)
    result = EvaluationResult(
        metrics={k: float(v["mean"]) for k, v in meta["metrics"].items()},
        per_user=per_user,
        sample_ids=sample_ids,
        targets_fingerprint=meta.get("targets_fingerprint"),
        definitions={k: v.get("definition", "") for k, v in meta["metrics"].items()},
    )
    return EvaluationArtifacts(result=result, split_digest=meta.get("split_digest"),
                               package_version=meta.get("package_version"))
