"""One artifact file fetched from the artifact store, a missing file told apart from a failed download.

``mlflow.artifacts.download_artifacts`` turns every failure of a ``runs:/`` download, a full local disk
included, into "Failed to download artifacts from path ..., please ensure that the path is correct", and for other
URIs folds the failures into one message without their exceptions. So :func:`download_file` asks the store
whether the file is there first (a missing file is :class:`FileNotFoundError`) and then copies it itself, letting
the real error through: ``ENOSPC`` with the path it could not write, the server's answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from mlflow_recsys.errors import SYSTEM_ERRNOS


def download_file(artifact_uri: str, dst_dir: str | os.PathLike) -> Path:
    """Download the artifact file at ``artifact_uri`` into the folder ``dst_dir``; return its local path.

    Parameters
    ----------
    artifact_uri : str
        ``runs:/<run id>/<path>``, ``mlflow-artifacts:/...`` or any artifact store URI MLflow reads, naming one
        file.
    dst_dir : str or os.PathLike
        An existing local folder; the file keeps its name there.

    Raises
    ------
    FileNotFoundError
        If the store holds no file at ``artifact_uri`` (a folder there counts as none). The message names the
        file and the folder looked in, not redacted (callers redact what they show).
    MlflowException
        If the run of a ``runs:/`` URI does not exist (``RESOURCE_DOES_NOT_EXIST``) or the store fails.
    OSError
        If the local copy cannot be written; a disk full (``ENOSPC``) or a file too large (``EFBIG``) names the
        local path.
    """
    parent, _, name = artifact_uri.rstrip("/").rpartition("/")
    found = download_files(parent, [name], dst_dir)
    if name not in found:
        raise FileNotFoundError(f"no artifact file {name!r} in {_underlying(parent)}")
    return found[name]


def download_files(artifact_dir_uri: str, names: Iterable[str], dst_dir: str | os.PathLike) -> dict[str, Path]:
    """Download those of the files ``names`` that the artifact folder ``artifact_dir_uri`` holds into ``dst_dir``,
    listing the folder once; name -> local path, for the files found (a folder of that name counts as none).

    ``artifact_dir_uri`` is a folder URI as :func:`download_file` takes a file's (``runs:/<run id>/report``).
    Raises as :func:`download_file` does, but never FileNotFoundError: a missing file is absent from the result.
    """
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
            if exc.errno in SYSTEM_ERRNOS and exc.filename is None:  # shutil's copy names no file
                exc.filename = str(local)
            raise
        out[name] = local
    return out


def _underlying(uri: str) -> str:
    """The store's own URI of a ``runs:/`` URI (any other URI as it is)."""
    from mlflow.store.artifact.runs_artifact_repo import RunsArtifactRepository

    return RunsArtifactRepository.get_underlying_uri(uri) if uri.startswith("runs:/") else uri
