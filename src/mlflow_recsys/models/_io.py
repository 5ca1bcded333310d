"""Saving and loading model directories without pickle.

A saved model is a directory holding ``config.json`` (model name, format
version, hyper-parameters, fitted metadata) and one ``.npy`` file per array.
Each file is written under a temporary name in the same directory and renamed
into place, and ``config.json`` is written last, so a directory with a
``config.json`` is never a half-written model.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "mlflow-recsys-model"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"


def _write_atomic(target: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_model_dir(
    path: str | os.PathLike,
    *,
    model_name: str,
    config: dict[str, Any] | None,
    state: dict[str, Any],
    arrays: dict[str, np.ndarray],
) -> Path:
    """Write ``arrays`` as ``<key>.npy`` then ``config.json`` into directory ``path``.

    ``config`` holds the hyper-parameters (or None), ``state`` JSON-serialisable
    fitted metadata such as ``n_items``. Returns the directory path.
    """
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    for key, array in arrays.items():
        _write_atomic(root / f"{key}.npy", lambda h, a=array: np.save(h, np.asarray(a), allow_pickle=False))
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": model_name,
        "config": config,
        "state": state,
        "arrays": sorted(arrays),
        # Digests let load() tell a tampered or truncated weights file from a good one.
        "sha256": {key: _sha256(root / f"{key}.npy") for key in sorted(arrays)},
    }
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    _write_atomic(root / CONFIG_FILE, lambda h: h.write(text.encode("utf-8")))
    return root


def load_model_dir(path: str | os.PathLike, model_name: str) -> tuple[dict | None, dict, dict[str, np.ndarray]]:
    """Read a directory written by :func:`save_model_dir` -> (config, state, arrays).

    Raises
    ------
    FileNotFoundError
        If ``path`` or its ``config.json`` or a listed array file is missing.
    ValueError
        If ``config.json`` is not a model of this format/version or belongs to
        another model class.
    """
    root = Path(path)
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"path: expected a saved model directory with {CONFIG_FILE}, found none at {root}")
    try:
        document = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"path: {config_path} is not valid JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"path: expected {config_path} to declare format {FORMAT!r}, found {document.get('format') if isinstance(document, dict) else document!r}")
    if document.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"path: expected model format_version {FORMAT_VERSION}, found {document.get('format_version')!r}"
        )
    if document.get("model") != model_name:
        raise ValueError(f"path: expected a saved {model_name} model, found {document.get('model')!r}")
    arrays = {}
    digests = document.get("sha256", {})
    for key in document.get("arrays", []):
        file = root / f"{key}.npy"
        if not file.is_file():
            raise FileNotFoundError(f"path: saved model is missing array file {file}")
        expected = digests.get(key)
        if expected is not None and _sha256(file) != expected:
            raise ValueError(
                f"path: weights file {file.name} does not match the sha256 recorded at save time "
                f"(expected {expected[:16]}..., found {_sha256(file)[:16]}...); it was modified or truncated"
            )
        arrays[key] = np.load(file, allow_pickle=False)
    return document.get("config"), document.get("state", {}), arrays


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
