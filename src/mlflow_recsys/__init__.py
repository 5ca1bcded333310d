"""mlflow-recsys: train, evaluate and statistically compare top-N recommenders in MLflow.

The main functions and settings objects are importable from here; all but the split's are loaded on first use,
so ``import mlflow_recsys`` stays cheap (no MLflow, no torch) and the core works without a tracking store.
"""

import importlib
import os

# Intel MKL, which does torch's CPU matrix products, splits a long sum between threads, so the same training on one
# thread (a Ray task) and on every core (its own process) differs in the last bits, and then in a ranking. Its strict
# Conditional Numerical Reproducibility mode sums in one order whatever the thread count (Intel oneMKL Developer
# Reference, "Obtaining Numerically Reproducible Results"). MKL reads the setting at its first call, so it is set on
# import, before anything of ours multiplies; a value already set wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from mlflow_recsys.data import build_recsys_checkpoint, load_recsys_split, read_checkpoint

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported when the name is first used.
_LAZY: dict[str, str] = {
    "ComparisonReport": "mlflow_recsys.stats",
    "ComparisonSettings": "mlflow_recsys.stats",
    "compare_models": "mlflow_recsys.stats",
    "compare_pair": "mlflow_recsys.stats",
    "metric_level_intervals": "mlflow_recsys.stats",
    "seed_spread": "mlflow_recsys.stats",
    "GateRule": "mlflow_recsys.stats",
    "Guardrail": "mlflow_recsys.stats",
    "gate_decision": "mlflow_recsys.stats",
    "evaluate_recommender": "mlflow_recsys.evaluation",
    "evaluate_by_ids": "mlflow_recsys._evaluation_by_ids",
    "TrainConfig": "mlflow_recsys.models",
    "SplitConfig": "mlflow_recsys.data",
    "compare_runs": "mlflow_recsys.tracking",
    "run_split": "mlflow_recsys.tracking",
    "run_train": "mlflow_recsys.tracking",
    "run_gate": "mlflow_recsys.tracking",
    "export_split": "mlflow_recsys.tracking._interchange",
    "load_comparison": "mlflow_recsys.tracking._queries",
    "load_comparison_settings": "mlflow_recsys.tracking._queries",
    "search_comparisons": "mlflow_recsys.tracking._queries",
    "search_trainings": "mlflow_recsys.tracking._queries",
    "log_recommendations": "mlflow_recsys.tracking._imports",
}

__all__ = ["__version__", "build_recsys_checkpoint", "load_recsys_split", "read_checkpoint"]
__all__ += sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__():
    return __all__
