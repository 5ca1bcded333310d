"""A split written out as plain files that other frameworks read: interactions with the dataset's own ids.

A LensKit, RecBole, implicit or Cornac user trains on ``train`` plus each test user's ``test_fold_in`` rows and ranks
items for exactly the users of ``test_targets``; the lists go back in through
:func:`~mlflow_recsys.interchange._recommendations.read_recommendations`. No MLflow here."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys import _envelope
from mlflow_recsys._atomic import atomic_directory
from mlflow_recsys._validation import expected, one_of
from mlflow_recsys.data._checkpoint import LoadedSplit

#: The ``format`` field of ``split.json``.
FORMAT = "mlflow-recsys-split-export"
#: The ``format_version`` this module writes.
FORMAT_VERSION = 1
#: File formats of the interaction files (``split.json`` is always JSON).
FORMATS = ("parquet", "csv")
#: File stem -> (matrix, row ids) of a LoadedSplit (see :func:`mlflow_recsys.data.load_recsys_split`).
FILES = {
    "train": ("x_train", "train_user_ids"),
    "test_fold_in": ("test_source_matrix", "test_eval_user_ids"),
    "test_targets": ("test_target_matrix", "test_eval_user_ids"),
    "val_fold_in": ("val_source_matrix", "val_eval_user_ids"),
    "val_targets": ("val_target_matrix", "val_eval_user_ids"),
}
_COLUMNS = {
    "user": "the dataset's user id",
    "item": "the dataset's item id",
    "draw": "evaluation draw (0-based), only in the evaluation files of a split with several draws per user",
}
_MEANING = {
    "train": "every interaction of the training users",
    "test_fold_in": "each test user's history: what a model sees of that user when it ranks",
    "test_targets": "each test user's held-out items, the targets the metrics look for",
    "val_fold_in": "as test_fold_in, for the validation users",
    "val_targets": "as test_targets, for the validation users",
    "items": "the catalogue: every item a model may rank, in model-column order",
}


def check_out_folder(out: str | os.PathLike) -> Path:
    """``out`` as a Path when it is a new or empty folder in an existing one, else ValueError (FileNotFoundError
    without its parent)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        what = "a folder that holds something" if out.is_dir() else "a file"
        raise ValueError(f"{expected('out', 'a new or empty folder', str(out))} ({what})")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"out: expected its parent {str(out.parent)!r} to be an existing folder, found none")
    return out


def export_split_files(split: LoadedSplit, out: str | os.PathLike, *, format: str = "parquet") -> Path:
    """Write ``split`` to the new folder ``out`` as interaction files with the dataset's own ids.

    Files (Parquet, or CSV with ``format="csv"``): ``train`` (``user``, ``item``: the training users'
    interactions), ``test_fold_in`` and ``test_targets`` (each test user's history and held-out items),
    ``val_fold_in`` and ``val_targets`` (the same for validation), each with a ``draw`` column (int64, 0-based)
    when the split holds several evaluation draws per user; ``items`` (``item``: the catalogue, in model-column
    order); and ``split.json``: ``format`` (:data:`FORMAT`), ``format_version``, the dataset, the protocol
    parameters and seed, the ``split_digest``, each file's rows and users, and what every file and column
    means. Ids keep their type (int64, or text). The folder is filled under a temporary name and renamed, so a
    failure leaves nothing at ``out``. Returns ``out`` as a :class:`pathlib.Path`.

    ``split`` is what :func:`~mlflow_recsys.data.load_recsys_split` returns; ``out`` the folder to create (its parent
    must exist, and ``out`` must not, or be an empty folder); ``format`` ``"parquet"`` (default) or ``"csv"``.

    Raises
    ------
    ValueError
        If ``format`` is not one of :data:`FORMATS`, ``split`` is not a LoadedSplit, or ``out`` is a file or a
        folder with something in it; before anything is written.
    FileNotFoundError
        If the parent of ``out`` does not exist.
    """
    one_of(format, "format", FORMATS)
    if not isinstance(split, LoadedSplit):
        raise ValueError(expected("split", "a split as load_recsys_split returns it", split))
    out = check_out_folder(out)
    frames = {stem: _pairs(split[matrix], split[ids], split.item_ids) for stem, (matrix, ids) in FILES.items()}
    frames["items"] = pd.DataFrame({"item": split.item_ids})
    if out.exists():
        out.rmdir()  # empty: the atomic folder takes its place
    with atomic_directory(out) as tmp:
        for stem, frame in frames.items():
            getattr(frame, f"to_{format}")(tmp / f"{stem}.{format}", index=False)  # to_parquet or to_csv
        _envelope.write_json(tmp / "split.json", FORMAT, FORMAT_VERSION, _description(split, frames, format))
    return out


def _pairs(matrix: sp.csr_matrix, row_ids: np.ndarray, item_ids: np.ndarray) -> pd.DataFrame:
    """One (user, item) row per stored entry of ``matrix``, in row order, with ``draw`` when rows repeat users in
    stacked blocks (``eval_draws > 1``)."""
    coo = matrix.tocoo()
    frame = pd.DataFrame({"user": row_ids[coo.row], "item": item_ids[coo.col]})
    n_users = len(pd.unique(row_ids))
    if n_users and matrix.shape[0] > n_users:
        frame.insert(0, "draw", (coo.row // n_users).astype(np.int64))
    return frame


def _description(split: LoadedSplit, frames: dict[str, pd.DataFrame], format: str) -> dict:
    """``split.json``: what the folder holds and how it was made."""
    manifest = split.manifest
    return {
        "dataset": manifest["dataset"]["name"],
        "parameters": manifest["parameters"],
        "seed": manifest["parameters"].get("seed"),
        "split_digest": split.split_digest,
        "files": {
            f"{stem}.{format}": {
                "meaning": _MEANING[stem],
                "columns": {c: _COLUMNS[c] for c in frame.columns},
                "rows": len(frame),
                **({"users": int(frame["user"].nunique())} if "user" in frame.columns else {}),
            }
            for stem, frame in frames.items()
        },
        "counts": manifest["counts"],
    }
