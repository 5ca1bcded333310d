"""Turn explicit ratings into binary implicit feedback and prune sparse users/items.

:func:`preprocess_interactions` runs the steps a split starts from (the ``min_rating`` filter, one row per (user, item),
the k-core) and counts the rows each one removed; :func:`binarise` and :func:`kcore_prune` are its parts."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mlflow_recsys import _validation as validation
from mlflow_recsys.data._interactions import check_frame


@dataclass(frozen=True)
class PruneReport:
    """What :func:`kcore_prune` did: passes run and rows/users/items before and after."""

    iterations: int
    n_interactions_before: int
    n_interactions_after: int
    n_users_before: int
    n_users_after: int
    n_items_before: int
    n_items_after: int


@dataclass(frozen=True)
class StepCount:
    """Rows into and out of one preprocessing step of :func:`preprocess_interactions`.

    ``step`` is ``"min_rating"``, ``"duplicates"`` or ``"kcore"``; ``rule`` what it keeps, as printed
    (``"min_rating >= 4"``, ``"one row per (user, item)"``,
    ``"the (5, 1)-core (min_user_interactions, min_item_interactions)"``); ``rows_in`` and ``rows_out`` (int) the rows
    before and after the step."""

    step: str
    rule: str
    rows_in: int
    rows_out: int

    @property
    def removed(self) -> int:
        """Rows the step removed, ``rows_in - rows_out``."""
        return self.rows_in - self.rows_out

    def describe(self) -> str:
        """One line: ``"min_rating >= 4 removed 11,938 of 20,557 rows (58%)"`` (a share under 1% but above 0
        reads ``<1%``)."""
        share = 100.0 * self.removed / self.rows_in if self.rows_in else 0.0
        shown = "<1" if 0 < share < 1 else f"{share:.0f}"
        return f"{self.rule} removed {self.removed:,} of {self.rows_in:,} rows ({shown}%)"


@dataclass(frozen=True)
class Preprocessed:
    """What :func:`preprocess_interactions` gives: the interactions a split starts from, each step's counts and
    the k-core report."""

    frame: pd.DataFrame
    steps: tuple[StepCount, ...]
    prune: PruneReport


def preprocess_interactions(
    frame: pd.DataFrame,
    *,
    min_rating: float | None = 4.0,
    min_user_interactions: int = 5,
    min_item_interactions: int = 1,
) -> Preprocessed:
    """Keep ratings ``>= min_rating``, one row per (user, item), then the k-core; count what each step removed.

    ``frame`` has columns user, item, value and optionally timestamp. The steps are those of :func:`binarise` (its
    threshold, default 4.0, ``None`` keeping every row; then its removal of repeated pairs) and :func:`kcore_prune`
    (thresholds ``min_user_interactions`` and ``min_item_interactions``, defaults 5 and 1), in that order; see them for
    the rules. Returns a :class:`Preprocessed`: ``frame`` as :func:`kcore_prune` returns it, the k-core report
    ``prune`` and ``steps``, one :class:`StepCount` per step in order, so ``steps[i].rows_out == steps[i + 1].rows_in``.

    Raises ValueError as :func:`binarise` and :func:`kcore_prune` do; also when no row reaches ``min_rating`` (the
    message gives the values' range and how to read implicit data) or the k-core is empty."""
    check_frame(frame)
    _check_min_rating(min_rating)
    check_thresholds(min_user_interactions, min_item_interactions)
    rated = _at_least(frame, min_rating)
    if rated.empty:
        raise ValueError(
            f"min_rating: expected some interactions with value >= {min_rating}, found none among {len(frame):,} "
            f"(values range {frame['value'].min():g} to {frame['value'].max():g}); for implicit data use "
            "min_rating=None (--min-rating none on the command line)"
        )
    positives = _one_per_pair(rated)
    pruned, report = kcore_prune(positives, min_user_interactions, min_item_interactions)
    if pruned.empty:
        raise ValueError(
            f"min_user_interactions, min_item_interactions: the ({min_user_interactions}, "
            f"{min_item_interactions})-core of the {len(positives):,} positive interactions is empty; lower the "
            "thresholds"
        )
    kept = "every row kept (min_rating none)" if min_rating is None else f"min_rating >= {float(min_rating):g}"
    core = f"the ({min_user_interactions}, {min_item_interactions})-core (min_user_interactions, min_item_interactions)"
    steps = (
        StepCount("min_rating", kept, len(frame), len(rated)),
        StepCount("duplicates", "one row per (user, item)", len(rated), len(positives)),
        StepCount("kcore", core, len(positives), len(pruned)),
    )
    return Preprocessed(frame=pruned, steps=steps, prune=report)


def binarise(frame: pd.DataFrame, min_rating: float | None = 4.0) -> pd.DataFrame:
    """Keep ratings ``>= min_rating`` as positive feedback with value 1.0.

    ``frame`` has columns user, item, value and optionally timestamp; ``min_rating`` is the lowest rating that counts as
    positive (default 4.0, i.e. 4 and 5 stars on MovieLens), ``None`` keeping every row (data already implicit). Returns
    a frame of the same columns, ``value`` float64 all 1.0, one row per distinct (user, item) pair: a pair rated
    positively several times keeps its earliest timestamp (without timestamps, its first row); rows sorted by (user,
    item), index reset. ValueError for missing columns, or a ``min_rating`` neither a finite number nor None."""
    check_frame(frame)
    _check_min_rating(min_rating)
    return _one_per_pair(_at_least(frame, min_rating))


def _check_min_rating(min_rating) -> None:
    if min_rating is not None:
        validation.number(min_rating, "min_rating")


def _at_least(frame: pd.DataFrame, min_rating: float | None) -> pd.DataFrame:
    """The rows whose value reaches ``min_rating`` (all of them for None)."""
    return frame if min_rating is None else frame[frame["value"] >= float(min_rating)]


def _one_per_pair(kept: pd.DataFrame) -> pd.DataFrame:
    """One row per (user, item), the earliest, value 1.0, sorted by (user, item); see :func:`binarise`."""
    keys = ["user", "item", "timestamp"] if "timestamp" in kept.columns else ["user", "item"]
    kept = kept.sort_values(keys, kind="mergesort")
    kept = kept.drop_duplicates(["user", "item"], keep="first")
    out = {"user": kept["user"].to_numpy(), "item": kept["item"].to_numpy(), "value": 1.0}
    if "timestamp" in kept.columns:
        out["timestamp"] = kept["timestamp"].to_numpy()
    return pd.DataFrame(out)


def kcore_prune(
    frame: pd.DataFrame, min_user_interactions: int = 5, min_item_interactions: int = 1
) -> tuple[pd.DataFrame, PruneReport]:
    """Drop users and items with too few interactions, repeating until none are left.

    Removing a user can push an item under its threshold and vice versa, so one pass is not enough; each pass drops
    every row whose user has fewer than ``min_user_interactions`` rows or whose item has fewer than
    ``min_item_interactions`` rows (counts taken at the start of the pass), and passes repeat until a pass drops
    nothing. The result is the largest sub-frame meeting both thresholds (the (k_u, k_i)-core, cf. Batagelj & Zaversnik
    2003 for cores of a graph).

    ``frame`` has columns user, item, value (timestamp optional) and distinct (user, item) pairs (see :func:`binarise`);
    the thresholds are integers >= 1, defaults 5 and 1. Returns ``(frame, PruneReport)``: the surviving rows in their
    original order (index reset), and a report whose number of passes counts the final pass that removed nothing.
    ValueError for missing columns or a threshold that is not an integer >= 1."""
    check_frame(frame)
    check_thresholds(min_user_interactions, min_item_interactions)
    current = frame.reset_index(drop=True)
    iterations = 0
    while True:
        iterations += 1
        user_counts = current.groupby("user", sort=False)["item"].transform("size")
        item_counts = current.groupby("item", sort=False)["user"].transform("size")
        keep = (user_counts >= min_user_interactions) & (item_counts >= min_item_interactions)
        if bool(keep.all()):
            break
        current = current[keep.to_numpy()].reset_index(drop=True)
    report = PruneReport(
        iterations=iterations,
        n_interactions_before=int(len(frame)),
        n_interactions_after=int(len(current)),
        n_users_before=int(frame["user"].nunique()),
        n_users_after=int(current["user"].nunique()),
        n_items_before=int(frame["item"].nunique()),
        n_items_after=int(current["item"].nunique()),
    )
    return current, report


#: The largest k-core threshold: more interactions than one user or item of any data set has.
MAX_THRESHOLD = 2**31 - 1


def check_thresholds(min_user_interactions: int, min_item_interactions: int) -> None:
    """Raise ValueError unless both k-core thresholds are integers in [1, 2**31 - 1] (bool refused): past that no
    user or item of any data set qualifies, and pandas' int64 counts cannot be compared with 2**64."""
    validation.integer(min_user_interactions, "min_user_interactions", minimum=1, maximum=MAX_THRESHOLD)
    validation.integer(min_item_interactions, "min_item_interactions", minimum=1, maximum=MAX_THRESHOLD)
