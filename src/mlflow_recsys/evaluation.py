"""Evaluate a recommender on held-out users and keep the per-user values.

:func:`evaluate_recommender` takes fold-in and target matrices of item indices
(:func:`~mlflow_recsys._evaluation_by_ids.evaluate_by_ids` takes frames of user and item ids, maps them and calls it);
:func:`evaluate_rankings` scores lists ranked elsewhere. The per-user values are what the paired statistics in
:mod:`mlflow_recsys.stats` work on, so they are collected by default.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import scipy.sparse as sp
from tqdm.auto import tqdm

from mlflow_recsys import _validation as validation
from mlflow_recsys._digests import update_with_csr
from mlflow_recsys._sparse import canonical_csr
from mlflow_recsys.metrics import ItemMetric, ItemPopularity, RankingMetric, _paired, hit_matrix, metric_from_key

__all__ = [
    "EvaluationResult",
    "FOLD_IN_POLICIES",
    "FoldInPolicy",
    "FoldInRankedWarning",
    "MetricSpec",
    "evaluate_rankings",
    "evaluate_recommender",
    "resolve_metrics",
    "targets_fingerprint",
]


class FoldInRankedWarning(UserWarning):
    """Ranked lists held their users' own fold-in items; those were taken out before scoring (and counted)."""


#: What to do with a user's fold-in items found in their ranked list: take them out and warn, or refuse.
FOLD_IN_POLICIES = ("remove", "refuse")
FoldInPolicy = Literal["remove", "refuse"]


@dataclass(frozen=True)
class EvaluationResult:
    """Aggregate and per-user metric values of one model on one set of users.

    Attributes
    ----------
    metrics:
        Metric key (``"ndcg@100"``) -> mean of the per-row values (float).
    per_user:
        Metric key -> float64 array of shape ``(n_samples,)``, one value per evaluation row, aligned with
        ``sample_ids``. ``None`` when the result was evaluated with ``collect_per_user=False``; such a result cannot be
        compared.
    sample_ids:
        Array of shape ``(n_samples,)``: the user id of each evaluation row as in the split (int64 or str). Repeated ids
        mean one user owns several rows.
    targets_fingerprint:
        SHA-256 hex digest identifying (sample ids, fold-in rows, target rows), or ``None`` when unknown (then pairing
        cannot be verified).
    definitions:
        Metric key -> a one-line exact definition of the metric.
    rankings:
        int32 array of shape ``(n_samples, max_k)``: the lists that were scored, item indices best first (a user's
        fold-in items already taken out), ``-1`` padding, aligned with ``sample_ids``; what the global item-exposure
        metrics (catalogue coverage, Gini) are computed from. ``None`` when unknown (per-user values computed elsewhere)
        or not collected.
    n_items:
        Number of items in the catalogue the lists rank (int), with ``rankings``; else ``None``.
    """

    metrics: dict[str, float]
    per_user: dict[str, np.ndarray] | None
    sample_ids: np.ndarray
    targets_fingerprint: str | None = None
    definitions: dict[str, str] = field(default_factory=dict)
    rankings: np.ndarray | None = None
    n_items: int | None = None

    @property
    def n_samples(self) -> int:
        """Number of evaluation rows."""
        return int(len(self.sample_ids))

    @property
    def n_units(self) -> int:
        """Number of distinct users behind the rows."""
        return int(len(pd.unique(np.asarray(self.sample_ids))))

    @property
    def metric_keys(self) -> list[str]:
        """Metric keys in evaluation order."""
        return list(self.metrics)

    def to_frame(self) -> pd.DataFrame:
        """Per-user values as a frame: ``sample_id`` then one float64 column per key; ValueError without per-user
        values."""
        if self.per_user is None:
            raise ValueError(
                "this EvaluationResult holds no per-user values (it was evaluated with collect_per_user=False)"
            )
        # Built at once: a column added one at a time fragments the frame (pandas warns past 100 metrics).
        columns = {key: np.asarray(values, dtype=np.float64) for key, values in self.per_user.items()}
        return pd.DataFrame({"sample_id": np.asarray(self.sample_ids), **columns})

    @classmethod
    def from_per_user(
        cls,
        values: pd.DataFrame | Mapping[str, np.ndarray],
        *,
        sample_ids: np.ndarray | None = None,
        targets_fingerprint: str | None = None,
        definitions: Mapping[str, str] | None = None,
    ) -> EvaluationResult:
        """Build a comparable result from per-user values computed elsewhere; ValueError if there are no metric columns,
        arrays are not 1-D, lengths differ, or ``sample_ids`` is given twice.

        Parameters
        ----------
        values:
            Either a DataFrame with a ``sample_id`` column and one numeric column per metric key, or a mapping metric
            key -> 1-D array of shape ``(n_samples,)``.
        sample_ids:
            Shape ``(n_samples,)``. Required with a mapping unless the rows are independent users numbered positionally
            (then ``0..n-1`` is used); must be omitted with a DataFrame (its ``sample_id`` column is used).
        targets_fingerprint:
            Digest of the evaluated users and targets, if known.
        definitions:
            Optional metric key -> definition text.
        """
        if isinstance(values, pd.DataFrame):
            if "sample_id" not in values.columns:
                raise ValueError(
                    f"values: expected a DataFrame with a 'sample_id' column, found columns {list(values.columns)}"
                )
            if sample_ids is not None:
                raise ValueError(
                    "sample_ids: expected None when values is a DataFrame (its 'sample_id' column is used)"
                )
            sample_ids = values["sample_id"].to_numpy()
            values = {c: values[c].to_numpy() for c in values.columns if c not in ("sample_id", "draw")}
        per_user = {str(key): np.asarray(arr, dtype=np.float64) for key, arr in dict(values).items()}
        first = next(iter(per_user.values()), None)
        if first is None:
            raise ValueError("values: expected at least one metric column, found none")
        for key, arr in per_user.items():
            if arr.ndim != 1 or arr.shape != first.shape:
                raise ValueError(
                    f"values[{key!r}]: expected a 1-D array like the first metric's, found shape {arr.shape}"
                )
        sample_ids = _resolve_sample_ids(sample_ids, first.shape[0])
        means = {k: float(np.mean(v)) if len(v) else float("nan") for k, v in per_user.items()}
        return cls(
            metrics=means,
            per_user=per_user,
            sample_ids=sample_ids,
            targets_fingerprint=targets_fingerprint,
            definitions=dict(definitions or {}),
        )


def targets_fingerprint(source: sp.spmatrix, targets: sp.spmatrix, sample_ids: np.ndarray) -> str:
    """SHA-256 hex digest of (sample ids, fold-in rows, target rows).

    Matrices are canonicalised (CSR, sorted indices, binary) first so that equal interaction sets give equal digests
    whatever their storage order or dtype; ids hash by kind (integer or text) and value, so an object array of str ids
    and a numpy unicode array of the same ids agree.
    """
    h = hashlib.sha256()
    ids = np.asarray(sample_ids)
    if ids.dtype.kind == "O":
        ids = np.asarray(ids.tolist())  # a pandas column of ids hashes like the checkpoint's numpy array of them
    kind = {"u": "i", "S": "U"}.get(ids.dtype.kind, ids.dtype.kind)
    h.update(b"sample_ids:" + kind.encode())
    h.update("\x1f".join(map(str, ids.tolist())).encode())
    for name, m in (("source", source), ("targets", targets)):
        h.update(f"{name}:".encode())
        update_with_csr(h, canonical_csr(m, name))
    return h.hexdigest()


MetricSpec = RankingMetric | str


def resolve_metrics(metrics: MetricSpec | Sequence[MetricSpec]) -> list[RankingMetric]:
    """``metrics`` as metric objects, each key once; ValueError naming ``metrics`` otherwise."""
    if isinstance(metrics, (str, RankingMetric)):
        metrics = [metrics]
    resolved: list[RankingMetric] = []
    seen: set[str] = set()
    for item in metrics:
        if isinstance(item, str):
            item = metric_from_key(item)
        elif not isinstance(item, RankingMetric):
            raise ValueError(f"metrics: expected metric objects or keys like 'ndcg@100', found {type(item).__name__}")
        repeated = seen.intersection(item.keys)
        if repeated:
            # two objects producing one key would silently overwrite each other
            raise ValueError(f"metrics: expected each key once, found {sorted(repeated)} twice")
        seen.update(item.keys)
        resolved.append(item)
    if not resolved:
        raise ValueError("metrics: expected at least one metric, found none")
    return resolved


def _resolve_sample_ids(sample_ids: np.ndarray | None, n_rows: int) -> np.ndarray:
    if sample_ids is None:
        return np.arange(n_rows, dtype=np.int64)
    ids = np.asarray(sample_ids)
    if ids.shape != (n_rows,):
        raise ValueError(f"sample_ids: expected shape ({n_rows},), one id per row, found {ids.shape}")
    return ids


def _kept_rows(n_relevant: np.ndarray) -> np.ndarray:
    kept = np.flatnonzero(n_relevant > 0)
    n_left_out = n_relevant.shape[0] - kept.shape[0]
    if kept.size == 0:
        raise ValueError(f"targets: expected at least one row with a target, found {n_relevant.shape[0]} empty rows")
    if n_left_out:
        warnings.warn(  # stacklevel 3: the caller of evaluate_*
            f"{n_left_out} of {n_relevant.shape[0]} evaluation rows have no targets "
            "and were left out (with their sample ids)",
            UserWarning,
            stacklevel=3,
        )
    return kept


def _without_fold_in(
    rankings: np.ndarray, source: sp.csr_matrix, fold_in: str, row_numbers: np.ndarray | None = None
) -> tuple[np.ndarray, int, int]:
    """``rankings`` with each row's fold-in items taken out and the items after them moved up, ``-1`` padding at the end
    -> (rankings, items taken out, rows touched); under ``"refuse"`` a ValueError naming the first such row (as
    ``row_numbers`` numbers them). Every column is checked, not only the top k: items past the cutoff move up."""
    if rankings.size == 0:
        return rankings, 0, 0
    leaked = hit_matrix(rankings, source, rankings.shape[1])
    n_leaked = int(leaked.sum())
    if n_leaked == 0:
        return rankings, 0, 0
    rows_touched = leaked.any(axis=1)
    if fold_in == "refuse":
        first = np.flatnonzero(rows_touched)[0]
        first = first if row_numbers is None else row_numbers[first]
        raise ValueError(
            f"rankings: expected no fold-in item (an entry of source) in a user's list, found {n_leaked:,} in "
            f"{int(rows_touched.sum()):,} of {rankings.shape[0]:,} lists (the first in row {int(first)}); take "
            "them out, or pass fold_in='remove'"
        )
    # A stable sort on "leaked" keeps the other items in their order and puts the leaked ones last.
    order = np.argsort(leaked, axis=1, kind="stable")
    kept = np.take_along_axis(np.asarray(rankings, dtype=np.int64), order, axis=1)
    kept[np.take_along_axis(leaked, order, axis=1)] = -1
    return kept, n_leaked, int(rows_touched.sum())


def _warn_fold_in_removed(n_items: int, n_rows: int, n_lists: int, max_k: int, stacklevel: int) -> None:
    if n_items:
        warnings.warn(
            f"rankings: {n_items:,} fold-in item(s) in {n_rows:,} of {n_lists:,} lists were taken out before "
            f"scoring (a user's fold-in items are never targets, so they would count as misses); the items after "
            f"them moved up, and a list left with fewer than {max_k} items is padded (no hit). Pass "
            "fold_in='refuse' to refuse such lists",
            FoldInRankedWarning,
            stacklevel=stacklevel + 1,
        )


def _popularity_for(
    metrics: list[RankingMetric], item_popularity: ItemPopularity | None, n_items: int
) -> ItemPopularity | None:
    """``item_popularity`` once checked against the metrics that read it and the catalogue's size."""
    item_side = [key for metric in metrics if isinstance(metric, ItemMetric) for key in metric.keys]
    if item_popularity is None:
        if item_side:
            raise ValueError(
                f"item_popularity: expected the training data's ItemPopularity for the item-side metrics "
                f"{', '.join(item_side)}, found None"
            )
        return None
    if not isinstance(item_popularity, ItemPopularity):
        raise ValueError(f"item_popularity: expected an ItemPopularity, found {type(item_popularity).__name__}")
    if item_popularity.n_items != n_items:
        raise ValueError(f"item_popularity: expected {n_items} items like targets, found {item_popularity.n_items}")
    return item_popularity


def _row_values(
    metrics: list[RankingMetric],
    rankings: np.ndarray,
    hits: np.ndarray,
    n_relevant: np.ndarray,
    popularity: ItemPopularity | None,
) -> dict[str, np.ndarray]:
    """Metric key -> per-row values: the accuracy metrics from the hits, the item-side ones from the lists."""
    values: dict[str, np.ndarray] = {}
    for metric in metrics:
        if isinstance(metric, ItemMetric):
            # hit_matrix has checked these lists already: not again per metric and batch
            item_side = metric._from_checked(rankings, cast(ItemPopularity, popularity))
            empty = int(np.isnan(next(iter(item_side.values()))).sum())
            if empty:
                raise ValueError(
                    f"rankings: expected an item in every list for the item-side metrics {', '.join(metric.keys)}, "
                    f"found {empty} list(s) without one (a user without recommendations has no popularity to "
                    "average); score those users' lists, or leave the item-side metrics out"
                )
            values.update(item_side)
        else:
            values.update(metric.from_hits(hits, n_relevant))
    return values


def _result(
    metrics: list[RankingMetric],
    per_user: dict[str, np.ndarray],
    sample_ids: np.ndarray,
    fingerprint: str | None,
    lists: tuple[np.ndarray, int] | None,
) -> EvaluationResult:
    """The result; ``lists`` (the scored lists, the catalogue's size) None keeps only the means."""
    definitions = {key: text for metric in metrics for key, text in metric.definitions.items()}
    rankings, n_items = lists if lists is not None else (None, None)
    return EvaluationResult(
        metrics={key: float(np.mean(values)) for key, values in per_user.items()},
        per_user=per_user if lists is not None else None,
        sample_ids=sample_ids,
        targets_fingerprint=fingerprint,
        definitions=definitions,
        rankings=None if rankings is None else np.asarray(rankings, dtype=np.int32),  # no copy when int32 already
        n_items=n_items,
    )


def evaluate_rankings(
    rankings: np.ndarray,
    *,
    targets: sp.spmatrix,
    metrics: MetricSpec | Sequence[MetricSpec],
    sample_ids: np.ndarray | None = None,
    source: sp.spmatrix | None = None,
    fold_in: FoldInPolicy = "remove",
    item_popularity: ItemPopularity | None = None,
) -> EvaluationResult:
    """Evaluate precomputed rankings against target items.

    Rows with an empty targets row have no defined value and are left out with their sample ids (a ``UserWarning``
    counts them). With ``source``, a user's own fold-in items, which can never be targets and would push every later
    item down, are taken out of their list (``fold_in="remove"``; pass lists longer than ``max_k`` so that enough
    remain) or refused (``"refuse"``).

    Parameters
    ----------
    rankings:
        Integer array of shape ``(n, >= max_k)``: item indices best first, ``-1`` padding (never a hit); ``max_k`` is
        the largest cutoff in ``metrics``.
    targets:
        Sparse matrix (CSR) of shape ``(n, n_items)``; stored nonzeros are the relevant items.
    metrics:
        Metric objects from :mod:`mlflow_recsys.metrics` and/or keys such as ``"ndcg@100"``, or a single one of them.
        Result keys follow this order.
    sample_ids:
        Array of shape ``(n,)``, the user id of each row; default ``0..n-1`` (int64).
    source:
        Fold-in matrix of shape ``(n, n_items)``: the targets fingerprint is taken over it, and its items are taken out
        of the lists (see ``fold_in``). Without it the fingerprint is ``None`` and lists are scored as given.
    fold_in:
        ``"remove"`` (default): take each row's fold-in items out of its list before scoring, with a warning that counts
        them; ``"refuse"``: raise a ValueError if any list holds one. Used only with ``source``.
    item_popularity:
        The training data's :class:`~mlflow_recsys.metrics.ItemPopularity`, which the item-side metrics (``arp``,
        ``aplt``, ``novelty``) read; required with them, default None.

    Returns
    -------
    EvaluationResult
        Means and per-row float64 values over the rows with targets, and the scored lists (``rankings``).

    Raises
    ------
    ValueError
        If ``metrics`` is empty, unknown or repeats a key; ``rankings`` is not a 2-D integer array with at least
        ``max_k`` columns and valid item indices (every column when ``source`` is given); ``targets`` or ``source`` is
        not 2-D of matching shape with finite non-negative values; ``sample_ids`` has the wrong length; ``fold_in`` is
        not one of its two values, or is ``"refuse"`` and a list holds a fold-in item; ``item_popularity`` is missing
        for an item-side metric, not an ``ItemPopularity`` or of another catalogue; an item-side metric meets a list
        with no item; or no row has targets.
    TypeError
        If ``targets`` or ``source`` is not a scipy sparse matrix.

    Warns
    -----
    FoldInRankedWarning
        Under ``fold_in="remove"``, when lists held fold-in items: how many items, in how many lists.
    UserWarning
        When rows without targets were left out.
    """
    metric_objs = resolve_metrics(metrics)
    max_k = max(m.max_k for m in metric_objs)
    arr, csr = _paired(rankings, targets)
    ids = _resolve_sample_ids(sample_ids, csr.shape[0])
    validation.one_of(fold_in, "fold_in", FOLD_IN_POLICIES)
    src = None if source is None else canonical_csr(source, "source")
    if src is not None and src.shape != csr.shape:
        raise ValueError(f"source: expected shape {csr.shape} like targets, found {src.shape}")
    popularity = _popularity_for(metric_objs, item_popularity, csr.shape[1])
    hits = hit_matrix(arr, csr, max_k)  # the shape, dtype and width checks before the fold-in's, in their own words
    fingerprint = None if source is None else targets_fingerprint(source, targets, ids)
    if src is not None:
        arr, n_removed, n_rows = _without_fold_in(arr, src, fold_in)
        _warn_fold_in_removed(n_removed, n_rows, arr.shape[0], max_k, stacklevel=2)
        hits = hit_matrix(arr, csr, max_k) if n_removed else hits
    n_relevant = np.diff(csr.indptr)
    kept = _kept_rows(n_relevant)
    lists = np.asarray(arr, dtype=np.int64)[kept, :max_k]
    per_user = _row_values(metric_objs, lists, hits[kept], n_relevant[kept], popularity)
    return _result(metric_objs, per_user, ids[kept], fingerprint, (lists, csr.shape[1]))


def _ranked_on(device: str, model: Any, source: sp.csr_matrix, max_k: int, batch_size: int) -> np.ndarray:
    """Every row's top ``max_k`` from one ``recommend`` call on ``device``; ValueError naming ``device`` for a model
    that is not one of the package's (it takes no device)."""
    from mlflow_recsys.models import Recommender

    if not isinstance(model, Recommender):
        raise ValueError(
            f"device: expected None for a model that is not one of mlflow_recsys.models, found {device!r} "
            f"for a {type(model).__name__}"
        )
    return model.recommend(source, max_k, batch_size=batch_size, device=device)[0]


def evaluate_recommender(
    model: Any,
    *,
    source: sp.spmatrix,
    targets: sp.spmatrix,
    metrics: MetricSpec | Sequence[MetricSpec],
    sample_ids: np.ndarray | None = None,
    batch_size: int = 1024,
    collect_per_user: bool = True,
    fold_in: FoldInPolicy = "remove",
    item_popularity: ItemPopularity | None = None,
    device: str | None = None,
) -> EvaluationResult:
    """Rank items for held-out rows in batches and evaluate the rankings.

    Each batch is ranked by ``model.recommend(source_rows, max_k)``; rows are independent, so the result does not
    depend on ``batch_size``. With ``device``, every row is ranked first by one
    ``model.recommend(source_rows, max_k, batch_size=batch_size, device=device)`` call, so the model's weights go to the
    device once. Rows with an empty targets row are skipped and left out, and fold-in items a model
    returns anyway are taken out or refused, as in :func:`evaluate_rankings`.

    Parameters
    ----------
    model:
        Fitted model with
        ``recommend(source_rows: csr, k: int) -> (item indices int64 (rows, k) with -1 padding, scores (rows, k))``.
    source:
        Fold-in interactions, sparse CSR of shape ``(n, n_items)``.
    targets:
        Held-out target items, sparse CSR of shape ``(n, n_items)``.
    metrics:
        Metric objects and/or keys like ``"recall@20"`` (or a single one).
    sample_ids:
        Array of shape ``(n,)``: user id of each row; default ``0..n-1`` (int64).
    batch_size:
        Rows per ``recommend`` call (positive int, default 1024); bounds memory of dense score matrices.
    collect_per_user:
        Keep per-row values (default True, needed for paired comparisons); False gives ``per_user=None`` with the same
        means.
    fold_in:
        ``"remove"`` (default) or ``"refuse"``: what becomes of fold-in items in the model's lists (see
        :func:`evaluate_rankings`).
    item_popularity:
        The training data's :class:`~mlflow_recsys.metrics.ItemPopularity`
        (``ItemPopularity.from_interactions(x_train)``) for the item-side metrics ``arp``, ``aplt`` and ``novelty``;
        required with them, default None.
    device:
        A torch device string (``"cuda"``, ``"cpu"``) to score and rank on, for the package's models
        (:meth:`Recommender.recommend <mlflow_recsys.models.Recommender.recommend>`); default None ranks on the host.

    Returns
    -------
    EvaluationResult
        With ``targets_fingerprint = targets_fingerprint(source, targets, sample_ids)`` of the inputs as given (before
        empty rows are dropped), and the scored top-``max_k`` lists (``rankings``) unless ``collect_per_user`` is
        False.

    Raises
    ------
    ValueError
        If ``metrics`` is empty, unknown or repeats a key; ``source`` or ``targets`` holds negative or non-finite values
        or their shapes differ; the model's ``n_items`` differs from the number of columns; ``sample_ids`` has the wrong
        length; ``batch_size`` is not a positive int; ``fold_in`` is neither ``"remove"`` nor ``"refuse"``;
        ``item_popularity`` is missing for an item-side metric, not an ``ItemPopularity`` or of another catalogue; an
        item-side metric meets a list with no item; no row has targets; or ``model.recommend`` returns rankings of the
        wrong shape, with invalid item indices, or (under ``"refuse"``) with fold-in items.
    TypeError
        If ``source`` or ``targets`` is not a scipy sparse matrix.

    Warns
    -----
    FoldInRankedWarning
        When the model's lists held fold-in items (under ``"remove"``).
    UserWarning
        When rows without targets were left out.
    """
    metric_objs = resolve_metrics(metrics)
    max_k = max(m.max_k for m in metric_objs)
    src = canonical_csr(source, "source")
    tgt = canonical_csr(targets, "targets")
    if src.shape != tgt.shape:
        raise ValueError(f"targets: expected shape {src.shape} like source, found {tgt.shape}")
    batch_size = validation.integer(batch_size, "batch_size", minimum=1)
    validation.one_of(fold_in, "fold_in", FOLD_IN_POLICIES)
    n_items = getattr(model, "n_items", None)
    if n_items is not None and int(n_items) != src.shape[1]:
        raise ValueError(f"source: expected {int(n_items)} columns (the model's n_items), found {src.shape[1]}")
    popularity = _popularity_for(metric_objs, item_popularity, src.shape[1])
    ids = _resolve_sample_ids(sample_ids, src.shape[0])
    fingerprint = targets_fingerprint(source, targets, ids)
    n_relevant = np.diff(tgt.indptr)
    kept = _kept_rows(n_relevant)
    chunks: dict[str, list[np.ndarray]] = {key: [] for m in metric_objs for key in m.keys}
    lists: list[np.ndarray] = []
    leaked = np.zeros(2, dtype=np.int64)  # fold-in items taken out, lists they were in
    ranked = None if device is None else _ranked_on(device, model, src[kept], max_k, batch_size)
    starts = range(0, kept.shape[0], batch_size)
    for start in tqdm(starts, desc="evaluate", unit="batch", disable=None, leave=False):
        rows = kept[start : start + batch_size]
        indices = model.recommend(src[rows], max_k)[0] if ranked is None else ranked[start : start + batch_size]
        indices = np.asarray(indices)
        if indices.ndim != 2 or indices.shape[0] != rows.shape[0]:
            raise ValueError(
                f"model: expected recommend(source_rows, {max_k}) to return item indices of "
                f"shape ({rows.shape[0]}, {max_k}), found {indices.shape}"
            )
        try:
            hits = hit_matrix(indices, tgt[rows], max_k)  # checks first, so a bad ranking is named as such
            indices, *counts = _without_fold_in(indices, src[rows], fold_in, row_numbers=rows)
            hits = hit_matrix(indices, tgt[rows], max_k) if counts[0] else hits
        except ValueError as err:
            raise ValueError(f"model: recommend(source_rows, {max_k}) output is invalid: {err}") from err
        leaked += counts
        indices = np.asarray(indices, dtype=np.int64)[:, :max_k]
        for key, values in _row_values(metric_objs, indices, hits, n_relevant[rows], popularity).items():
            chunks[key].append(values)
        if collect_per_user:
            lists.append(indices.astype(np.int32))
    _warn_fold_in_removed(int(leaked[0]), int(leaked[1]), kept.shape[0], max_k, stacklevel=2)
    per_user = {key: np.concatenate(parts) for key, parts in chunks.items()}
    scored = np.concatenate(lists) if lists else np.empty((0, max_k), dtype=np.int32)
    collected = (scored, src.shape[1]) if collect_per_user else None
    return _result(metric_objs, per_user, ids[kept], fingerprint, collected)
