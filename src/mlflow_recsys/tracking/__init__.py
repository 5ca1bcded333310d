"""The only door to MLflow: runs, artifacts, run selection and comparison runs.

Names are loaded on first use: MLflow imports this package's plugin module
(:mod:`mlflow_recsys.tracking._plugin`) while MLflow itself is still being
imported, so nothing here may import MLflow eagerly.
"""

import importlib

_EXPORTS = {
    "ArtifactError": "_artifacts",
    "per_user_byte_limit": "_artifacts",
    "read_evaluation_artifacts": "_artifacts",
    "write_evaluation_artifacts": "_artifacts",
    "RunComparison": "_comparison",
    "check_selection": "_comparison",
    "compare_runs": "_comparison",
    "RecsysEvaluator": "_evaluator",
    "run_gate": "_gate",
    "Executor": "_executors",
    "RayExecutor": "_executors",
    "SequentialExecutor": "_executors",
    "log_recommendations": "_imports",
    "export_split": "_interchange",
    "local_model_server": "_local_server",
    "local_tracking_server": "_local_server",
    "log_recommender": "_model_logging",
    "metric_key": "_naming",
    "mlflow_metric_name": "_naming",
    "model_label": "_naming",
    "RecommenderPyfunc": "_pyfunc_model",
    "load_comparison": "_queries",
    "load_comparison_settings": "_queries",
    "search_comparisons": "_queries",
    "search_trainings": "_queries",
    "RunSelectionError": "_runs",
    "load_evaluation": "_runs",
    "parse_compare_url": "_runs",
    "search_training_runs": "_runs",
    "select_runs": "_runs",
    "run_study": "_study",
    "StudyPlan": "_study_file",
    "read_study": "_study_file",
    "SplitConfig": "_training",
    "TrainConfig": "_training",
    "run_split": "_training",
    "run_train": "_training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__():
    return __all__
