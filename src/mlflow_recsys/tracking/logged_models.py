"""A training run's test metrics on MLflow 3's logged models, so models rank by a metric across runs.

Every ``train`` run (and every imported run) has one :class:`mlflow.entities.LoggedModel`: the pyfunc model
:func:`~mlflow_recsys.tracking.model_logging.log_recommender` logs, named ``model`` (so ``runs:/<run>/model``
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

from collections.abc import Mapping

import mlflow
from mlflow.entities import LoggedModel, LoggedModelOutput

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats.levels import LevelIntervals, metric_level_intervals
from mlflow_recsys.tracking import tags as recsys_tags
from mlflow_recsys.tracking.naming import mlflow_metric_name

#: The ``model_type`` of every logged model this package makes.
MODEL_TYPE = "recommender"
#: Name suffixes of a metric's level interval: ``ndcg_at_100.ci_low`` and ``ndcg_at_100.ci_high``.
CI_LOW, CI_HIGH = ".ci_low", ".ci_high"


def link_test_metrics(metrics: Mapping[str, float], *, model_id: str, dataset) -> None:
    """Log ``metrics`` (MLflow metric name -> value) to the active run, linked to the logged model ``model_id``
    and to ``dataset`` (an :class:`mlflow.data.dataset.Dataset`: the split the run was evaluated on), at step 0.

    The model's metrics are what :func:`mlflow.search_logged_models` filters and orders by.
    """
    mlflow.log_metrics({k: float(v) for k, v in metrics.items()}, model_id=model_id, dataset=dataset)


def external_model(name: str, params: Mapping[str, str], tags: Mapping[str, str]) -> LoggedModel:
    """A READY external logged model of the active run (``mlflow.create_external_model``), named ``name``, with
    ``params`` and ``tags``, recorded as the run's output: the model of a run whose weights MLflow does not hold.
    """
    model = mlflow.create_external_model(
        name=logged_model_name(name), params=dict(params), tags=dict(tags), model_type=MODEL_TYPE
    )
    run_id = mlflow.active_run().info.run_id  # type: ignore[union-attr]
    mlflow.MlflowClient().log_outputs(run_id, models=[LoggedModelOutput(model.model_id, step=0)])
    return model


#: Characters MLflow refuses in a logged model's name (``mlflow.utils.validation._validate_logged_model_name``).
_REFUSED_IN_MODEL_NAMES = str.maketrans({c: "-" for c in "/:.%\"'"})


def logged_model_name(model: str) -> str:
    """The name of the logged model of a recommender named ``model``: MLflow refuses ``/ : . % " '`` in one, so
    each becomes ``-`` (``implicit.als`` is ``implicit-als``); the run's ``recsys.model`` tag, which the model
    carries too, keeps the name as given."""
    return model.translate(_REFUSED_IN_MODEL_NAMES)


def log_test_metrics(result: EvaluationResult, *, dataset, model_id: str | None = None) -> LevelIntervals:
    """Log ``result``'s metrics (``ndcg_at_100``) and their level intervals (``ndcg_at_100.ci_low`` /
    ``.ci_high``, :func:`~mlflow_recsys.stats.levels.metric_level_intervals` at its defaults) to the active run,
    linked to ``dataset`` and to the logged model ``model_id``; with ``model_id=None``, to a new
    :func:`external_model` named after the run's ``recsys.model`` tag. The model gets the run's ``recsys.`` tags
    as they are now (the targets fingerprint included). Returns the intervals (their settings go into
    ``evaluation.json``).

    Raises
    ------
    ValueError
        If ``result`` has no per-user values (checked before anything is logged).
    """
    intervals = metric_level_intervals(result)
    params, run_tags = _run_identity()
    if model_id is None:
        model_id = external_model(run_tags.get(recsys_tags.MODEL, "model"), params, run_tags).model_id
    else:
        mlflow.set_logged_model_tags(model_id, run_tags)
    metrics: dict[str, float] = {}
    for key, value in result.metrics.items():
        name = mlflow_metric_name(key)
        metrics |= {name: value, name + CI_LOW: intervals.ci_low[key], name + CI_HIGH: intervals.ci_high[key]}
    link_test_metrics(metrics, model_id=model_id, dataset=dataset)
    return intervals


def _run_identity() -> tuple[dict[str, str], dict[str, str]]:
    """The active run's params and its ``recsys.`` tags, as the tracking store holds them."""
    run = mlflow.MlflowClient().get_run(mlflow.active_run().info.run_id)  # type: ignore[union-attr]
    return dict(run.data.params), {k: v for k, v in run.data.tags.items() if k.startswith("recsys.")}
