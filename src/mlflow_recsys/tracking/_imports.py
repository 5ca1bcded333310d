"""``log_recommendations``: another framework's recommendation lists, re-scored on a split, logged like a train run."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow
from mlflow.utils.validation import path_not_unique, validate_param_and_metric_name

from mlflow_recsys import _validation as validation
from mlflow_recsys._validation import expected
from mlflow_recsys.data import load_recsys_split
from mlflow_recsys.interchange._recommendations import read_recommendations, score_recommendations
from mlflow_recsys.metrics import parse_metric_keys
from mlflow_recsys.models._train_config import DEFAULT_METRICS
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._context import check_step_run, entry_point_run, mark_training_experiment
from mlflow_recsys.tracking._limits import MAX_KEY_LENGTH, MAX_PARAM_LENGTH
from mlflow_recsys.tracking._training import _train_tags, log_evaluation, resolve_checkpoint

#: Params the import sets itself; a user param of these names is refused.
_OWN_PARAMS = ("model", "metrics", "checkpoint", "history", "missing")


def log_recommendations(
    recommendations: Any,
    *,
    checkpoint: str | os.PathLike,
    model: str,
    seed: int | str | None = None,
    params: Mapping[str, Any] | None = None,
    metrics: Any = None,
    user_col: str = "user",
    item_col: str = "item",
    rank_col: str | None = None,
    score_col: str | None = None,
    history: str = "remove",
    missing: str = "zero",
    format: str = "auto",
) -> str:
    """Score another framework's lists on the checkpoint's test users and log them as a ``train``-role run.

    ``recommendations`` is a DataFrame, a .parquet/.csv/TREC path or a ``ranx.Run`` (see
    :func:`~mlflow_recsys.interchange._recommendations.read_recommendations`). Read, checked and scored before
    any run exists (:func:`~mlflow_recsys.interchange._recommendations.score_recommendations`); the run then gets
    what :func:`~mlflow_recsys.tracking.run_train` logs (role train, ``recsys.model``, ``recsys.seed`` or
    ``none``, ``recsys.config`` = JSON of ``params`` with sorted keys, split digest, dataset, targets fingerprint,
    metrics, ``per_user.parquet``, ``evaluation.json``), the tag ``recsys.imported_from`` (the format) and the
    metrics ``n_history_items_removed``, ``n_missing_users`` and ``n_short_lists``. Returns the run id.

    Params: ``params`` as given, plus ``model``, ``metrics``, ``checkpoint``, ``history`` and ``missing``.
    Default metrics: the ``train`` step's (:data:`~mlflow_recsys.models.DEFAULT_METRICS`).

    Raises
    ------
    ValueError
        Bad ``model`` (not a one-line name of at most 6,000 characters), ``seed`` (not an integer in [0, 2**63 - 1],
        or its decimal text), ``params`` (keys over 250 characters or outside MLflow's rule for param names, values
        over 6,000, or an import's own name), and every protocol refusal of the readers and checks; no run is made.
    FileNotFoundError
        A missing checkpoint or recommendations file.
    """
    check_step_run()
    model = validation.line(model, "model", longest=MAX_PARAM_LENGTH)  # logged whole as a param and a tag
    if seed is not None:  # the seed groups runs into a model's seeds: 7 and "007" must be one seed
        seed = validation.seed(
            int(seed) if isinstance(seed, str) and seed.isascii() and seed.isdigit() else seed, "seed"
        )
    user_params = _params_iv(params)
    metric_objs = parse_metric_keys(list(DEFAULT_METRICS) if metrics is None else metrics)
    keys = [k for m in metric_objs for k in m.keys]
    checkpoint = os.fspath(checkpoint)
    recs = read_recommendations(
        recommendations, user_col=user_col, item_col=item_col, rank_col=rank_col, score_col=score_col, format=format
    )
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-import-") as tmp:
        split = load_recsys_split(resolve_checkpoint(checkpoint, tmp))
        scored = score_recommendations(recs, split, metrics=metric_objs, history=history, missing=missing)  # type: ignore[arg-type]
        seed_tag = tags.NO_SEED if seed is None else str(seed)
        run_params = {**user_params, "model": model, "metrics": ",".join(keys), "checkpoint": checkpoint}
        run_params |= {"history": history, "missing": missing}
        made_with = _train_tags(model, None, seed_tag, split, config_tag=json.dumps(user_params, sort_keys=True))
        made_with[tags.IMPORTED_FROM] = recs.kind
        run_name = f"{model} seed {seed_tag} (imported)" if seed is not None else f"{model} (imported)"
        with entry_point_run(run_name, params=run_params, whole_params_in="evaluation.json", tags=made_with) as run:
            mark_training_experiment(run.info.experiment_id)
            log_evaluation(scored.result, split, Path(tmp) / "evaluation")
            mlflow.log_metrics({k: float(v) for k, v in scored.counts.items()})
            return run.info.run_id


def _params_iv(params: Mapping[str, Any] | None) -> dict[str, str]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise ValueError(expected("params", "a mapping of names to values", params))
    out = {}
    for key, value in params.items():
        ok = isinstance(key, str) and 0 < len(key) <= MAX_KEY_LENGTH and key not in _OWN_PARAMS
        if not ok or not validate_param_and_metric_name(key) or path_not_unique(key):
            rule = (
                f"names of 1 to {MAX_KEY_LENGTH} characters other than {list(_OWN_PARAMS)}, of letters, digits, "
                "spaces and _ - . / (MLflow's rule for param names), without '..' or a leading /"
            )
            raise ValueError(expected("params", rule, key))
        if len(str(value)) > MAX_PARAM_LENGTH:
            raise ValueError(
                f"params[{key!r}]: expected at most {MAX_PARAM_LENGTH:,} characters, found {len(str(value)):,}"
            )
        out[key] = str(value)
    return out
