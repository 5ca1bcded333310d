"""MLflow "model from code" for every recommender of this package.

MLflow logs this file as the model's code and runs it when the model is loaded,
so nothing is pickled: the weights are plain ``.npy`` files and a JSON config.

Input: a DataFrame with a column ``items`` (each row a list of the user's
fold-in item indices) and optionally ``k`` (list length, default 20; the
largest value in the frame is used). Output: a DataFrame with ``items`` (the
top-k item indices, best first, fold-in excluded) and ``scores``.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import scipy.sparse as sp
from mlflow.pyfunc import PythonModel


class RecommenderPyfunc(PythonModel):
    def load_context(self, context):
        from mlflow_recsys.models import MODEL_CLASSES

        path = Path(context.artifacts["weights"])
        name = json.loads((path / "config.json").read_text())["model"]
        self.model = MODEL_CLASSES[name].load(path)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        frame = pd.DataFrame(model_input)
        if "items" not in frame.columns:
            raise ValueError(f"model_input: expected a column 'items', found {list(frame.columns)}")
        k = int(frame["k"].max()) if "k" in frame.columns else 20
        rows = [np.asarray(list(items), dtype=np.int64) for items in frame["items"]]
        n_items = self.model.n_items
        for i, items in enumerate(rows):
            if items.size and (items.min() < 0 or items.max() >= n_items):
                raise ValueError(f"model_input: row {i} holds item indices outside [0, {n_items})")
        indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
        indices = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        source = sp.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr), shape=(len(rows), n_items))
        source.sum_duplicates()
        source.data[:] = 1.0
        top, scores = self.model.recommend(source, k)
        return pd.DataFrame(
            {
                "items": [t[t >= 0].tolist() for t in top],
                "scores": [s[t >= 0].astype(float).tolist() for t, s in zip(top, scores)],
            }
        )


mlflow.models.set_model(RecommenderPyfunc())
