"""A training run's test metrics on MLflow 3's logged models, so models rank by a metric across runs.

Every ``train`` run (and every imported run) has one :class:`mlflow.entities.LoggedModel`: the pyfunc model
:func:`~mlflow_recsys.tracking._model_logging.log_recommender` logs, named ``model`` (so ``runs:/<run>/model``
resolves), or, for a run without one (``log_model=False``, lists imported from another framework), an
*external* model named after the recommender (``mlflow.create_external_model``). The model carries its run's
``recsys.`` tags (model, seed, split digest, ...) and params, and the test metrics with their level intervals
are logged with ``model_id`` and ``dataset`` (the split), so one split's models rank by nDCG@100::

    mlflow.search_logged_models(
        experiment_ids=[experiment_id],
        filter_string=f"tags.`recsys.split_digest` = '{split_digest}'",
        order_by=[{"field_name": "metrics.ndcg_at_100", "ascending": False}],
    )
"""

from __future__ import annotations

import mlflow
from mlflow.entities import LoggedModelOutput

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._levels import LevelIntervals, metric_level_intervals
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._naming import mlflow_metric_name

#: The ``model_type`` of every logged model this package makes.
MODEL_TYPE = "recommender"
#: Name suffixes of a metric's level interval: ``ndcg_at_100.ci_low`` and ``ndcg_at_100.ci_high``.
CI_LOW, CI_HIGH = ".ci_low", ".ci_high"
#: Characters MLflow refuses in a logged model's name (``mlflow.utils.validation._validate_logged_model_name``).
_REFUSED_IN_MODEL_NAMES = str.maketrans({c: "-" for c in "/:.%\"'"})


def log_test_metrics(result: EvaluationResult, *, dataset, model_id: str | None = None) -> LevelIntervals:
    """Log ``result``'s metrics and level intervals to the active run, linked to ``dataset`` and to the logged
    model ``model_id`` (default: a new external model of the run); return the intervals."""
    intervals = metric_level_intervals(result)
    run_id = mlflow.active_run().info.run_id  # type: ignore[union-attr]
    client = mlflow.MlflowClient()
    run = client.get_run(run_id)
    run_tags = {k: v for k, v in run.data.tags.items() if k.startswith("recsys.")}
    if model_id is None:
        name = run_tags.get(tags.MODEL, "model").translate(_REFUSED_IN_MODEL_NAMES)
        model = mlflow.create_external_model(
            name=name, params=dict(run.data.params), tags=run_tags, model_type=MODEL_TYPE
        )
        model_id = model.model_id
        client.log_outputs(run_id, models=[LoggedModelOutput(model_id, step=0)])
    else:
        mlflow.set_logged_model_tags(model_id, run_tags)
    metrics: dict[str, float] = {}
    for key, value in result.metrics.items():
        name = mlflow_metric_name(key)
        metrics |= {name: value, name + CI_LOW: intervals.ci_low[key], name + CI_HIGH: intervals.ci_high[key]}
    # Logged with the model and the dataset: what mlflow.search_logged_models filters and orders by.
    mlflow.log_metrics({k: float(v) for k, v in metrics.items()}, model_id=model_id, dataset=dataset)
    return intervals
