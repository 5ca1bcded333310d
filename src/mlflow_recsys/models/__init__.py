"""Recommender models sharing one interface: fit, score, recommend, save, load."""

from mlflow_recsys.models.base import Recommender, UnknownItemsWarning
from mlflow_recsys.models.ease import EASE, EASEConfig
from mlflow_recsys.models.elsa import ELSA, ELSAConfig, ELSATrainer
from mlflow_recsys.models.popularity import Popularity
from mlflow_recsys.models.ranking import top_k

MODEL_CLASSES = {"EASE": EASE, "ELSA": ELSA, "Popularity": Popularity}

__all__ = [
    "EASE", "EASEConfig", "ELSA", "ELSAConfig", "ELSATrainer", "MODEL_CLASSES", "Popularity", "Recommender",
    "UnknownItemsWarning", "top_k",
]
