"""Split exports for other frameworks, from a checkpoint file or a split run's artifact."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mlflow_recsys._validation import expected, one_of
from mlflow_recsys.data import load_recsys_split
from mlflow_recsys.interchange._split_export import FORMATS, check_out_folder, export_split_files
from mlflow_recsys.tracking._training import resolve_checkpoint


def export_split(checkpoint: str | os.PathLike, out: str | os.PathLike, *, format: str = "parquet") -> Path:
    """Write the split of ``checkpoint`` to the new folder ``out`` as files other frameworks read; return ``out``.

    ``checkpoint`` is a checkpoint zip or an artifact URI (``runs:/<split run>/checkpoint.zip``); the files,
    their columns and ``split.json`` are those of
    :func:`~mlflow_recsys.interchange.export_split_files` (Parquet, or CSV with
    ``format="csv"``), with the dataset's own user and item ids.

    Raises
    ------
    ValueError
        For a bad ``format`` or an ``out`` that holds something, before the checkpoint is read.
    FileNotFoundError
        If the checkpoint cannot be found or downloaded, or the parent of ``out`` does not exist.
    """
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise ValueError(expected("checkpoint", "a checkpoint zip path or an artifact URI", checkpoint))
    out = check_out_folder(out)  # said before a download, not after
    one_of(format, "format", FORMATS)
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-export-") as tmp:
        split = load_recsys_split(resolve_checkpoint(os.fspath(checkpoint), tmp))
    return export_split_files(split, out, format=format)
