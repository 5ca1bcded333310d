"""The slices a comparison of runs declares (``settings.slices``), built from the split its runs were scored on.

The runs name their split by the ``checkpoint`` param (a path or an artifact URI) and the ``recsys.split_digest`` tag;
the strata need what only the split holds: each test user's fold-in items, their targets and the items' training
popularity.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

from mlflow.entities import Run

from mlflow_recsys.data import load_recsys_split
from mlflow_recsys.errors import RunSelectionError
from mlflow_recsys.metrics import ItemPopularity
from mlflow_recsys.stats import Slice, split_slices
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._redact import redact
from mlflow_recsys.tracking._training import resolve_checkpoint

__all__ = ["checkpoint_of", "runs_slices"]


def checkpoint_of(runs: Sequence[Run]) -> str:
    """The checkpoint the runs were scored on (the first run's ``checkpoint`` param: they share one split, which the
    comparison verifies); RunSelectionError naming a run that logged none."""
    without = [r.info.run_id for r in runs if not r.data.params.get("checkpoint")]
    if without:
        raise RunSelectionError(
            f"slices: expected runs that name their split's checkpoint (param 'checkpoint'), found none on "
            f"{len(without)} run(s), e.g. {without[0]}; drop --slices to compare them without slices"
        )
    return runs[0].data.params["checkpoint"]


def runs_slices(runs: Sequence[Run], specs: Sequence[str]) -> list[Slice]:
    """The slices ``specs`` name (``["history:4", "cold:5"]``), built from the test users of the runs' split.

    Raises
    ------
    RunSelectionError
        If a run names no checkpoint, the checkpoint is not the split the runs' ``recsys.split_digest`` names, or the
        split's users cannot be sliced so (every user in one stratum, a stratum too small).
    FileNotFoundError, ValueError
        If the checkpoint cannot be found or read (:func:`~mlflow_recsys.data.load_recsys_split`).
    """
    checkpoint = checkpoint_of(runs)
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-slices-") as tmp:
        split = load_recsys_split(resolve_checkpoint(checkpoint, tmp))
    digest = runs[0].data.tags.get(tags.SPLIT_DIGEST)
    if split.split_digest != digest:
        raise RunSelectionError(
            redact(
                f"slices: expected the checkpoint {checkpoint!r} to hold the split the runs were scored on "
                f"({digest}), found split {split.split_digest}"
            )
        )
    try:
        return split_slices(
            specs,
            source=split.test_source_matrix,
            targets=split.test_target_matrix,
            sample_ids=split.test_eval_user_ids,
            item_popularity=ItemPopularity.from_interactions(split.x_train).counts,
        )
    except ValueError as exc:
        raise RunSelectionError(f"slices: the split's test users cannot be sliced as {list(specs)}: {exc}") from None
