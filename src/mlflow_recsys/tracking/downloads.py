"""One artifact file fetched from the artifact store, a missing file told apart from a failed download.

``mlflow.artifacts.download_artifacts`` turns every failure of a ``runs:/`` download, a full local disk
included, into "Failed to download artifacts from path ..., please ensure that the path is correct", and for other
URIs folds the failures into one message without their exceptions. So :func:`download_file` asks the store
whether the file is there first (a missing file is :class:`FileNotFoundError`) and then copies it itself, letting
the real error through: ``ENOSPC`` with the path it could not write, the server's answer.
"""

from __future__ import annotations

import os
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
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.store.artifact.runs_artifact_repo import RunsArtifactRepository

    uri = RunsArtifactRepository.get_underlying_uri(artifact_uri) if artifact_uri.startswith("runs:/") else artifact_uri
    parent, _, name = uri.rstrip("/").rpartition("/")
    repo = get_artifact_repository(parent)
    listed = {Path(info.path).name: info for info in repo.list_artifacts()}
    if name not in listed or listed[name].is_dir:
        raise FileNotFoundError(f"no artifact file {name!r} in {parent}")
    local = Path(dst_dir) / name
    try:
        # The one-file step of ArtifactRepository.download_artifacts, which every store implements; called here
        # because download_artifacts keeps only the text of what failed.
        repo._download_file(remote_file_path=name, local_path=str(local))
    except OSError as exc:
        if exc.errno in SYSTEM_ERRNOS and exc.filename is None:  # shutil's copy names no file
            exc.filename = str(local)
        raise
    return local
