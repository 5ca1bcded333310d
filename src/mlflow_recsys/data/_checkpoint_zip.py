"""A checkpoint zip's layout: its members, its manifest's checks, the reproducible writer and the bounded reader."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from mlflow_recsys import _envelope
from mlflow_recsys._atomic import atomic_write
from mlflow_recsys.data import _safezip as safezip

CHECKPOINT_FORMAT = "mlflow-recsys-checkpoint"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
# Members in the order they are written and hashed into split_digest.
MATRIX_KEYS = ("x_train", "test_source_matrix", "test_target_matrix", "val_source_matrix", "val_target_matrix")
ARRAY_KEYS = MATRIX_KEYS + ("train_user_ids", "item_ids", "test_eval_user_ids", "val_eval_user_ids")
#: Largest ``manifest.json`` a reader accepts; a real one is a few KiB.
MAX_MANIFEST_BYTES = 1 << 20
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_CHUNK = 1 << 20


def write_zip(path: Path, arrays: dict[str, Any], manifest: dict) -> None:
    """Write the checkpoint zip of ``arrays`` and ``manifest``, adding each member's SHA-256 and size to it."""
    members: dict[str, bytes] = {}
    manifest["files"], manifest["sizes"] = {}, {}
    for key in ARRAY_KEYS:
        name = member_name(key)
        members[name] = _npz_bytes(arrays[key]) if key in MATRIX_KEYS else _npy_bytes(arrays[key])
        manifest["files"][name] = hashlib.sha256(members[name]).hexdigest()
        # A reader bounds each member by this size, so a tampered zip cannot make it write more.
        manifest["sizes"][name] = len(members[name])
    manifest_bytes = _envelope.dumps(CHECKPOINT_FORMAT, FORMAT_VERSION, manifest).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh, zipfile.ZipFile(fh, "w") as zf:
        for name, payload in {MANIFEST_NAME: manifest_bytes, **members}.items():
            _add_member(zf, name, payload, zipfile.ZIP_DEFLATED)


def read_manifest(zf: zipfile.ZipFile, path: Path) -> tuple[bytes, dict]:
    """The manifest's bytes and checked content, once the zip's members are safe and exactly those it lists."""
    safezip.check_members(zf, path)
    names = zf.namelist()
    if MANIFEST_NAME not in names:
        raise ValueError(f"{path}: expected a {MANIFEST_NAME} in the zip, found {names[:10]}")
    buffer = io.BytesIO()
    _stream_member(zf, MANIFEST_NAME, MAX_MANIFEST_BYTES, buffer.write, "the manifest size limit")
    manifest = check_manifest(buffer.getvalue(), path)
    # Exactly the manifest and the files it lists, each once.
    listed = set(manifest["sizes"])
    seen: set[str] = set()
    for name in names:
        if name != MANIFEST_NAME and name not in listed:
            raise ValueError(
                f"{path}: refusing zip member {name!r}: the manifest does not list it (a checkpoint holds only "
                f"{MANIFEST_NAME} and the files its manifest lists); nothing was extracted"
            )
        if name in seen:
            raise ValueError(f"{path}: refusing zip member {name!r}: it appears more than once; nothing was extracted")
        seen.add(name)
    missing = sorted(listed - seen)
    if missing:
        raise ValueError(f"{path}: expected the manifest's files {missing} in the zip, found none")
    total = sum(manifest["sizes"].values())
    if total > safezip.MAX_UNCOMPRESSED_BYTES:
        raise ValueError(
            f"{path}: expected at most {safezip.MAX_UNCOMPRESSED_BYTES:,} bytes uncompressed, "
            f"found {total:,} declared in the manifest"
        )
    return buffer.getvalue(), manifest


def extract_members(zf: zipfile.ZipFile, manifest: dict, path: Path, folder: Path) -> None:
    """Write each member the manifest lists into ``folder``, refused past its declared size or at another SHA-256."""
    for name, size in manifest["sizes"].items():
        with open(folder / name, "xb") as out:
            digest, count = _stream_member(zf, name, size, out.write, "its declared size")
        if count != size:
            raise ValueError(
                f"{path}: zip member {name!r} expected {size:,} bytes (its declared size), found {count:,}"
            )
        if digest != manifest["files"][name]:
            raise ValueError(
                f"{path}: member {name!r} expected SHA-256 {manifest['files'][name]} (from the "
                f"manifest), found {digest}; the checkpoint is damaged or was edited"
            )


def _stream_member(
    zf: zipfile.ZipFile, name: str, limit: int, write: Callable[[bytes], Any], bound: str
) -> tuple[str, int]:
    """Copy member ``name`` to ``write``, refused past ``limit`` bytes (named ``bound``) -> (SHA-256, bytes).

    Counted as it is decompressed, not trusted by its zip header: at most ``limit + 1`` bytes are decompressed."""
    h = hashlib.sha256()
    count = 0
    with zf.open(name) as member:
        while chunk := member.read(min(_CHUNK, limit - count + 1)):
            if count + len(chunk) > limit:
                raise ValueError(
                    f"{zf.filename}: refusing zip member {name!r}: expected at most {limit:,} bytes ({bound}), "
                    f"found at least {count + len(chunk):,}; stopped reading there"
                )
            write(chunk)
            h.update(chunk)
            count += len(chunk)
    return h.hexdigest(), count


def member_name(key: str) -> str:
    return f"{key}.npz" if key in MATRIX_KEYS else f"{key}.npy"


def check_manifest(raw: bytes, where: Path) -> dict:
    """The manifest in ``raw``, refused unless it is a checkpoint's of this version listing every member."""
    manifest = _envelope.check(raw, where, CHECKPOINT_FORMAT, FORMAT_VERSION)
    if not isinstance(manifest.get("split_digest"), str):
        raise ValueError(f"{where}: expected a split_digest string in the manifest, found none")
    expected = sorted(member_name(key) for key in ARRAY_KEYS)
    for key in ("files", "sizes"):
        listed = manifest.get(key)
        if not isinstance(listed, dict) or sorted(listed) != expected:
            found = sorted(listed) if isinstance(listed, dict) else listed
            raise ValueError(f"{where}: expected the manifest's {key!r} to list {expected}, found {found!r}")
    files, sizes = manifest["files"], manifest["sizes"]
    for name in expected:
        size, digest = sizes[name], files[name]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"{where}: sizes[{name!r}]: expected an integer >= 0, found {size!r}")
        if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"{where}: files[{name!r}]: expected a SHA-256 of 64 hex digits, found {digest!r}")
    return manifest


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def _npz_bytes(matrix: sp.csr_matrix) -> bytes:
    # scipy.sparse.save_npz stamps zip entries with the current time; a fixed time keeps the bytes reproducible.
    parts = {"indices": matrix.indices, "indptr": matrix.indptr, "format": np.array(b"csr")}
    parts |= {"shape": np.asarray(matrix.shape, dtype=np.int64), "data": matrix.data}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, value in parts.items():
            _add_member(zf, f"{name}.npy", _npy_bytes(value), zipfile.ZIP_STORED)
    return buf.getvalue()


def _add_member(zf: zipfile.ZipFile, name: str, payload: bytes, compression: int) -> None:
    info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
    info.compress_type = compression
    info.create_system = 3
    info.external_attr = 0o644 << 16
    zf.writestr(info, payload, compress_type=compression, compresslevel=6 if compression else None)
