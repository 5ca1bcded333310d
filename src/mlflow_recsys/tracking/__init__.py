"""The only door to MLflow: runs, artifacts, run selection and comparison runs."""

from mlflow_recsys.tracking.artifacts import ArtifactError, read_evaluation_artifacts, write_evaluation_artifacts
from mlflow_recsys.tracking.comparison import RunComparison, compare_runs
from mlflow_recsys.tracking.naming import metric_key, mlflow_metric_name
from mlflow_recsys.tracking.runs import (
    RunSelectionError,
    load_evaluation,
    parse_compare_url,
    select_runs,
)
from mlflow_recsys.tracking.training import run_split, run_train

__all__ = [
    "ArtifactError",
    "RunComparison",
    "RunSelectionError",
    "compare_runs",
    "load_evaluation",
    "metric_key",
    "mlflow_metric_name",
    "parse_compare_url",
    "read_evaluation_artifacts",
    "run_split",
    "run_train",
    "select_runs",
    "write_evaluation_artifacts",
]
