"""One artifact file fetched from the artifact store, a missing file told apart from a failed download.

``mlflow.artifacts.download_artifacts`` turns every failure of a ``runs:/`` download, a full local disk
included, into "Failed to download artifacts from path ..., please ensure that the path is correct", and for other
URIs folds the failures into one message without their exceptions. So :func:`download_file` asks the store
whether the file is there first (a missing file is :class:`FileNotFoundError`) and then copies it itself, letting
the real error through: ``ENOSPC`` with the path it could not write, the server's answer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from tqdm.auto import tqdm

from mlflow_recsys._validation import whole_number_env
from mlflow_recsys.errors import SYSTEM_ERRNOS

T = TypeVar("T")
R = TypeVar("R")

#: How many runs' artifacts are downloaded at once (default 8, at most 64): a comparison's per-user files, a query's
#: report tables. Bounded so one comparison cannot flood the tracking server.
DOWNLOAD_THREADS_ENV = "MLFLOW_RECSYS_DOWNLOAD_THREADS"


def download_threads() -> int:
    """Downloads at once, from :data:`DOWNLOAD_THREADS_ENV`; ValueError naming the variable if it is set to anything
    but a whole number from 1 to 64. Callers read it before any run is created, so a bad value writes nothing."""
    return whole_number_env(DOWNLOAD_THREADS_ENV, 8, 64)


def download_each(fetch: Callable[[T], R], items: Sequence[T], *, threads: int, desc: str) -> list[R]:
    """``fetch`` of every item, in order, by ``threads`` threads (the caller's :func:`download_threads`, read once
    before it wrote anything) under a progress bar."""
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(items)))) as pool:
        return list(tqdm(pool.map(fetch, items), total=len(items), desc=desc, unit="run", disable=None))


def download_file(artifact_uri: str, dst_dir: str | os.PathLike) -> Path:
    """Download the file at ``artifact_uri`` into the folder ``dst_dir``; return its local path.

    FileNotFoundError, not redacted (callers redact what they show), if the store holds no file there."""
    parent, _, name = artifact_uri.rstrip("/").rpartition("/")
    found = download_files(parent, [name], dst_dir)
    if name not in found:
        raise FileNotFoundError(f"no artifact file {name!r} in {_underlying(parent)}")
    return found[name]


def download_files(artifact_dir_uri: str, names: Iterable[str], dst_dir: str | os.PathLike) -> dict[str, Path]:
    """Those of the files ``names`` that the folder ``artifact_dir_uri`` holds, downloaded into ``dst_dir`` after
    one listing: name -> local path. A missing file is absent; otherwise raises as :func:`download_file`."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    repo = get_artifact_repository(_underlying(artifact_dir_uri))
    listed = {Path(info.path).name: info for info in repo.list_artifacts()}
    out = {}
    for name in names:
        if name not in listed or listed[name].is_dir:
            continue
        local = Path(dst_dir) / name
        try:
            # The one-file step of ArtifactRepository.download_artifacts, which every store implements; called
            # here because download_artifacts keeps only the text of what failed.
            repo._download_file(remote_file_path=name, local_path=str(local))
        except OSError as exc:
            if exc.errno in SYSTEM_ERRNOS and exc.filename is None:  # shutil's copy names no file: say which
                exc.filename = str(local)
            raise
        out[name] = local
    return out


def _underlying(uri: str) -> str:
    """The store's own URI of a ``runs:/`` URI (any other URI as it is)."""
    from mlflow.store.artifact.runs_artifact_repo import RunsArtifactRepository

    return RunsArtifactRepository.get_underlying_uri(uri) if uri.startswith("runs:/") else uri
