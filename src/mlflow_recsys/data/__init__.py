"""Data layer: dataset registry, preprocessing, user split and split checkpoints.

Nothing here imports mlflow.
"""

from mlflow_recsys.data.checkpoint import (
    build_recsys_checkpoint,
    load_recsys_split,
    read_checkpoint,
)
from mlflow_recsys.data.datasets import DATASETS, DatasetSpec, get_dataset_spec, load_interactions
from mlflow_recsys.data.download import DownloadError, download
from mlflow_recsys.data.preprocess import binarise, kcore_prune
from mlflow_recsys.data.split import UserSplit, user_split

__all__ = [
    "DATASETS",
    "DatasetSpec",
    "DownloadError",
    "UserSplit",
    "binarise",
    "build_recsys_checkpoint",
    "download",
    "get_dataset_spec",
    "kcore_prune",
    "load_interactions",
    "load_recsys_split",
    "read_checkpoint",
    "user_split",
]
