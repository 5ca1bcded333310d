"""``mlflow.models.evaluate(..., evaluators="recsys")``: ranking metrics and per-user artifacts for any model.

Registered under the ``mlflow.model_evaluator`` entry point as ``recsys``. Use::

    mlflow.models.evaluate(
        model_uri, data=frame, targets="targets", model_type="recommender",
        evaluators="recsys", evaluator_config={"metrics": ["ndcg@100", "recall@20"]},
    )

Without a model, ``predictions="<column>"`` names the frame's column of recommended ids per row (best first;
a column other than the fold-in ``items``) and those static lists are scored the same way.

``evaluator_config["device"]`` (a torch device string, e.g. ``"cuda"``) scores and ranks on that device, through the
logged model's inference param ``device``; a model whose signature lacks it is refused, as are static predictions.

``frame`` has a column ``items`` (each user's fold-in item ids), the targets column (the held-out item ids to find)
and optionally ``sample_id``. The model must return, per row, a list of recommended item ids in a column ``items``
(best first), as the models this package logs do; it is asked for ``k`` = the largest cutoff. The evaluator logs the
aggregate metrics under MLflow-safe names and ``per_user.parquet`` + ``evaluation.json`` to the run, so the run can
be compared like any training run: give ``evaluator_config`` a ``model_name`` (and ``seed``, ``split_digest`` and
the catalogue ``item_ids`` where known, so fingerprints match the training runs') and the run is tagged as a
training run of that model.

Ids become columns through :class:`mlflow_recsys._catalogue.ItemCatalogue`, as in the served model and
:func:`mlflow_recsys._evaluation_by_ids.evaluate_by_ids` (which evaluates frames of ids without MLflow). Without
``item_ids`` the catalogue is every id seen in the data and the output, sorted. With it, a target or recommended id
outside it raises ``ValueError``; fold-in ids outside it are ignored, as the model ignores them.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pandas as pd
from mlflow.models.evaluation.base import EvaluationResult as MlflowEvaluationResult
from mlflow.models.evaluation.base import ModelEvaluator

from mlflow_recsys._catalogue import ItemCatalogue, flatten_id_lists, id_kind, plain_id

#: The only model type this evaluator accepts.
MODEL_TYPE = "recommender"


class RecsysEvaluator(ModelEvaluator):
    """Ranking metrics (nDCG, recall, MRR, ...) with per-user values, for ``model_type="recommender"``."""

    @classmethod
    def can_evaluate(cls, *, model_type, evaluator_config, **kwargs) -> bool:
        # Strict: never volunteer for classifiers, regressors or LLM evaluations.
        return model_type == MODEL_TYPE

    def evaluate(self, *, model_type, dataset, run_id, evaluator_config, model=None, predictions=None, **kwargs):
        from mlflow_recsys.evaluation import evaluate_rankings
        from mlflow_recsys.metrics import parse_metric_keys
        from mlflow_recsys.tracking._limits import MAX_TAG_LENGTH

        config = dict(evaluator_config or {})
        for key in ("model_name", "seed", "split_digest"):  # tags, which MLflow would cut at 8,000 characters
            if key in config and len(str(config[key])) > MAX_TAG_LENGTH:
                raise ValueError(
                    f"evaluator_config[{key!r}]: expected at most {MAX_TAG_LENGTH:,} characters, "
                    f"found {len(str(config[key])):,}"
                )
        metrics = parse_metric_keys(config.get("metrics", ["ndcg@100", "recall@20", "mrr@20"]))
        k = max(m.max_k for m in metrics)
        features = pd.DataFrame(dataset.features_data)
        if features.empty:
            raise ValueError("data: expected at least one row (one user), found none")
        if "items" not in features.columns:
            raise ValueError(f"data: expected a column 'items' of fold-in item ids, found {list(features.columns)}")
        if not dataset.has_targets:
            raise ValueError("targets: expected the name of the column of held-out item ids, found none")
        if model is None and dataset.predictions_data is None:
            raise ValueError(
                "model: expected a model, or static predictions (predictions='<column of recommended ids>'), "
                "found neither"
            )
        params = _device_params(config, model)
        if model is None:
            # Static predictions: the data's predictions column holds each row's recommended ids, best first.
            output = pd.DataFrame({"items": list(dataset.predictions_data)})
        else:
            output = model.predict(features[["items"]].assign(k=k), params=params)
        if not isinstance(output, pd.DataFrame) or "items" not in output.columns:
            raise ValueError("model: expected predictions with a column 'items' (recommended item ids)")

        catalogue = _catalogue(config.get("item_ids"), [features["items"], dataset.labels_data, output["items"]])
        # Fold-in ids outside the catalogue are ignored, as the model ignores them (and reports them itself).
        source, _ = catalogue.matrix_from_lists(features["items"])
        target, unknown = catalogue.matrix_from_lists(dataset.labels_data)
        _refuse_unknown([i for row in unknown for i in row], "targets")
        sample_ids = features["sample_id"].to_numpy() if "sample_id" in features.columns else None
        rankings = _rankings(catalogue, output["items"], k)
        result = evaluate_rankings(rankings, targets=target, metrics=metrics, sample_ids=sample_ids, source=source)
        return MlflowEvaluationResult(metrics=_log_result(run_id, result, config), artifacts={})


def _device_params(config: dict, model) -> dict[str, str] | None:
    """The inference params that score on ``evaluator_config['device']``; None without one. Refused where nothing
    would honour it: static predictions, or a model whose signature has no ``device`` param (MLflow would drop it
    with a warning and score on the CPU)."""
    from mlflow_recsys.models._device import check_device
    from mlflow_recsys.tracking._model_logging import DEVICE_PARAM

    if "device" not in config:
        return None
    name = "evaluator_config['device']"
    check_device(config["device"], name)
    if model is None:
        raise ValueError(f"{name}: expected a model to score on the device, found static predictions")
    metadata = getattr(model, "metadata", None)  # a plain function given as the model has none
    schema = None if metadata is None else metadata.get_params_schema()
    if schema is None or DEVICE_PARAM not in {spec.name for spec in schema.params}:
        raise ValueError(
            f"{name}: expected a model whose signature takes the inference param {DEVICE_PARAM!r} (the models "
            "mlflow-recsys logs do), found one without it; leave 'device' out to score it as it is"
        )
    return {DEVICE_PARAM: config["device"]}


def _log_result(run_id: str, result, config: dict) -> dict[str, float]:
    """Log the metrics, the fingerprint, the training-run tags (with a ``model_name``) and the per-user artifacts
    to the run; return the metrics by logged name."""
    from mlflow.tracking import MlflowClient

    from mlflow_recsys.tracking import _tags as tags
    from mlflow_recsys.tracking._artifacts import write_evaluation_artifacts
    from mlflow_recsys.tracking._context import mark_training_experiment
    from mlflow_recsys.tracking._naming import mlflow_metric_name

    client = MlflowClient()
    logged = {mlflow_metric_name(key): value for key, value in result.metrics.items()}
    run_tags = {tags.TARGETS_FINGERPRINT: result.targets_fingerprint}
    if "model_name" in config:  # a named run becomes a training run that `mlflow-recsys compare` can select
        run_tags |= {tags.ROLE: tags.ROLE_TRAIN, tags.MODEL: str(config["model_name"])}
        run_tags[tags.SEED] = str(config.get("seed", tags.NO_SEED))
        if config.get("split_digest"):
            run_tags[tags.SPLIT_DIGEST] = str(config["split_digest"])
    for name, value in logged.items():
        client.log_metric(run_id, name, value)
    for key, value in run_tags.items():
        client.set_tag(run_id, key, value)
    if "model_name" in config:
        mark_training_experiment(client.get_run(run_id).info.experiment_id)
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-eval-") as tmp:
        write_evaluation_artifacts(result, tmp, split_digest=config.get("split_digest"))
        client.log_artifacts(run_id, tmp)
    return logged


def _catalogue(item_ids, columns) -> ItemCatalogue:
    """The catalogue the fingerprint is computed over: the given ids, or every id seen, sorted."""
    if item_ids is not None:
        return ItemCatalogue(item_ids, name="evaluator_config['item_ids']")
    seen = pd.unique(np.concatenate([flatten_id_lists(column)[1] for column in columns]))
    try:
        kind = id_kind(seen, "data") if len(seen) else "integer"
    except ValueError as err:
        raise ValueError(f"{err}; pass evaluator_config['item_ids'] or use one type") from None
    return ItemCatalogue(np.sort(seen.astype(np.int64 if kind == "integer" else str)), name="data")


def _rankings(catalogue: ItemCatalogue, lists, k: int) -> np.ndarray:
    """The lists of item ids as column indices, best first, ``-1`` padding, at least ``k`` wide and never cut:
    fold-in items are taken out before the cutoffs apply, as ``import-run`` does, so a list that leads with
    history items is scored on the items behind them."""
    rows, ids, positions = flatten_id_lists(lists)
    columns = catalogue.indices(ids)
    _refuse_unknown(ids[columns < 0], "model output 'items'")
    width = max(k, int(positions.max()) + 1 if positions.size else 0)
    rankings = np.full((len(lists), width), -1, dtype=np.int64)
    rankings[rows, positions] = columns
    return rankings


def _refuse_unknown(unknown, what: str) -> None:
    if len(unknown):
        raise ValueError(
            f"{what}: expected item ids from evaluator_config['item_ids'], found unknown ids "
            f"{[plain_id(i) for i in unknown[:5]]}"
        )
