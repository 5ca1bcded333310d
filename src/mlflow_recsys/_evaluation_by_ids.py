"""Evaluate a recommender on frames of user and item ids (:func:`evaluate_by_ids`), mapped to the model's columns as the
served model and the ``recsys`` MLflow evaluator map them."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlflow_recsys._catalogue import ItemCatalogue, id_kind
from mlflow_recsys._validation import integer
from mlflow_recsys.evaluation import EvaluationResult, MetricSpec, evaluate_recommender, resolve_metrics
from mlflow_recsys.models._base import UnknownItemsWarning


def evaluate_by_ids(
    model: Any,
    histories: pd.DataFrame,
    targets: pd.DataFrame,
    *,
    item_ids: Any,
    metrics: MetricSpec | Sequence[MetricSpec],
    user_col: str = "user",
    item_col: str = "item",
    batch_size: int = 1024,
    collect_per_user: bool = True,
) -> EvaluationResult:
    """Evaluate a recommender on frames of user and item ids, one row per interaction.

    The ids are mapped to the model's columns by :class:`~mlflow_recsys._catalogue.ItemCatalogue` (as the served model
    and the ``recsys`` MLflow evaluator map them) and :func:`evaluate_recommender` scores the matrices: for the same
    interactions both give the same values and targets fingerprint.

    Parameters
    ----------
    model:
        Fitted model with ``n_items`` and ``recommend(source_rows, k)``, as for :func:`evaluate_recommender`.
    histories:
        The fold-in: one row per (user, item) the user has interacted with, columns ``user_col`` and ``item_col``
        (others are ignored). May be empty; users in it who have no targets are ignored.
    targets:
        The held-out items to find, one row per (user, item), same columns; at least one row.
    item_ids:
        The model's item ids in column order (a split's ``item_ids``): 1-D, distinct, all integers or all strings,
        ``model.n_items`` of them.
    metrics:
        Metric objects and/or keys like ``"recall@20"`` (or a single one).
    user_col, item_col:
        Column names of the user and item ids in both frames; default ``"user"`` and ``"item"``, as in the package's
        interaction frames.
    batch_size:
        Users per ``recommend`` call (positive int, default 1024).
    collect_per_user:
        Keep per-user values (default True, needed for paired comparisons).

    Returns
    -------
    EvaluationResult
        One row per distinct user of ``targets``; ``sample_ids`` are those users sorted (int64 or str).

    Raises
    ------
    ValueError
        Before the model is called, naming the argument: a frame is not a DataFrame or lacks a column; an id is missing,
        or not an integer or string; the two frames' user ids, or a frame's item ids and ``item_ids``, are of different
        kinds; ``targets`` is empty or names items outside ``item_ids``; ``item_ids`` repeats an id or its length is not
        ``model.n_items``; ``metrics`` or ``batch_size`` is invalid (as for :func:`evaluate_recommender`).

    Warns
    -----
    UnknownItemsWarning
        When history rows of evaluated users name items outside ``item_ids``; the message counts them.
    UserWarning
        When evaluated users have no known history item, or a target is also in its user's history; the message counts
        them.

    Notes
    -----
    Each distinct user of ``targets`` is one evaluation row, in sorted user-id order as in the package's splits, so the
    frames of a split's test users (one draw) reproduce the targets fingerprint of its training runs. Relevance is
    binary: a repeated (user, item) row counts once. A user only in ``histories`` is not evaluated; one of ``targets``
    with no known history item is evaluated from an empty history (cold start; EASE and ELSA then rank in catalogue
    order) and counted in a warning: drop such users from ``targets`` to evaluate warm users only. A target also in its
    user's history stays a target, a certain miss.

    An item outside ``item_ids`` is left out of the fold-in, as the served model leaves it out, but refused in
    ``targets``: dropping it would shrink the user's relevant set and raise recall and nDCG, counting it as a miss needs
    a column the model does not have, and no split of this package produces such targets. To evaluate anyway, remove
    those rows from ``targets`` and report that you did.
    """
    metric_objs = resolve_metrics(metrics)
    integer(batch_size, "batch_size", minimum=1)
    _check_frames(histories, targets, user_col, item_col)
    catalogue = ItemCatalogue(item_ids, name="item_ids")
    n_items = getattr(model, "n_items", None)
    if n_items is not None and int(n_items) != len(catalogue):
        raise ValueError(f"item_ids: expected {int(n_items)} ids (one per column of the model), found {len(catalogue)}")
    history_users, history_items, target_users, target_items = _ids(histories, targets, catalogue, user_col, item_col)
    users, target_rows = np.unique(target_users, return_inverse=True)
    history_rows = pd.Index(users).get_indexer(history_users)
    evaluated = history_rows >= 0
    source, unknown = catalogue.matrix_from_pairs(history_rows[evaluated], history_items[evaluated], len(users))
    target, _ = catalogue.matrix_from_pairs(target_rows, target_items, len(users))
    if unknown.any():
        examples = np.unique(history_items[evaluated][unknown]).tolist()  # sorted: row order does not matter
        warnings.warn(
            f"histories: {int(unknown.sum())} row(s) of evaluated users name item ids outside item_ids "
            f"(such as {examples[:5]}); they were left out of the fold-in, as the model has no column for them",
            UnknownItemsWarning,
            stacklevel=2,
        )
    _warn_cold_users_and_seen_targets(source, target, len(users))
    return evaluate_recommender(
        model,
        source=source,
        targets=target,
        metrics=metric_objs,
        sample_ids=users,
        batch_size=batch_size,
        collect_per_user=collect_per_user,
    )


def _warn_cold_users_and_seen_targets(source, target, n_users: int) -> None:
    """UserWarnings, for :func:`evaluate_by_ids`'s caller: users with an empty fold-in, and targets in the history."""
    # stacklevel 3: past this helper and evaluate_by_ids, to the line that called it
    n_cold = int(np.count_nonzero(np.diff(source.indptr) == 0))
    if n_cold:
        warnings.warn(
            f"{n_cold} of {n_users} evaluated users have no history item in item_ids and are ranked from "
            "an empty history (cold start); drop them from targets to evaluate warm users only",
            UserWarning,
            stacklevel=3,
        )
    n_seen = int(source.multiply(target).count_nonzero())
    if n_seen:
        warnings.warn(
            f"targets: {n_seen} target(s) are also in their user's history; models never recommend "
            "history items, so each is a certain miss",
            UserWarning,
            stacklevel=3,
        )


def _check_frames(histories: Any, targets: Any, user_col: Any, item_col: Any) -> None:
    if user_col == item_col:
        raise ValueError(f"item_col: expected a column other than user_col, found {item_col!r} for both")
    for name, frame in (("histories", histories), ("targets", targets)):
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(
                f"{name}: expected a pandas DataFrame with columns {user_col!r} and {item_col!r}, "
                f"found {type(frame).__name__}"
            )
        if user_col not in frame.columns or item_col not in frame.columns:
            raise ValueError(
                f"{name}: expected columns {user_col!r} and {item_col!r} (one row per user and item), "
                f"found columns {list(frame.columns)}"
            )
    if len(targets) == 0:
        raise ValueError("targets: expected at least one row (a user and a held-out item), found none")


def _ids(histories: pd.DataFrame, targets: pd.DataFrame, catalogue: ItemCatalogue, user_col: Any, item_col: Any):
    """(history users, history items, target users, target items) as int64 or str arrays, every target item in the
    catalogue and each column of one kind."""
    target_users, user_kind = _id_column(targets, user_col, "targets")
    history_users, kind = _id_column(histories, user_col, "histories")
    if kind is not None and kind != user_kind:
        raise ValueError(
            f"histories[{user_col!r}]: expected {user_kind} user ids like targets[{user_col!r}], found {kind} ids"
        )
    items = {}
    for name, frame in (("histories", histories), ("targets", targets)):
        items[name], kind = _id_column(frame, item_col, name)
        if kind is not None and kind != catalogue.kind:
            raise ValueError(
                f"{name}[{item_col!r}]: expected {catalogue.kind} item ids like item_ids, found {kind} ids"
            )
    unknown = catalogue.indices(items["targets"]) < 0
    if unknown.any():
        examples = np.unique(items["targets"][unknown]).tolist()
        raise ValueError(
            f"targets: expected item ids from item_ids, found {int(unknown.sum())} row(s) with other ids "
            f"(such as {examples[:5]}); the model can never recommend them, so remove those rows, and say so, "
            "or evaluate with a catalogue that holds them"
        )
    return history_users, items["histories"], target_users, items["targets"]


def _id_column(frame: pd.DataFrame, column: Any, name: str) -> tuple[np.ndarray, str | None]:
    """A frame's id column as an int64 or str array, with its kind (None when the frame is empty)."""
    where = f"{name}[{column!r}]"
    values = frame[column]
    n_missing = int(values.isna().sum())
    if n_missing:
        raise ValueError(f"{where}: expected an id in every row, found {n_missing} missing")
    ids = values.to_numpy()
    if ids.size == 0:
        return ids, None
    kind = id_kind(ids, where)
    return (ids.astype(np.int64) if kind == "integer" else ids.astype(str)), kind
