"""The top level of a study file, declared once (:mod:`mlflow_recsys.settings_schema`): how a study runs and what its
verdict across datasets computes. Apart from the rest of the study's code, which imports MLflow, so that the command
line can make its options from the declaration without loading MLflow."""

from __future__ import annotations

from dataclasses import dataclass

from mlflow_recsys.settings_schema import check_fields, setting
from mlflow_recsys.stats._meta import SCALES, Scale
from mlflow_recsys.stats._ranks import POSTHOCS, Posthoc

#: Where a study's trainings run (:mod:`~mlflow_recsys.tracking._executors`).
EXECUTORS = ("sequential", "ray")


@dataclass(frozen=True)
class StudySettings:
    """The top level of a study file: how the study runs and what its verdict across datasets computes."""

    name: str = setting("study", "the study run's name", "name", longest=200)
    executor: str = setting(
        "sequential", "where trainings run: one after another, or one Ray task each", "choice", choices=EXECUTORS
    )
    ray_address: str | None = setting(
        None, "with executor ray: 'auto' or a cluster address to join (none: a local Ray)", "name", optional=True
    )
    metrics: tuple[str, ...] | None = setting(
        None,
        "metric keys every training scores (none: the compared ones, else the train step's set)",
        "keys",
        optional=True,
    )
    scale: Scale = setting(
        "difference",
        "the effect pooled over datasets: the difference, or the log ratio of means where metric levels differ",
        "choice",
        choices=SCALES,
    )
    posthoc: Posthoc = setting(
        "wilcoxon-holm", "the pairwise test of the ranks over datasets", "choice", choices=POSTHOCS
    )

    def __post_init__(self) -> None:
        check_fields(self)
