"""The models this package trains, by name (:class:`ModelSpec`): one registry for the CLI, the train step and model
loading."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from mlflow_recsys import _validation as validation
from mlflow_recsys.models._base import Recommender
from mlflow_recsys.models._ease import EASE, EASEConfig
from mlflow_recsys.models._elsa import ELSA, ELSAConfig
from mlflow_recsys.models._popularity import Popularity


@dataclass(frozen=True)
class ModelSpec:
    """One registered model.

    Attributes
    ----------
    name:
        The registry key, the model's ``name`` and the ``recsys.model`` tag of its runs.
    model_class:
        The :class:`~mlflow_recsys.models.Recommender` subclass; ``model_class.load`` reads a saved model.
    config_class:
        The frozen dataclass of its hyper-parameters, or ``None`` for a model without any.
    hyperparameters:
        The config fields the ``train`` step takes (the others keep the config's defaults), in the order the command
        lists them.
    seeded:
        Whether fitting draws random numbers: runs of a seeded model carry ``recsys.seed``, the others ``none``.
    epochs:
        Whether ``fit`` trains in epochs and takes ``on_epoch_end`` and ``validate`` callbacks.
    train_defaults:
        The ``train`` step's own defaults where they differ from the config class's (ELSA's config keeps the sizes of
        its paper; the step's are sized for a quick run on MovieLens-100k).
    """

    name: str
    model_class: type[Recommender]
    config_class: type | None
    hyperparameters: tuple[str, ...] = ()
    seeded: bool = False
    epochs: bool = False
    train_defaults: Mapping[str, Any] = field(default_factory=dict)

    def build(self, hyperparameters: Mapping[str, Any] | None = None) -> Recommender:
        """An unfitted model whose config takes the values of ``hyperparameters`` it names; returns it.

        Keys of ``hyperparameters`` that are not among :attr:`hyperparameters` are ignored, so one mapping of every
        model's settings can build any of them. ValueError (from the config class) for a value out of range."""
        if self.config_class is None:
            return self.model_class()
        given = hyperparameters or {}
        # A model with a config class takes that config as its argument, which type[Recommender] cannot say.
        make = cast(Callable[[Any], Recommender], self.model_class)
        return make(self.config_class(**{k: given[k] for k in self.hyperparameters if k in given}))


#: Model name -> :class:`ModelSpec`, in the order the command line lists them.
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("EASE", EASE, EASEConfig, hyperparameters=("l2", "device")),
        ModelSpec(
            "ELSA",
            ELSA,
            ELSAConfig,
            hyperparameters=(
                "seed",
                "latent_dim",
                "batch_size",
                "epochs",
                "lr",
                "weight_decay",
                "device",
                "matmul_precision",
                "patience",
            ),
            seeded=True,
            epochs=True,
            train_defaults={"latent_dim": 24, "batch_size": 64, "epochs": 20},
        ),
        ModelSpec("Popularity", Popularity, None),
    )
}


def model_spec(name: str) -> ModelSpec:
    """The registered model called ``name``; ValueError, listing the registered names, if none has it."""
    validation.one_of(name, "model", tuple(MODELS))
    return MODELS[name]


def load_model(path: str | os.PathLike, name: str) -> Recommender:
    """The saved model at ``path`` of the registered model ``name`` (the ``model`` field of its ``config.json``).

    A ``name`` not registered is a ValueError speaking of the ``weights`` (what a logged model calls the folder);
    otherwise it raises as :meth:`Recommender.load <mlflow_recsys.models.Recommender.load>` does.
    """
    if name not in MODELS:
        raise ValueError(f"weights: expected a model of {sorted(MODELS)}, found {name!r}")
    return MODELS[name].model_class.load(path)
