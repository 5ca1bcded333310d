"""Log a fitted recommender as an MLflow pyfunc model, without pickled code."""

from __future__ import annotations

import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.types import ColSpec, DataType, ParamSchema, ParamSpec, Schema
from mlflow.types.schema import Array

import mlflow_recsys

_CODE_FILE = Path(__file__).with_name("_pyfunc_model.py")

#: The inference param that picks the torch device of a logged model's scoring (``predict(..., params=...)``).
DEVICE_PARAM = "device"
_RUNTIME = ("mlflow", "numpy", "scipy", "pandas", "torch", "pyarrow")


def _requirements() -> list[str]:
    reqs = []
    for name in _RUNTIME:
        try:
            reqs.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            reqs.append(name)
    return reqs


def log_recommender(model, item_ids, *, eval_user_ids=None, name: str = "model"):
    """Log ``model`` (any fitted :mod:`mlflow_recsys.models` recommender) to the active run.

    The weights travel as the artifact ``weights`` (``config.json`` + ``.npy``), the ids as the artifact
    ``catalogue`` (``item_ids.npy``), the serving code as :mod:`mlflow_recsys.tracking._pyfunc_model` and the package
    source as code paths, so ``mlflow.pyfunc.load_model`` needs no unpickling. The signature and input example use
    the id type; the signature's inference param ``device`` (default ``"cpu"``) scores on a torch device,
    ``predict(frame, params={"device": "cuda"})``, with the same tie rule. Loading the model runs that stored code, so
    load it only from an artifact store whose writers you trust.

    Parameters
    ----------
    model:
        A fitted recommender with ``n_items`` columns.
    item_ids:
        Array-like of shape (n_items,), the raw id of each model column (the checkpoint's ``item_ids``): integers
        (stored as int64) or strings (stored as fixed-width unicode, so no pickle is needed to read them).
    eval_user_ids:
        Optional array-like of evaluated users' ids (e.g. the checkpoint's ``test_eval_user_ids``): their type
        (integer or string) types the optional ``user`` column of the signature, and the first one is used in the
        input example. Default None: the ``user`` column takes the item ids' type.
    name:
        Artifact path of the model in the run. Default ``"model"``.

    Returns
    -------
    mlflow.models.model.ModelInfo
        What ``mlflow.pyfunc.log_model`` returns (``model_uri`` and more).

    Raises
    ------
    ValueError
        If ``item_ids`` is not one-dimensional, does not hold one id per model
        column, holds duplicates, or is neither integer nor string.
    """
    ids = _ids("item_ids", item_ids)
    if len(ids) != model.n_items:
        raise ValueError(f"item_ids: expected {model.n_items} ids (one per model column), found {len(ids)}")
    if len(np.unique(ids)) != len(ids):
        raise ValueError("item_ids: expected distinct ids, found duplicates")
    users = ids if eval_user_ids is None or len(eval_user_ids) == 0 else _ids("eval_user_ids", eval_user_ids)
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-model-") as tmp:
        weights = Path(tmp) / "weights"
        model.save(weights)
        catalogue = Path(tmp) / "catalogue"
        catalogue.mkdir()
        np.save(catalogue / "item_ids.npy", ids, allow_pickle=False)
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=str(_CODE_FILE),
            artifacts={"weights": str(weights), "catalogue": str(catalogue)},
            code_paths=[str(Path(mlflow_recsys.__file__).parent)],
            pip_requirements=_requirements(),
            signature=_signature(_data_type(ids), _data_type(users)),
            # One user who has seen the first catalogue item, asking for five items.
            input_example=pd.DataFrame({"user": [users[0].item()], "items": [[ids[0].item()]], "k": [5]}),
        )


def _ids(name: str, values) -> np.ndarray:
    ids = np.asarray(values)
    if ids.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d array of ids, found shape {ids.shape}")
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    if ids.dtype.kind in "OUS":
        return ids.astype(str)
    raise ValueError(f"{name}: expected integer or string ids, found dtype {ids.dtype}")


def _data_type(ids: np.ndarray) -> DataType:
    return DataType.string if ids.dtype.kind == "U" else DataType.long


def _signature(item: DataType, user: DataType) -> ModelSignature:
    """Input ``items`` (fold-in item ids), optional ``user`` and ``k``; output ids, scores, unknown ids; the param
    ``device`` (default ``"cpu"``), the torch device that scores and ranks."""
    user_col, items = ColSpec(user, "user", required=False), ColSpec(Array(item), "items")
    k, scores = ColSpec(DataType.long, "k", required=False), ColSpec(Array(DataType.double), "scores")
    return ModelSignature(
        inputs=Schema([user_col, items, k]),
        outputs=Schema([user_col, items, scores, ColSpec(Array(item), "unknown_items")]),
        params=ParamSchema([ParamSpec(DEVICE_PARAM, DataType.string, "cpu")]),
    )
