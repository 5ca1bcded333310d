"""The slices a comparison of runs declares (``settings.slices``), built from the split its runs were scored on.

The runs name their split by the ``checkpoint`` param (a path or an artifact URI) and the ``recsys.split_digest`` tag;
the strata need what only the split holds: each test user's fold-in items, their targets and the items' training
popularity.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

from mlflow.entities import Run

from mlflow_recsys.data import LoadedSplit, load_recsys_split
from mlflow_recsys.errors import RunSelectionError
from mlflow_recsys.metrics import ItemPopularity
from mlflow_recsys.stats import Slice, split_slices
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._redact import redact
from mlflow_recsys.tracking._training import resolve_checkpoint

__all__ = ["checkpoints_of", "runs_slices"]


def checkpoints_of(runs: Sequence[Run]) -> dict[str, list[str]]:
    """Each checkpoint the runs name (their ``checkpoint`` param) -> the ids of the runs naming it, in run order;
    RunSelectionError naming a run that logged none."""
    without = [r.info.run_id for r in runs if not r.data.params.get("checkpoint")]
    if without:
        raise RunSelectionError(
            f"slices: expected runs that name their split's checkpoint (param 'checkpoint'), found none on "
            f"{len(without)} run(s), e.g. {without[0]}; drop --slices to compare them without slices"
        )
    named: dict[str, list[str]] = {}
    for run in runs:
        named.setdefault(run.data.params["checkpoint"], []).append(run.info.run_id)
    return named


def _checked_split(checkpoint: str, run_ids: list[str], digest: str | None) -> LoadedSplit:
    """The split at ``checkpoint``, refused unless it is the one the runs' tag names; the message names the runs."""
    where = f"run {run_ids[0]}" + (f" and {len(run_ids) - 1} more" if len(run_ids) > 1 else "")
    try:
        with tempfile.TemporaryDirectory(prefix="mlflow-recsys-slices-") as tmp:
            split = load_recsys_split(resolve_checkpoint(checkpoint, tmp))
    except (FileNotFoundError, ValueError) as exc:
        raise RunSelectionError(
            redact(f"slices: {where} names checkpoint {checkpoint!r}, which fails: {exc}")
        ) from None
    if split.split_digest != digest:
        raise RunSelectionError(
            redact(
                f"slices: expected the checkpoint {checkpoint!r} of {where} to hold the split the runs were scored on "
                f"({digest}), found split {split.split_digest}"
            )
        )
    return split


def runs_slices(runs: Sequence[Run], specs: Sequence[str]) -> list[Slice]:
    """The slices ``specs`` name (``["history:4", "cold:5"]``), built from the test users of the runs' split. Every
    checkpoint the runs name is read and checked, so no run's record is taken on another's word.

    Raises
    ------
    RunSelectionError
        If a run names no checkpoint, a checkpoint cannot be read or is not the split the runs'
        ``recsys.split_digest`` names (naming the runs), or the split's users cannot be sliced so (every user in one
        stratum, a stratum of fewer than two users).
    """
    digest = runs[0].data.tags.get(tags.SPLIT_DIGEST)
    splits = [_checked_split(checkpoint, ids, digest) for checkpoint, ids in checkpoints_of(runs).items()]
    split = splits[0]
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
