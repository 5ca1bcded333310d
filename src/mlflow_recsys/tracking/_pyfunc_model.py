"""MLflow "model from code" for every recommender of this package.

MLflow logs this file as the model's code and runs it when the model is loaded, so nothing is pickled: the weights
are plain ``.npy`` files with a JSON config (artifact ``weights``) and the catalogue is ``item_ids.npy`` (artifact
``catalogue``), the raw item id of every model column.

Input: a DataFrame with a column ``items`` (each row a list of the user's fold-in item ids, the dataset's raw ids,
of the catalogue's type), optionally ``user`` (an id of the dataset's user-id type, echoed back) and ``k`` (list
length per row, default 20, capped at the catalogue size). Output: a DataFrame with ``user`` (when given), ``items``
(the top-k item ids, best first, fold-in excluded), ``scores`` and ``unknown_items`` (the input ids outside the
catalogue: they cannot be scored, so they are reported there and in a warning rather than dropped silently). The
inference param ``device`` (default ``"cpu"``, ``predict(frame, params={"device": "cuda"})``) is the torch device that
scores and ranks, under the same tie rule; a CPU device ranks with the host's compiled selection. Ids
become model columns through :class:`mlflow_recsys._catalogue.ItemCatalogue`, the mapping that
:func:`mlflow_recsys._evaluation_by_ids.evaluate_by_ids` and the ``recsys`` evaluator use.

A row with no known item (a cold-start user) gets all-zero scores from EASE and
ELSA, so its list is the catalogue order; rank such users with ``Popularity``.

Loading runs this file, as stored in the artifact store, and the package copy logged beside it: anyone who can write
to that store can change the code that runs. The weights' SHA-256 digests catch damaged files, not such edits (see
the "Trusting artifacts" page). Load and serve models only from stores you trust.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

from mlflow_recsys._catalogue import ItemCatalogue

# Imported, not defined here: MLflow loads this file as a fresh module, so a class
# defined here would not be the one callers can catch.
from mlflow_recsys.models._base import UnknownItemsWarning

DEFAULT_K = 20


class RecommenderPyfunc(PythonModel):
    def load_context(self, context):
        from mlflow_recsys.models import load_model

        path = Path(context.artifacts["weights"])
        self.model = load_model(path, json.loads((path / "config.json").read_text()).get("model"))
        ids = np.load(Path(context.artifacts["catalogue"]) / "item_ids.npy", allow_pickle=False)
        self.catalogue = ItemCatalogue(ids, name="catalogue")  # log_recommender checked: one id per model column

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        from mlflow_recsys.models._device import check_device, ranking_device
        from mlflow_recsys.tracking._model_logging import DEVICE_PARAM

        device = (params or {}).get(DEVICE_PARAM, "cpu")
        check_device(device, f"params[{DEVICE_PARAM!r}]")
        frame = pd.DataFrame(model_input)
        if "items" not in frame.columns:
            raise ValueError(f"model_input: expected a column 'items' (lists of item ids), found {list(frame.columns)}")
        ks = frame["k"].to_numpy(dtype=np.int64) if "k" in frame.columns else np.full(len(frame), DEFAULT_K)
        if len(ks) and ks.min() < 1:
            raise ValueError(f"model_input: expected k >= 1 in every row, found {int(ks.min())}")
        # No list can be longer than the catalogue; capping also bounds the memory a request can ask for.
        ks = np.minimum(ks, len(self.catalogue))
        source, unknown = self.catalogue.matrix_from_lists(frame["items"])
        n_unknown = sum(map(len, unknown))
        if n_unknown:
            warnings.warn(
                f"model_input: {n_unknown} item id(s) in {sum(1 for u in unknown if u)} row(s) are not in the "
                f"model's catalogue of {len(self.catalogue)} items and were not scored (see column 'unknown_items')",
                UnknownItemsWarning,
                stacklevel=2,
            )
        top, scores = self.model.recommend(source, int(ks.max()) if len(ks) else 1, device=ranking_device(device))
        out = {} if "user" not in frame.columns else {"user": frame["user"].to_numpy()}
        item_ids = self.catalogue.item_ids
        out["items"] = [item_ids[t[:k][t[:k] >= 0]].tolist() for t, k in zip(top, ks, strict=True)]
        out["scores"] = [s[:k][t[:k] >= 0].astype(float).tolist() for t, s, k in zip(top, scores, ks, strict=True)]
        out["unknown_items"] = unknown
        return pd.DataFrame(out)


mlflow.models.set_model(RecommenderPyfunc())
