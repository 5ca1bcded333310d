"""What one training fits and scores: the model, the hyper-parameters it was given and the metric keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mlflow_recsys import _validation as validation
from mlflow_recsys.metrics import RankingMetric, parse_metric_keys
from mlflow_recsys.models._base import Recommender
from mlflow_recsys.models._registry import ModelSpec, model_spec
from mlflow_recsys.settings_schema import check_fields, setting

#: Metric keys the ``train`` step evaluates by default: the comparing guide's four and the rest of the family.
#: The longest registered model name: MLflow's SQL stores keep it in a column of 256 characters.
MAX_REGISTERED_NAME_LENGTH = 256
#: Characters a registered model name to register under may not hold: ``models:/<name>/<version>`` and
#: ``models:/<name>@<alias>`` are split on them.
_NOT_IN_REGISTERED_NAMES = ("/", "@", ":")

DEFAULT_METRICS = (
    "ndcg@100",
    "calibrated_recall@20",
    "recall@20",
    "mrr@20",
    "map@20",
    "precision@20",
    "hit_rate@20",
    "calibrated_recall@50",
    "recall@50",
)


@dataclass(frozen=True)
class TrainConfig:
    """One training's settings, checked when made: which model, the hyper-parameters given, what is scored.

    Made once by ``mlflow-recsys train`` (the ``train`` entry point), by a study's Ray task and by Python callers of
    :func:`~mlflow_recsys.tracking.run_train`.

    Attributes
    ----------
    model : str
        A registered model (:data:`~mlflow_recsys.models.MODELS`: ``"EASE"``, ``"ELSA"``, ``"Popularity"``).
    hyperparameters : mapping of str to value, default empty
        Only the model's own (:attr:`ModelSpec.hyperparameters <mlflow_recsys.models.ModelSpec.hyperparameters>`; EASE:
        ``l2``; ELSA: ``seed``, ``latent_dim``, ``batch_size``, ``epochs``, ``lr``, ``weight_decay``, ``device``,
        ``patience``). The rest take the ``train`` step's defaults (ELSA: ``latent_dim=24``, ``batch_size=64``,
        ``epochs=20``), then the config class's. Held read-only and whole: every hyper-parameter of the model, defaults
        filled in, values in the config's types.
    register : str or None, default None
        A registered model name: the training's logged model becomes its next version (:func:`mlflow.register_model`),
        so a launch gate can name it ``models:/<name>/<version>``. Without ``/``, ``@`` or ``:``.
    metrics : tuple of str, default :data:`DEFAULT_METRICS`
        Metric keys scored on the test users (``"ndcg@100"``, ...), in order (a set is refused); one key may be given as
        a str. Keys of one metric class are grouped (see :func:`~mlflow_recsys.metrics.parse_metric_keys`).

    Raises
    ------
    ValueError
        For an unknown model, a hyper-parameter the model does not take (naming those it does), a value its config class
        refuses (the device included: it must exist on this machine), or an unknown metric key.
    """

    model: str
    hyperparameters: Mapping[str, Any] = field(default_factory=dict, hash=False)
    metrics: tuple[str, ...] = setting(DEFAULT_METRICS, "metric keys scored on the test users", "keys")
    register: str | None = setting(
        None,
        "register the logged model as a new version of this registered model (created if absent)",
        "name",
        optional=True,
        longest=MAX_REGISTERED_NAME_LENGTH,
    )

    def __post_init__(self) -> None:
        spec = model_spec(self.model)
        object.__setattr__(self, "model", spec.name)  # a numpy str_ as str
        if not isinstance(self.hyperparameters, Mapping):
            what = "a mapping of hyper-parameter names to values"
            raise ValueError(validation.expected("hyperparameters", what, self.hyperparameters))
        given = dict(self.hyperparameters)
        problem = foreign_hyperparameters(spec, given)
        if problem:
            raise ValueError(problem)
        config = spec.build({**spec.train_defaults, **given}).config  # each value checked by the model's config class
        # Every hyper-parameter, defaults filled in: a default given or left out makes the same config.
        canonical = {k: getattr(config, k) for k in spec.hyperparameters}
        object.__setattr__(self, "hyperparameters", MappingProxyType(canonical))
        check_fields(self)
        try:
            keys = tuple(key for metric in parse_metric_keys(self.metrics) for key in metric.keys)
        except ValueError as exc:
            raise ValueError(f"metrics: {exc}") from None
        object.__setattr__(self, "metrics", keys)
        if self.register is not None and (bad := sorted(set(self.register) & set(_NOT_IN_REGISTERED_NAMES))):
            what = f"a registered model name without {' '.join(_NOT_IN_REGISTERED_NAMES)} (has {' '.join(bad)})"
            raise ValueError(validation.expected("register", what, self.register))

    def __reduce__(self):
        # A read-only mapping does not pickle; a Ray task receives the config pickled.
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return (_restore, (type(self), {**values, "hyperparameters": dict(self.hyperparameters)}))

    @property
    def spec(self) -> ModelSpec:
        """The model's registry entry."""
        return model_spec(self.model)

    def build(self) -> Recommender:
        """A new unfitted model with these hyper-parameters (defaults filled in)."""
        return self.spec.build(self.hyperparameters)

    def metric_objects(self) -> list[RankingMetric]:
        """The metric objects that score :attr:`metrics` (see :func:`~mlflow_recsys.metrics.parse_metric_keys`)."""
        return parse_metric_keys(self.metrics)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes`` applied to the fields, checked again. Another ``model`` takes its own default
        hyper-parameters unless ``changes`` gives them: this model's would be refused as not its own."""
        if "model" in changes and "hyperparameters" not in changes and model_spec(changes["model"]).name != self.model:
            changes = {**changes, "hyperparameters": {}}
        return dataclasses.replace(self, **changes)

    def to_params(self) -> dict[str, Any]:
        """What a ``train`` run logs as params: the model, the metric keys (comma-separated) and every field of the
        model's config, defaults filled in (nothing for a model without hyper-parameters)."""
        params: dict[str, Any] = {"model": self.model, "metrics": ",".join(self.metrics)}
        if self.register is not None:
            params["register"] = self.register
        config = self.build().config
        if config is not None:
            params.update(dataclasses.asdict(config))
        return params


def foreign_hyperparameters(spec: ModelSpec, given: Mapping[str, Any]) -> str | None:
    """The message refusing the names in ``given`` that ``spec``'s model does not take (None when all are its), e.g.
    ``"epochs: not a hyper-parameter of EASE (it takes: l2); found epochs=5"``."""
    foreign = [k for k in given if k not in spec.hyperparameters]
    if not foreign:
        return None
    takes = ", ".join(spec.hyperparameters) or "none"
    names, found = ", ".join(map(str, foreign)), ", ".join(f"{k}={given[k]}" for k in foreign)
    names, found = (text if len(text) <= 200 else text[:199] + "…" for text in (names, found))
    return f"{names}: not a hyper-parameter of {spec.name} (it takes: {takes}); found {found}"


def _restore(cls: type[TrainConfig], values: dict[str, Any]) -> TrainConfig:
    return cls(**values)
