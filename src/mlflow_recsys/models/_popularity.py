"""Most-popular baseline: every user gets the items with the most training interactions.

A standard non-personalised reference point; see e.g. P. Cremonesi, Y. Koren, R. Turrin, "Performance of Recommender
Algorithms on Top-N Recommendation Tasks", RecSys 2010.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mlflow_recsys._sparse import canonical_csr
from mlflow_recsys.models._base import Recommender


class Popularity(Recommender):
    """Scores each item by its number of training interactions, identically for every row.

    Attributes
    ----------
    config:
        Always None (no hyper-parameters).
    counts:
        float32 array ``(n_items,)`` after fit: number of training rows with a nonzero entry in each item column.
    n_items:
        Catalogue size after fit, else None.
    """

    name = "Popularity"

    def __init__(self) -> None:
        self.config: None = None
        self.counts: np.ndarray | None = None
        self.n_items: int | None = None

    def fit(self, x_train: sp.spmatrix) -> Popularity:
        """Count interactions per item in ``x_train`` (scipy sparse ``(n_users, n_items)``); returns self. TypeError or
        ValueError if ``x_train`` is not a valid interaction matrix."""
        x = canonical_csr(x_train, "x_train")
        self.counts = np.bincount(x.indices, minlength=x.shape[1]).astype(np.float32)
        self.n_items = x.shape[1]
        return self

    def _score_checked(self, x: sp.csr_matrix) -> np.ndarray:
        assert self.counts is not None  # score() has checked n_items, set together with the counts
        return np.tile(self.counts, (x.shape[0], 1))

    def _to_saved(self):
        return None, {}, {"counts": self.counts}

    @classmethod
    def _from_saved(cls, config, state, arrays, n_items) -> Popularity:
        model = cls()
        counts = arrays["counts"]
        if counts.shape != (n_items,):
            raise ValueError(f"path: expected counts of shape ({n_items},), found {counts.shape}")
        model.counts = counts.astype(np.float32, copy=False)
        model.n_items = n_items
        return model
