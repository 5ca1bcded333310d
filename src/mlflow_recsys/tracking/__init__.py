"""The only door to MLflow: runs, artifacts, run selection and comparison runs.

Names are loaded on first use: MLflow imports this package's plugin module
(:mod:`mlflow_recsys.tracking.plugin`) while MLflow itself is still being
imported, so nothing here may import MLflow eagerly.
"""

import importlib

_EXPORTS = {
    "ArtifactError": "artifacts",
    "read_evaluation_artifacts": "artifacts",
    "write_evaluation_artifacts": "artifacts",
    "RunComparison": "comparison",
    "check_selection": "comparison",
    "compare_runs": "comparison",
    "metric_key": "naming",
    "mlflow_metric_name": "naming",
    "RunSelectionError": "runs",
    "load_evaluation": "runs",
    "parse_compare_url": "runs",
    "select_runs": "runs",
    "SplitConfig": "training",
    "TrainConfig": "training",
    "run_split": "training",
    "run_train": "training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__():
    return __all__
