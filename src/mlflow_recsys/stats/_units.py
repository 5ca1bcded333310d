"""Reduce evaluation rows to independent units (users).

A protocol may give one user several rows (``eval_draws > 1``). Those rows are not independent observations, so every
statistic works on one value per user: the mean of that user's rows (cluster means; Davison & Hinkley 1997, sec. 3.8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Units:
    """Rows grouped into units, in order of first appearance."""

    codes: np.ndarray  # int64 (n_samples,): the unit index of each row
    ids: np.ndarray  # (n_units,): the sample id of each unit
    counts: np.ndarray  # float64 (n_units,): rows per unit

    @property
    def n_units(self) -> int:
        return int(self.ids.shape[0])

    @property
    def n_samples(self) -> int:
        return int(self.codes.shape[0])

    @classmethod
    def from_sample_ids(cls, sample_ids: np.ndarray) -> Units:
        codes, ids = pd.factorize(np.asarray(sample_ids), sort=False)
        codes = codes.astype(np.int64)
        counts = np.bincount(codes, minlength=len(ids)).astype(np.float64)
        return cls(codes=codes, ids=np.asarray(ids), counts=counts)

    def means(self, values: np.ndarray) -> np.ndarray:
        """Per-unit means of ``values``, float64 ``(n_units,)`` from ``(n_samples,)``."""
        values = np.asarray(values, dtype=np.float64)
        # factorize numbers units by first appearance, so as many units as rows means codes == 0..n-1.
        if self.n_units == self.n_samples:
            return values
        return np.bincount(self.codes, weights=values, minlength=self.n_units) / self.counts
