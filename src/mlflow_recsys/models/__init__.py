"""Recommender models sharing one interface: fit, score, recommend, save, load; one registry by name."""

from mlflow_recsys.models._base import Recommender, UnknownItemsWarning
from mlflow_recsys.models._ease import EASE, EASEConfig
from mlflow_recsys.models._elsa import ELSA, ELSAConfig, ELSATrainer
from mlflow_recsys.models._popularity import Popularity
from mlflow_recsys.models._ranking import top_k
from mlflow_recsys.models._registry import MODELS, ModelSpec, load_model, model_spec
from mlflow_recsys.models._train_config import DEFAULT_METRICS, TrainConfig

__all__ = [
    "DEFAULT_METRICS",
    "EASE",
    "EASEConfig",
    "ELSA",
    "ELSAConfig",
    "ELSATrainer",
    "MODELS",
    "ModelSpec",
    "Popularity",
    "Recommender",
    "TrainConfig",
    "UnknownItemsWarning",
    "load_model",
    "model_spec",
    "top_k",
]
