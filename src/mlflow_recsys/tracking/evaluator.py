"""``mlflow.models.evaluate(..., evaluators="recsys")``: ranking metrics and per-user artifacts for any model.

Registered under the ``mlflow.model_evaluator`` entry point as ``recsys``. Use::

    mlflow.models.evaluate(
        model_uri, data=frame, targets="targets", model_type="recommender",
        evaluators="recsys", evaluator_config={"metrics": ["ndcg@100", "recall@20"]},
    )

``frame`` has a column ``items`` (each user's fold-in item ids), the targets
column (the held-out item ids to find) and optionally ``sample_id``. The model
must return, per row, a list of recommended item ids in a column ``items`` (best
first), as the models this package logs do; it is asked for ``k`` = the largest
cutoff. The evaluator logs the aggregate metrics under MLflow-safe names and
``per_user.parquet`` + ``evaluation.json`` to the run, so the run can be compared
like any training run: give ``evaluator_config`` a ``model_name`` (and ``seed``,
``split_digest`` and the catalogue ``item_ids`` where known, so fingerprints match
the training runs') and the run is tagged as a training run of that model.

Without ``item_ids`` the catalogue is every id seen in the data and the output,
sorted. With it, a target or recommended id outside it raises ``ValueError``;
fold-in ids outside it are ignored, as the model ignores them.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd
import scipy.sparse as sp
from mlflow.models.evaluation.base import EvaluationResult as MlflowEvaluationResult
from mlflow.models.evaluation.base import ModelEvaluator

#: The only model type this evaluator accepts.
MODEL_TYPE = "recommender"


class RecsysEvaluator(ModelEvaluator):
    """Ranking metrics (nDCG, recall, MRR, ...) with per-user values, for ``model_type="recommender"``."""

    @classmethod
    def can_evaluate(cls, *, model_type, evaluator_config, **kwargs) -> bool:
        # Strict: never volunteer for classifiers, regressors or LLM evaluations.
        return model_type == MODEL_TYPE

    def evaluate(self, *, model_type, dataset, run_id, evaluator_config, model=None, predictions=None, **kwargs):
        from mlflow.tracking import MlflowClient

        from mlflow_recsys.evaluation import evaluate_rankings
        from mlflow_recsys.metrics import parse_metric_keys
        from mlflow_recsys.tracking import tags
        from mlflow_recsys.tracking.artifacts import write_evaluation_artifacts
        from mlflow_recsys.tracking.naming import mlflow_metric_name

        config = dict(evaluator_config or {})
        from mlflow_recsys.tracking.limits import MAX_TAG_LENGTH

        for key in ("model_name", "seed", "split_digest"):
            # These become tags, which MLflow would cut at 8,000 characters without a word.
            if key in config and len(str(config[key])) > MAX_TAG_LENGTH:
                raise ValueError(f"evaluator_config[{key!r}]: expected at most {MAX_TAG_LENGTH:,} characters, "
                                 f"found {len(str(config[key])):,}")
        metrics = parse_metric_keys(config.get("metrics", ["ndcg@100", "recall@20", "mrr@20"]))
        k = max(m.max_k for m in metrics)
        features = pd.DataFrame(dataset.features_data)
        if features.empty:
            raise ValueError("data: expected at least one row (one user), found none")
        if "items" not in features.columns:
            raise ValueError(f"data: expected a column 'items' of fold-in item ids, found {list(features.columns)}")
        if not dataset.has_targets:
            raise ValueError("targets: expected the name of the column of held-out item ids, found none")
        if model is None:
            raise ValueError("model: the recsys evaluator needs a model to produce rankings, found None")
        output = model.predict(features[["items"]].assign(k=k))
        if not isinstance(output, pd.DataFrame) or "items" not in output.columns:
            raise ValueError("model: expected predictions with a column 'items' (recommended item ids)")

        item_ids = _catalogue(config.get("item_ids"), [features["items"], dataset.labels_data, output["items"]])
        index_of = {_key(i): n for n, i in enumerate(item_ids.tolist())}
        source_rows = [_indices(r, index_of, None) for r in features["items"]]
        target_rows = [_indices(r, index_of, "targets") for r in dataset.labels_data]
        ranked = [_indices(r, index_of, "model output 'items'")[:k] for r in output["items"]]
        n_items = len(item_ids)
        rankings = np.full((len(ranked), k), -1, dtype=np.int64)
        for i, row in enumerate(ranked):
            rankings[i, : row.size] = row
        sample_ids = features["sample_id"].to_numpy() if "sample_id" in features.columns else None
        result = evaluate_rankings(
            rankings, targets=_csr(target_rows, n_items), metrics=metrics, sample_ids=sample_ids,
            source=_csr(source_rows, n_items),
        )

        client = MlflowClient()
        logged = {mlflow_metric_name(key): value for key, value in result.metrics.items()}
        for name, value in logged.items():
            client.log_metric(run_id, name, value)
        client.set_tag(run_id, tags.TARGETS_FINGERPRINT, result.targets_fingerprint)
        if "model_name" in config:
            # Named runs become training runs that `mlflow-recsys compare` can select.
            run_tags = {tags.ROLE: tags.ROLE_TRAIN, tags.MODEL: str(config["model_name"]),
                        tags.SEED: str(config.get("seed", tags.NO_SEED))}
            if config.get("split_digest"):
                run_tags[tags.SPLIT_DIGEST] = str(config["split_digest"])
            for key, value in run_tags.items():
                client.set_tag(run_id, key, value)
            client.set_experiment_tag(client.get_run(run_id).info.experiment_id, tags.HAS_TRAINING_RUNS, "true")
        with tempfile.TemporaryDirectory(prefix="mlflow-recsys-eval-") as tmp:
            write_evaluation_artifacts(result, tmp, split_digest=config.get("split_digest"))
            client.log_artifacts(run_id, tmp)
        return MlflowEvaluationResult(metrics=logged, artifacts={})


def _key(item_id):
    return item_id.item() if isinstance(item_id, np.generic) else item_id


def _catalogue(item_ids, columns) -> np.ndarray:
    """The catalogue the fingerprint is computed over: the given ids, or every id seen, sorted."""
    if item_ids is not None:
        ids = np.asarray(item_ids)
        if ids.ndim != 1 or len(np.unique(ids)) != len(ids):
            raise ValueError(f"evaluator_config['item_ids']: expected a 1-d array of distinct item ids, "
                             f"found shape {ids.shape} with {len(ids) - len(np.unique(ids))} duplicate(s)")
        return ids
    seen = {_key(i) for column in columns for row in column for i in _row(row)}
    try:
        return np.asarray(sorted(seen))
    except TypeError:
        raise ValueError("data: item ids mix types (e.g. int and str); pass evaluator_config['item_ids'] "
                         "or use one type") from None


def _row(row) -> list:
    """A row of ids as a list; a missing row (None or NaN) is an empty list."""
    if row is None or (isinstance(row, float) and np.isnan(row)):
        return []
    return list(row)


def _indices(row, index_of: dict, what: str | None) -> np.ndarray:
    """Column indices of a row of item ids; ids outside the catalogue are an error unless ``what`` is None."""
    row = _row(row)
    found = [index_of.get(_key(i)) for i in row]
    if what is not None and None in found:
        missing = [i for i, n in zip(row, found) if n is None]
        raise ValueError(f"{what}: expected item ids from evaluator_config['item_ids'], found unknown ids "
                         f"{missing[:5]}")
    return np.asarray([n for n in found if n is not None], dtype=np.int64)


def _csr(rows: list[np.ndarray], n_items: int) -> sp.csr_matrix:
    indptr = np.concatenate([[0], np.cumsum([r.size for r in rows])])
    indices = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    matrix = sp.csr_matrix((np.ones(indices.size, dtype=np.float32), indices, indptr), shape=(len(rows), n_items))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix
