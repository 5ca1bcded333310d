"""Saving and loading model directories without pickle.

A saved model is a directory holding ``config.json`` (model name, format version, hyper-parameters, fitted metadata, a
SHA-256 per array) and one ``.npy`` file per array. Each file is written under a temporary name in the same directory
and renamed into place, and ``config.json`` is written last, so a directory with a ``config.json`` is never a
half-written model.

The digests sit beside the weights in the same writable folder. They catch corruption, truncation and accidental edits
of a weights file; they cannot stop anyone who can write to the folder (or the artifact store holding it), who can
rewrite weights and digests together.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from mlflow_recsys import _envelope
from mlflow_recsys._atomic import atomic_write
from mlflow_recsys._digests import sha256_file

FORMAT = "mlflow-recsys-model"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"

# Array names become file names: no separators or dots, so a config cannot point outside its folder.
_ARRAY_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def save_model_dir(
    path: str | os.PathLike,
    *,
    model_name: str,
    config: dict[str, Any] | None,
    state: dict[str, Any],
    arrays: dict[str, np.ndarray],
) -> Path:
    """Write ``arrays`` as ``<key>.npy``, then ``config.json`` with ``config`` (hyper-parameters or None) and ``state``
    (fitted metadata such as ``n_items``); ValueError, before anything is written, for an array name that is not
    letters, digits and ``_``."""
    for key in arrays:
        if not isinstance(key, str) or not _ARRAY_NAME.match(key):
            raise ValueError(f"arrays: expected names of letters, digits and '_', found {key!r}")
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    for key, array in arrays.items():
        with atomic_write(root / f"{key}.npy") as handle:
            np.save(handle, np.asarray(array), allow_pickle=False)
    document = {
        "model": model_name,
        "config": config,
        "state": state,
        "arrays": sorted(arrays),
        "sha256": {key: sha256_file(root / f"{key}.npy") for key in sorted(arrays)},
    }
    _envelope.write_json(root / CONFIG_FILE, FORMAT, FORMAT_VERSION, document)
    return root


def load_model_dir(path: str | os.PathLike, model_name: str) -> tuple[dict | None, dict, dict[str, np.ndarray]]:
    """Read a directory written by :func:`save_model_dir` -> (config, state, arrays), each array checked against its
    SHA-256 in ``config.json`` (a config without one per array is refused, not loaded unchecked). FileNotFoundError
    for a missing file, ValueError for a config of another format, version or model, or a digest that does not match.
    """
    root = Path(path)
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"path: expected a saved model directory with {CONFIG_FILE}, found none at {root}")
    document = _envelope.read_json(config_path, FORMAT, FORMAT_VERSION)
    if document.get("model") != model_name:
        raise ValueError(f"path: expected a saved {model_name} model, found {document.get('model')!r}")
    names = document.get("arrays")
    if not isinstance(names, list) or not all(isinstance(n, str) and _ARRAY_NAME.match(n) for n in names):
        raise ValueError(f"path: {config_path}: expected 'arrays' to be a list of array names, found {names!r}")
    digests = document.get("sha256")
    digests = digests if isinstance(digests, dict) else {}
    undigested = [n for n in names if not isinstance(digests.get(n), str)]
    if undigested:
        raise ValueError(
            f"path: {config_path}: expected a sha256 digest for every array, found none for {undigested}; "
            "a model without digests is not loaded unchecked"
        )
    arrays = {}
    for key in names:
        file = root / f"{key}.npy"
        if not file.is_file():
            raise FileNotFoundError(f"path: saved model is missing array file {file}")
        expected, found = digests[key], sha256_file(file)
        if found != expected:
            raise ValueError(
                f"path: weights file {file.name} does not match the sha256 recorded at save time "
                f"(expected {expected[:16]}..., found {found[:16]}...); it was modified or truncated"
            )
        arrays[key] = np.load(file, allow_pickle=False)
    return document.get("config"), document.get("state", {}), arrays
