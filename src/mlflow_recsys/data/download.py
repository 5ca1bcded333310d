"""Checksum-verified download of a single file, cached on disk."""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

from mlflow_recsys._atomic import atomic_write
from mlflow_recsys.errors import DownloadError

_CHUNK = 1 << 16
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 hex digest (lower case) of the file at ``path``, read in 64 KiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def download(
    url: str,
    dest: str | os.PathLike,
    sha256: str,
    *,
    expected_size: int | None = None,
    timeout: float = 30.0,
    progress: bool = True,
) -> Path:
    """Fetch ``url`` to ``dest`` unless a file with the right checksum is already there.

    The body is streamed to a temporary file in ``dest``'s folder, hashed while
    it is written, and renamed onto ``dest`` only when its SHA-256 matches, so
    ``dest`` never holds a partial or wrong file; it gets the mode a new file
    gets under the umask. An existing ``dest`` is reused
    (no network access) when its digest matches.

    Parameters
    ----------
    url:
        Address to fetch (any scheme urllib handles).
    dest:
        Final path of the file; missing parent folders are created.
    sha256:
        Expected SHA-256 as 64 hex digits (case-insensitive). Required: a file
        is never accepted unchecked.
    expected_size:
        Size in bytes used for the progress bar when the server sends no
        Content-Length. Not enforced; the checksum is.
    timeout:
        Seconds to wait for the connection and for each read. Default 30.
    progress:
        Show a tqdm progress bar. Default True.

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    ValueError
        If ``sha256`` is not 64 hex digits; if the downloaded body's digest
        differs (both digests are named and nothing is left at ``dest``); or if
        an existing ``dest`` has a different digest (it is left untouched).
    DownloadError
        If the server cannot be reached or answers with an error; the message
        names ``dest`` so the file can be placed there by hand.
    """
    if not isinstance(sha256, str) or not _HEX64.match(sha256.lower()):
        raise ValueError(f"sha256: expected 64 hexadecimal digits, found {sha256!r}")
    expected = sha256.lower()
    dest = Path(dest)
    if dest.is_dir():
        raise ValueError(f"{dest}: expected the downloaded file here, found a folder; remove it")
    if dest.exists():
        found = sha256_file(dest)
        if found != expected:
            # Someone may have placed this file by hand; overwriting it silently
            # would hide the problem, so ask them to look at it.
            raise ValueError(
                f"{dest}: existing file has SHA-256 {found}, expected {expected}; "
                f"delete it to download again, or replace it with the file from {url}"
            )
        return dest

    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(dest, suffix=".part") as out:
        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else expected_size
                with tqdm(
                    total=total,
                    unit="B",
                    unit_scale=True,
                    desc=dest.name,
                    disable=not progress,
                ) as bar:
                    for chunk in iter(lambda: response.read(_CHUNK), b""):
                        out.write(chunk)
                        h.update(chunk)
                        bar.update(len(chunk))
        except (urllib.error.URLError, OSError) as exc:
            if isinstance(exc, urllib.error.HTTPError):
                reason = f"HTTP {exc.code} {exc.reason}"
            else:
                reason = getattr(exc, "reason", None) or exc
            raise DownloadError(
                f"could not download {url}: {reason}. If this machine is offline, "
                f"fetch the file on another machine and place it at {dest} "
                f"(its SHA-256 must be {expected})."
            ) from exc
        found = h.hexdigest()
        if found != expected:
            raise ValueError(
                f"{url}: downloaded file has SHA-256 {found}, expected {expected}; "
                f"nothing was written to {dest}"
            )
    return dest
