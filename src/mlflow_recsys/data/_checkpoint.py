"""Build, read and load a recommendation split checkpoint (one zip file).

The zip holds ``manifest.json`` and one member per array: sparse matrices as ``.npz`` in the layout of
:func:`scipy.sparse.save_npz` (so :func:`scipy.sparse.load_npz` reads them) and id arrays as ``.npy``. The manifest
lists every member with its SHA-256 (``files``) and its size in bytes (``sizes``); a reader takes nothing else from the
zip. Every zip entry, the inner ``.npz`` ones included, carries a fixed timestamp and the manifest holds no clock time,
so the same inputs and seed give a byte-identical file."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys._digests import sha256_file, update_with_csr
from mlflow_recsys._sparse import canonical_csr
from mlflow_recsys.data import _checkpoint_zip as layout
from mlflow_recsys.data._datasets import get_dataset_spec, load_interactions
from mlflow_recsys.data._interactions import (
    column_bytes,
    from_interactions,
    interactions_digest,
    read_interactions_file,
)
from mlflow_recsys.data._preprocess import Preprocessed, preprocess_interactions
from mlflow_recsys.data._split import (
    MIN_EVAL_INTERACTIONS,
    UserSplit,
    evaluation_rule,
    leave_one_out,
    time_split,
    user_split,
)
from mlflow_recsys.data._split_config import SplitConfig


def build_recsys_checkpoint(
    dataset: str | os.PathLike | pd.DataFrame,
    data_dir: str | os.PathLike | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    split_mode: str = "user_split",
    eval_draws: int = 1,
    seed: int = 42,
    eval_holdout_frac: float | None = None,
    test_frac: float | None = None,
    val_frac: float | None = None,
    min_rating: float | None = 4.0,
    min_user_interactions: int = 5,
    min_item_interactions: int = 1,
    *,
    columns: Mapping[str, str | None] | None = None,
    overwrite: bool = False,
) -> Path:
    """Load a dataset, preprocess it, split it and write the checkpoint zip; returns its path (a ``pathlib.Path``).

    Pipeline: load (:func:`~mlflow_recsys.data.load_interactions`,
    :func:`~mlflow_recsys.data.read_interactions_file` or
    :func:`~mlflow_recsys.data.from_interactions`) ->
    :func:`~mlflow_recsys.data.preprocess_interactions` (the ``min_rating`` filter, one row per (user, item),
    the k-core) -> the split of ``split_mode``. See those functions for the meaning of the parameters. The manifest's
    ``preprocessing`` lists each step's rule and rows in and out, and its ``counts`` hold the rows each step removed
    (``n_removed_min_rating``, ``n_removed_duplicates``, ``n_removed_kcore``).

    Parameters
    ----------
    dataset:
        A registered name (e.g. ``"movielens-100k"``; ``mlflow-recsys datasets`` lists them), a path to a
        ``.csv``/``.parquet`` interaction log, or a DataFrame with columns user, item, value and optionally timestamp.
    data_dir:
        Cache folder for downloaded archives (see ``load_interactions``).
    checkpoint_path:
        Output zip. Default ``checkpoints/<dataset>-<split_mode>-seed<seed>.zip`` relative to the working directory.
        Parent folders are created; the file is written under a temporary name in the same folder and renamed, with the
        mode a new file gets under the umask (``0o644`` under ``0o022``).
    split_mode:
        ``"user_split"`` (strong generalisation, default), ``"leave_one_out"`` or ``"time_split"``.
    eval_draws:
        Fold-in/target draws per held-out user (``user_split`` only; the other
        modes are deterministic given the data and need 1). Default 1.
    seed:
        Integer >= 0 driving every random choice. Default 42.
    eval_holdout_frac:
        ``user_split`` only: share of a held-out user's items used as targets. Default (None) 0.2.
    test_frac, val_frac:
        ``user_split``: shares of users held out; ``time_split``: shares of the interactions (by time) after the cuts.
        Defaults (None) 0.2 and 0.1. Not used by ``leave_one_out``.
    min_rating, min_user_interactions, min_item_interactions:
        Binarisation threshold (None keeps every row) and k-core thresholds. Defaults 4.0, 5 and 1.
    columns:
        For a file or a DataFrame: which of its columns hold the ``user``, ``item``, ``value`` and ``timestamp`` (keys
        of this mapping; see :func:`~mlflow_recsys.data.from_interactions`). ``value: None`` reads the log
        as implicit feedback (every row a positive) and needs ``min_rating=None``. Recorded in the manifest. Default:
        the columns ``user``, ``item``, ``value`` and, if present, ``timestamp``.
    overwrite:
        Replace a file already at the checkpoint path. Default False: an
        existing checkpoint is refused before any data is loaded.

    Raises
    ------
    ValueError
        Unknown dataset or split mode, a parameter that does not apply to
        ``split_mode``, or invalid split/preprocessing parameters.
    FileNotFoundError
        If ``dataset`` looks like a path but no file is there.
    FileExistsError
        If a file is at the checkpoint path and ``overwrite`` is False.
    """
    if not isinstance(overwrite, bool):
        raise ValueError(f"overwrite: expected True or False, found {overwrite!r}")
    # Everything that can be checked without the data is checked before loading it.
    config = SplitConfig(
        split_mode=split_mode,
        seed=seed,
        eval_draws=eval_draws,
        eval_holdout_frac=eval_holdout_frac,
        test_frac=test_frac,
        val_frac=val_frac,
        min_rating=min_rating,
        min_user_interactions=min_user_interactions,
        min_item_interactions=min_item_interactions,
    )
    columns = _check_columns(columns, dataset)
    if columns.get("value", "value") is None and min_rating is not None:
        raise ValueError(
            f"min_rating: expected None for a log without ratings (columns value=None), found {min_rating!r}"
        )
    checkpoint_path = _checkpoint_path_iv(checkpoint_path, dataset, split_mode, seed, overwrite)
    raw, source = _load(dataset, data_dir, columns)
    prepared, split = _preprocess_and_split(raw, config)
    arrays = split_arrays(split)
    manifest = {
        "dataset": {
            **source,
            "interactions_sha256": interactions_digest(raw),
            "has_timestamps": "timestamp" in raw.columns,
        },
        "parameters": config.to_params(),
        "counts": _counts(raw, prepared, split),
        "preprocessing": [dataclasses.asdict(step) for step in prepared.steps],
        "split_digest": split_digest(arrays),
    }
    layout.write_zip(checkpoint_path, arrays, manifest)
    return checkpoint_path


def _checkpoint_path_iv(checkpoint_path, dataset, split_mode: str, seed, overwrite: bool) -> Path:
    if checkpoint_path is None:
        checkpoint_path = Path("checkpoints") / f"{_source_name(dataset)}-{split_mode}-seed{seed}.zip"
    checkpoint_path = Path(checkpoint_path)
    if checkpoint_path.is_dir():
        raise ValueError(f"checkpoint_path: expected a file path for the zip, found the folder {checkpoint_path}")
    if checkpoint_path.exists() and not overwrite:
        raise FileExistsError(
            f"checkpoint_path: {checkpoint_path} already exists; pass overwrite=True to replace it, "
            "or choose another path"
        )
    return checkpoint_path


#: How to get test rows out of a split that left none, by split mode (after the rule it enforces).
_MORE_TEST_ROWS = {
    "user_split": "raise test_frac (more test users) or lower min_user_interactions",
    "leave_one_out": "lower min_rating or min_item_interactions, or raise min_user_interactions to "
    f"{MIN_EVAL_INTERACTIONS['leave_one_out']} so that every user kept is evaluated",
    "time_split": "raise test_frac (an earlier cut) so that users active after it were active before it too",
}


def _preprocess_and_split(raw: pd.DataFrame, config: SplitConfig) -> tuple[Preprocessed, UserSplit]:
    """The preprocessed interactions and the split ``config`` asks for, refused without test rows."""
    prepared = preprocess_interactions(
        raw,
        min_rating=config.min_rating,
        min_user_interactions=config.min_user_interactions,
        min_item_interactions=config.min_item_interactions,
    )
    if config.split_mode == "time_split":
        split = time_split(prepared.frame, **config.split_keywords())
    else:
        split_function = user_split if config.split_mode == "user_split" else leave_one_out
        split = split_function(prepared.frame, seed=config.seed, **config.split_keywords())
    if split.test.source.shape[0] == 0:
        raise ValueError(
            f"{config.split_mode}: the split has no test rows ({split.test.n_users_dropped} test user(s) dropped "
            f"for lack of fold-in rows or targets); {evaluation_rule(config.split_mode)}: "
            f"{_MORE_TEST_ROWS[config.split_mode]}"
        )
    return prepared, split


def _readable(name: str) -> str:
    """A file name as UTF-8 text: a lone surrogate (a byte that is not UTF-8), which MLflow refuses, as ``\\udcff``."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _source_name(dataset) -> str:
    if isinstance(dataset, pd.DataFrame):
        return "interactions"
    if _is_file(dataset):
        return Path(dataset).stem
    return get_dataset_spec(dataset).name


def _is_file(dataset) -> bool:
    return isinstance(dataset, (str, os.PathLike)) and Path(dataset).suffix.lower() in (".csv", ".parquet")


_COLUMN_ROLES = ("user", "item", "value", "timestamp")


def _check_columns(columns, dataset) -> dict:
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise ValueError(
            f"columns: expected a mapping of {list(_COLUMN_ROLES)} to column names, found {type(columns).__name__}"
        )
    unknown = sorted(set(columns) - set(_COLUMN_ROLES))
    if unknown:
        raise ValueError(f"columns: expected keys among {list(_COLUMN_ROLES)}, found {unknown}")
    for role, name in columns.items():
        if name is None and role in ("value", "timestamp"):
            continue
        if not isinstance(name, str) or not name:
            raise ValueError(f"columns: expected a column name for {role!r}, found {name!r}")
    if columns and not (_is_file(dataset) or isinstance(dataset, pd.DataFrame)):
        get_dataset_spec(dataset)  # an unknown name is reported as such
        raise ValueError(
            f"columns: apply to a .csv/.parquet file or a DataFrame, found the registered "
            f"dataset {dataset!r}, whose columns are known"
        )
    return dict(columns)


def _load(dataset, data_dir, columns: dict) -> tuple[pd.DataFrame, dict]:
    """Raw interactions and the manifest's description of their source."""
    mapping = {"columns": columns} if columns else {}
    if isinstance(dataset, pd.DataFrame):
        return from_interactions(dataset, **columns), {"name": "interactions", "source": "frame", **mapping}
    if _is_file(dataset):
        path = Path(dataset)
        frame = read_interactions_file(path, **columns)
        return frame, {
            "name": _readable(path.stem),
            "source": "file",
            "file_name": _readable(path.name),
            "file_sha256": sha256_file(path),
            **mapping,
        }
    spec = get_dataset_spec(dataset)
    return load_interactions(dataset, data_dir), {
        "name": spec.name,
        "source": "registry",
        "url": spec.url,
        "archive_sha256": spec.sha256,
        "citation": spec.citation,
        "licence": spec.licence,
    }


def split_arrays(split: UserSplit) -> dict[str, Any]:
    """Arrays of a split under their checkpoint keys."""
    arrays = {"x_train": split.x_train, "train_user_ids": split.train_user_ids, "item_ids": split.item_ids}
    for name, group in (("test", split.test), ("val", split.val)):
        arrays[f"{name}_source_matrix"], arrays[f"{name}_target_matrix"] = group.source, group.target
        arrays[f"{name}_eval_user_ids"] = group.eval_user_ids
    return arrays


def split_digest(arrays: dict[str, Any]) -> str:
    """SHA-256 over the arrays in ``ARRAY_KEYS`` order: each matrix's canonical CSR (float32 data), each id
    array's :func:`column_bytes`."""
    h = hashlib.sha256()
    for key in layout.ARRAY_KEYS:
        h.update(f"{key}:".encode())
        value = arrays[key]
        if key in layout.MATRIX_KEYS:  # canonical CSR, as a split and a load make them
            update_with_csr(h, value)
            h.update(value.data.tobytes())
        else:
            h.update(column_bytes(np.asarray(value)))
    return h.hexdigest()


@contextlib.contextmanager
def read_checkpoint(path: str | os.PathLike) -> Iterator[Path]:
    """Extract a checkpoint zip into a temporary folder for the duration of a ``with``.

    Yields the folder (holding ``manifest.json`` and the array files); it is deleted on exit.

    The zip is treated as untrusted: only the members its manifest lists are written, each streamed and counted so that
    no more than its declared size is ever written (the zip headers' sizes are not trusted), and each must match its
    declared size and SHA-256. A zip holding anything else, such as an unlisted member, is refused before anything is
    written.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist (the message names it).
    ValueError
        If ``path`` is not a zip, is truncated, has no valid manifest, has another format name or a schema version other
        than 1, lacks member sizes, holds a member the manifest does not list (named in the message) or lacks one it
        lists, or a member's size or SHA-256 differs from the manifest's.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: expected a checkpoint zip file, found a file that is not a zip")
    try:
        with zipfile.ZipFile(path) as zf:
            manifest_bytes, manifest = layout.read_manifest(zf, path)
            with tempfile.TemporaryDirectory(prefix="mlflow-recsys-checkpoint-") as tmp:
                (Path(tmp) / layout.MANIFEST_NAME).write_bytes(manifest_bytes)
                layout.extract_members(zf, manifest, path, Path(tmp))
                yield Path(tmp)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ValueError(f"{path}: the checkpoint zip is truncated or corrupted ({exc})") from None


@dataclasses.dataclass(frozen=True, eq=False)
class LoadedSplit:
    """A split as :func:`load_recsys_split` reads it (whose docstring says what each field holds); ``split["x_train"]``
    is ``split.x_train``."""

    x_train: sp.csr_matrix
    test_source_matrix: sp.csr_matrix
    test_target_matrix: sp.csr_matrix
    val_source_matrix: sp.csr_matrix
    val_target_matrix: sp.csr_matrix
    train_user_ids: np.ndarray
    item_ids: np.ndarray
    test_eval_user_ids: np.ndarray
    val_eval_user_ids: np.ndarray
    manifest: dict
    split_digest: str

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)


def load_recsys_split(root: str | os.PathLike) -> LoadedSplit:
    """Load the split arrays and manifest from ``root``, a folder yielded by :func:`read_checkpoint` or the zip itself.

    Returns a :class:`LoadedSplit`: ``x_train`` csr float32 (n_train_users, n_items); ``train_user_ids``
    (n_train_users,); ``item_ids`` (n_items,); ``test_source_matrix`` and ``test_target_matrix`` csr float32
    (n_test_rows, n_items); ``test_eval_user_ids`` (n_test_rows,); the same three for ``val_``; ``manifest`` (dict);
    ``split_digest`` (str). Ids are int64 for integer raw ids, else str. Each is an attribute, and ``split["x_train"]``
    works too.

    Raises
    ------
    FileNotFoundError
        If ``root`` or a member file is missing.
    ValueError
        If the manifest is not a version-1 checkpoint manifest, or the arrays do
        not match the manifest's ``split_digest``.
    """
    root = Path(root)
    if root.is_file():
        with read_checkpoint(root) as extracted:
            return load_recsys_split(extracted)
    if not root.is_dir():
        raise FileNotFoundError(f"checkpoint not found: {root}")
    manifest_path = root / layout.MANIFEST_NAME
    if not manifest_path.is_file():
        raise FileNotFoundError(f"checkpoint manifest not found: {manifest_path}")
    manifest = layout.check_manifest(manifest_path.read_bytes(), manifest_path)
    out: dict[str, Any] = {}
    for key in layout.ARRAY_KEYS:
        file = root / layout.member_name(key)
        if not file.is_file():
            raise FileNotFoundError(f"checkpoint array file not found: {file}")
        matrix = key in layout.MATRIX_KEYS
        out[key] = canonical_csr(sp.load_npz(file), key) if matrix else np.load(file, allow_pickle=False)
    digest = split_digest(out)
    if digest != manifest["split_digest"]:
        raise ValueError(
            f"{root}: expected arrays with split_digest {manifest['split_digest']}, "
            f"found {digest} (the checkpoint is damaged or was edited)"
        )
    return LoadedSplit(**out, manifest=manifest, split_digest=digest)


def _counts(raw, prepared: Preprocessed, split: UserSplit) -> dict[str, int]:
    """The manifest's counts, logged as the split run's metrics."""
    report = prepared.prune
    counts = {
        "n_raw_interactions": int(len(raw)),
        "n_raw_users": int(raw["user"].nunique()),
        "n_raw_items": int(raw["item"].nunique()),
        **{f"n_removed_{step.step}": int(step.removed) for step in prepared.steps},
        "n_positive_interactions": int(report.n_interactions_before),
        "kcore_iterations": int(report.iterations),
        "n_interactions": int(report.n_interactions_after),
        "n_users": int(report.n_users_after),
        "n_items_after_pruning": int(report.n_items_after),
        "n_items": int(len(split.item_ids)),
        "n_train_users": int(split.x_train.shape[0]),
        "n_train_interactions": int(split.x_train.nnz),
    }
    for name, group in (("test", split.test), ("val", split.val)):
        counts[f"n_{name}_users"] = int(len(np.unique(group.eval_user_ids)))
        counts[f"n_{name}_rows"] = int(group.source.shape[0])
        counts[f"n_{name}_source_interactions"] = int(group.source.nnz)
        counts[f"n_{name}_target_interactions"] = int(group.target.nnz)
        counts[f"n_{name}_users_dropped"] = int(group.n_users_dropped)
    if split.cut_timestamps is not None:
        counts["val_cut_timestamp"], counts["test_cut_timestamp"] = map(int, split.cut_timestamps)
    return counts
