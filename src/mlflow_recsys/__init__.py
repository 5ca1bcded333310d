"""mlflow-recsys: train, evaluate and statistically compare top-N recommenders in MLflow.

The names that touch MLflow are loaded on first use, so ``import mlflow_recsys`` stays cheap and the core works
without a tracking store.
"""

import importlib

from mlflow_recsys.data import build_recsys_checkpoint, load_recsys_split, read_checkpoint

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported when the name is first used.
_LAZY: dict[str, str] = {
    "export_split": "mlflow_recsys.tracking.interchange",
    "load_comparison": "mlflow_recsys.tracking.queries",
    "load_comparison_settings": "mlflow_recsys.tracking.queries",
    "search_comparisons": "mlflow_recsys.tracking.queries",
    "search_trainings": "mlflow_recsys.tracking.queries",
    "log_recommendations": "mlflow_recsys.tracking.imports",
    "metric_level_intervals": "mlflow_recsys.stats.levels",
}

__all__ = ["__version__", "build_recsys_checkpoint", "load_recsys_split", "read_checkpoint"]
__all__ += sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__():
    return __all__
