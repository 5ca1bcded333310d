"""SHA-256 digests, each kind computed one way: of a file (streamed), of a text, of a sparse matrix's canonical CSR
content (equal interaction sets, equal digests, whatever their storage order)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import scipy.sparse as sp

_CHUNK = 1 << 16


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 hex digest (lower case) of the file at ``path``, read in 64 KiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def text_digest(text: str, length: int = 10) -> str:
    """The first ``length`` hex characters of the SHA-256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def update_with_csr(h: hashlib._Hash, m: sp.csr_matrix) -> None:
    """Feed ``h`` a canonical CSR matrix's structure: its shape as ``<rows>x<cols>``, then int64 indptr and indices."""
    h.update(f"{m.shape[0]}x{m.shape[1]}".encode())
    h.update(np.asarray(m.indptr, dtype=np.int64).tobytes())
    h.update(np.asarray(m.indices, dtype=np.int64).tobytes())


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis and a hash, so cut names stay distinct."""
    if len(text) <= width:
        return text
    tail = f"…[{text_digest(text, 6)}]"
    return text[: max(width - len(tail), 1)] + tail
