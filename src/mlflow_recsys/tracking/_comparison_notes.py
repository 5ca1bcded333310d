"""The comparison run's result tags (its notes are written by :func:`mlflow_recsys.report.notes.run_note`), and
whether its primary metric was declared before training."""

from __future__ import annotations

from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

from mlflow_recsys._digests import shorten
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.limits import (
    MAX_TAG_LENGTH,
)
from mlflow_recsys.tracking.server_page import recsys_page_url


def primary_declared_in_advance(runs: list[Run], primary: str | None) -> bool:
    """Whether ``primary`` was fixed before the compared models were trained.

    True when every compared run is a child of one study run (``mlflow.parentRunId``) that logged this
    primary metric as its ``primary`` param and started before all of them: the ``main`` entry point logs
    the primary metric when the study starts.
    """
    parents = {r.data.tags.get(MLFLOW_PARENT_RUN_ID) for r in runs}
    parent_id = parents.pop() if len(parents) == 1 else None  # None: several parents, or none
    if primary is None or parent_id is None:
        return False
    try:
        study = MlflowClient().get_run(parent_id)
    except Exception:  # a parent that is gone or unreadable declares nothing
        return False
    return study.data.params.get("primary") == primary and study.info.start_time <= min(r.info.start_time for r in runs)


def result_tags(first: dict, primary, headline: str, run_name: str, note: str) -> dict:
    """The tags a comparison run gets with its results (its role and sources it got when it was made): the split,
    targets and dataset of ``first`` (a source run's tags), the primary metric and the result headline, its name and
    notes."""
    return {
        tags.SPLIT_DIGEST: first.get(tags.SPLIT_DIGEST, ""),
        tags.TARGETS_FINGERPRINT: first.get(tags.TARGETS_FINGERPRINT, ""),
        tags.DATASET: first.get(tags.DATASET, ""),
        tags.PRIMARY_METRIC: primary or "",
        tags.RESULT: shorten(headline, MAX_TAG_LENGTH),
        MLFLOW_RUN_NAME: run_name,
        MLFLOW_RUN_NOTE: note,
    }


def page_link_text(experiment_id: str) -> str:
    """The closing line of the notes and ``summary.txt``: where the server's recsys page shows these runs, or ''."""
    page = recsys_page_url(experiment_id)
    return f"\n\nCompare these and other runs on the server's page: {page}" if page else ""
