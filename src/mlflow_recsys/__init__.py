"""mlflow-recsys: train, evaluate and statistically compare top-N recommenders in MLflow."""

from mlflow_recsys.data import build_recsys_checkpoint, load_recsys_split, read_checkpoint

__version__ = "0.1.0"

__all__ = ["__version__", "build_recsys_checkpoint", "load_recsys_split", "read_checkpoint"]
