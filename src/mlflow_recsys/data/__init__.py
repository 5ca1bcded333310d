"""Data layer: dataset registry, your own interaction logs, preprocessing, splits and split checkpoints.

Nothing here imports mlflow."""

from mlflow_recsys.data._checkpoint import LoadedSplit, build_recsys_checkpoint, load_recsys_split, read_checkpoint
from mlflow_recsys.data._datasets import DATASETS, DatasetSpec, RatingsFile, get_dataset_spec, load_interactions
from mlflow_recsys.data._download import DownloadError, download
from mlflow_recsys.data._interactions import from_interactions, read_interactions_file
from mlflow_recsys.data._preprocess import Preprocessed, StepCount, binarise, kcore_prune, preprocess_interactions
from mlflow_recsys.data._split import MIN_EVAL_INTERACTIONS, UserSplit, leave_one_out, time_split, user_split
from mlflow_recsys.data._split_config import SPLIT_MODES, SplitConfig

__all__ = [
    "DATASETS",
    "DatasetSpec",
    "DownloadError",
    "LoadedSplit",
    "MIN_EVAL_INTERACTIONS",
    "Preprocessed",
    "RatingsFile",
    "SPLIT_MODES",
    "SplitConfig",
    "StepCount",
    "UserSplit",
    "binarise",
    "build_recsys_checkpoint",
    "download",
    "from_interactions",
    "get_dataset_spec",
    "kcore_prune",
    "leave_one_out",
    "load_interactions",
    "load_recsys_split",
    "preprocess_interactions",
    "read_checkpoint",
    "read_interactions_file",
    "time_split",
    "user_split",
]
