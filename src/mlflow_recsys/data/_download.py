"""Checksum-verified download of a single file, cached on disk, through :mod:`pooch`."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from mlflow_recsys import _validation as validation
from mlflow_recsys._atomic import new_file_mode
from mlflow_recsys._digests import sha256_file
from mlflow_recsys.errors import DownloadError


def download(
    url: str, dest: str | os.PathLike, sha256: str, *, retries: int = 2, timeout: float = 30.0, progress: bool = True
) -> Path:
    """Fetch ``url`` to ``dest`` unless a file with the right checksum is already there; returns ``dest`` as a Path.

    An existing ``dest`` whose SHA-256 matches is reused without network access (and without importing :mod:`pooch`).
    Otherwise :func:`pooch.retrieve` streams the body to a temporary file in ``dest``'s folder and renames it onto
    ``dest`` only when its SHA-256 matches, so ``dest`` never holds a partial or wrong file; it then gets the mode a new
    file gets under the umask. A failed attempt (connection error, HTTP error, wrong checksum) is repeated up to
    ``retries`` times, after waits of 1, 2, ... seconds.

    Parameters
    ----------
    url:
        Address to fetch, ``http://`` or ``https://``.
    dest:
        Final path of the file; missing parent folders are created.
    sha256:
        Expected SHA-256 as 64 hex digits (case-insensitive). Required: a file is never accepted unchecked.
    retries:
        Further attempts after a failed one, an integer >= 0. Default 2.
    timeout:
        Seconds to wait for the connection and for each read. Default 30.
    progress:
        Show a tqdm progress bar on stderr. Default True.

    Raises
    ------
    ValueError
        Before any network access: if ``sha256`` is not 64 hex digits, if ``retries`` is not an integer >= 0, if
        ``dest`` is a folder, or if an existing ``dest`` has a different digest (it is left untouched). After the last
        attempt: if the downloaded body's digest differs (both digests are named and nothing is left in ``dest``'s
        folder).
    DownloadError
        If the server cannot be reached or answers with an error on every attempt; the message names ``dest`` and the
        digest so the file can be placed there by hand.
    """
    if not isinstance(sha256, str) or not re.fullmatch("[0-9a-f]{64}", sha256.lower()):
        raise ValueError(f"sha256: expected 64 hexadecimal digits, found {sha256!r}")
    validation.integer(retries, "retries", minimum=0)
    expected = sha256.lower()
    dest = Path(dest)
    if dest.is_dir():
        raise ValueError(f"{dest}: expected the downloaded file here, found a folder; remove it")
    if dest.exists():
        found = sha256_file(dest)
        if found != expected:
            # Someone may have placed this file by hand; overwriting it silently
            # (as pooch would) would hide the problem, so ask them to look at it.
            raise ValueError(
                f"{dest}: existing file has SHA-256 {found}, expected {expected}; "
                f"delete it to download again, or replace it with the file from {url}"
            )
        return dest
    import pooch  # here, not at module level: only a download needs it
    import requests

    downloader = pooch.HTTPDownloader(progressbar=progress, timeout=timeout)
    for attempt in range(retries + 1):
        try:
            pooch.retrieve(url, f"sha256:{expected}", fname=dest.name, path=dest.parent, downloader=downloader)
            break
        except (requests.RequestException, ValueError) as exc:
            if attempt == retries:
                raise _translated(exc, url, dest, expected) from exc
            time.sleep(attempt + 1)
    # pooch's temporary file is owner-only; give the cached file a new file's mode, as every file written here gets.
    os.chmod(dest, new_file_mode())
    return dest


def _translated(exc: Exception, url: str, dest: Path, expected: str) -> Exception:
    """pooch's error as this package words it: where to place the file by hand, or both digests."""
    if isinstance(exc, ValueError):  # pooch's checksum mismatch, "... expected <hash> but got <hash>. ..."
        found = re.search(r"got ([0-9a-f]{64})", str(exc))
        if found is None:
            return ValueError(f"{url}: {exc}")
        return ValueError(
            f"{url}: downloaded file has SHA-256 {found.group(1)}, expected {expected}; nothing was written to {dest}"
        )
    response = getattr(exc, "response", None)
    reason = f"HTTP {response.status_code} {response.reason}" if response is not None else str(exc)
    return DownloadError(
        f"could not download {url}: {reason}. If this machine is offline, fetch the file on another machine and "
        f"place it at {dest} (its SHA-256 must be {expected})."
    )
