"""Log a fitted recommender as an MLflow pyfunc model, without pickled code."""

from __future__ import annotations

import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, DataType, Schema
from mlflow.types.schema import Array

import mlflow_recsys

_CODE_FILE = Path(__file__).with_name("pyfunc_model.py")
#: One user who has seen item 0, asking for five items: the logged input example.
_EXAMPLE = pd.DataFrame({"items": [[0]], "k": [5]})
_RUNTIME = ("mlflow", "numpy", "scipy", "pandas", "torch", "pyarrow")


def _requirements() -> list[str]:
    reqs = []
    for name in _RUNTIME:
        try:
            reqs.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            reqs.append(name)
    return reqs


def log_recommender(model, *, name: str = "model"):
    """Log ``model`` (any fitted :mod:`mlflow_recsys.models` recommender) to the active run.

    The weights travel as the artifact ``weights`` (``config.json`` + ``.npy``),
    the serving code as :mod:`mlflow_recsys.tracking.pyfunc_model` and the
    package source as code paths, so ``mlflow.pyfunc.load_model`` needs no
    unpickling. Returns MLflow's ``ModelInfo``.
    """
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-model-") as tmp:
        weights = Path(tmp) / "weights"
        model.save(weights)
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=str(_CODE_FILE),
            artifacts={"weights": str(weights)},
            code_paths=[str(Path(mlflow_recsys.__file__).parent)],
            pip_requirements=_requirements(),
            signature=_signature(),
            input_example=_EXAMPLE,
        )


def _signature() -> ModelSignature:
    """Input ``items`` (fold-in item indices) and optional ``k``; output ``items`` and ``scores``."""
    return ModelSignature(
        inputs=Schema([ColSpec(Array(DataType.long), "items"), ColSpec(DataType.long, "k", required=False)]),
        outputs=Schema([ColSpec(Array(DataType.long), "items"), ColSpec(Array(DataType.double), "scores")]),
    )
