"""Versioned JSON files (``report.json``, a model's ``config.json``, a checkpoint's ``manifest.json``,
``evaluation.json``, ``split.json``): each names its ``format`` and ``format_version``, and a reader refuses any other
with one message naming the file, what it expected and what it found."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mlflow_recsys._atomic import atomic_write


def dumps(kind: str, version: int, body: dict[str, Any]) -> str:
    """``body`` under ``format`` and ``format_version``, as indented JSON text ending in a newline."""
    document = {"format": kind, "format_version": version, **body}
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike, kind: str, version: int, body: dict[str, Any]) -> Path:
    """Write :func:`dumps` of ``body`` to ``path`` atomically (a temporary file renamed into place)."""
    path = Path(path)
    with atomic_write(path) as handle:
        handle.write(dumps(kind, version, body).encode("utf-8"))
    return path


def check(raw: bytes | str, where: str | os.PathLike, kind: str, version: int) -> dict[str, Any]:
    """The JSON object in ``raw``, once its ``format`` is ``kind`` and its ``format_version`` the integer ``version``
    (``True`` and ``1.0`` are not ``1``); else a ValueError naming ``where``, and the package version that wrote it
    when it says."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{where}: expected JSON, found invalid text ({exc})") from None
    if not isinstance(document, dict):
        raise ValueError(f"{where}: expected a JSON object, found {type(document).__name__}")
    if document.get("format") != kind:
        raise ValueError(f"{where}: expected format {kind!r}, found {document.get('format')!r}")
    found = document.get("format_version")
    if type(found) is not int or found != version:
        writer = document.get("package_version")
        hint = f" (written by mlflow-recsys {writer}; read it with that version)" if isinstance(writer, str) else ""
        raise ValueError(f"{where}: expected format_version {version}, found {found!r}{hint}")
    return document


def read_json(path: str | os.PathLike, kind: str, version: int) -> dict[str, Any]:
    """The checked document in the JSON file ``path`` (see :func:`check`); an unreadable file raises its ``OSError``."""
    return check(Path(path).read_bytes(), path, kind, version)
