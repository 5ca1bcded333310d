"""How a split is made: one frozen, checked object for the split and preprocessing settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from mlflow_recsys import validation
from mlflow_recsys.data.preprocess import check_thresholds
from mlflow_recsys.data.split import check_fractions, check_holdout_frac, check_seed

SPLIT_MODES = ("user_split", "leave_one_out", "time_split")
#: The most fold-in/target draws per held-out user: each draw repeats every held-out user's row in the test
#: matrices, and past a few dozen draws the mean over draws has settled (the statistics average them per user).
MAX_EVAL_DRAWS = 100

#: The fractions each split mode takes; a fraction given to a mode that does not take it is refused.
_FRACTIONS = {
    "user_split": ("eval_holdout_frac", "test_frac", "val_frac"),
    "leave_one_out": (),
    "time_split": ("test_frac", "val_frac"),
}
_DEFAULT_FRACTIONS = {"eval_holdout_frac": 0.2, "test_frac": 0.2, "val_frac": 0.1}


@dataclass(frozen=True)
class SplitConfig:
    """The settings of a split and its preprocessing, checked when made and kept in canonical form.

    Made once by ``mlflow-recsys split`` (the ``split`` entry point) and by Python callers of
    :func:`~mlflow_recsys.tracking.run_split`; :func:`~mlflow_recsys.data.build_recsys_checkpoint` builds one
    from its keywords. :meth:`to_params` is what the checkpoint's manifest records under ``parameters`` and the
    split run logs as params.

    Attributes
    ----------
    split_mode : {"user_split", "leave_one_out", "time_split"}, default "user_split"
        ``user_split``: strong generalisation, held-out users' histories split into fold-in and targets
        (Liang et al., 2018, "Variational Autoencoders for Collaborative Filtering"); ``leave_one_out``: each
        user's last interaction is the target; ``time_split``: a global cut by time.
    seed : int >= 0, default 42
        Seeds every random choice of the split.
    eval_draws : int in [1, 100], default 1
        ``user_split`` only: fold-in/target draws per held-out user; other modes take 1.
    eval_holdout_frac : float in (0, 1) or None
        ``user_split`` only: share of a held-out user's items that are targets. ``None`` means 0.2 where the mode
        takes it; after checking, it holds the value used (``None`` where the mode does not take it).
    test_frac, val_frac : float in (0, 1) and [0, 1), or None
        ``user_split``: shares of users; ``time_split``: shares of interactions, by time. ``None`` means 0.2 and
        0.1; their sum must stay below 1. ``None`` for ``leave_one_out``.
    min_rating : float or None, default 4.0
        Lowest value kept as a positive; ``None`` keeps every row (implicit feedback).
    min_user_interactions, min_item_interactions : int in [1, 2**31 - 1], default 5 and 1
        k-core thresholds (users, items).

    Raises
    ------
    ValueError
        Naming the field, what it accepts and what it got; also for a fraction the split mode does not take, or
        ``eval_draws`` other than 1 outside ``user_split``.
    """

    split_mode: str = "user_split"
    seed: int = 42
    eval_draws: int = 1
    eval_holdout_frac: float | None = None
    test_frac: float | None = None
    val_frac: float | None = None
    min_rating: float | None = 4.0
    min_user_interactions: int = 5
    min_item_interactions: int = 1

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("split_mode", validation.one_of(self.split_mode, "split_mode", SPLIT_MODES))
        takes = _FRACTIONS[self.split_mode]
        for name in _DEFAULT_FRACTIONS:
            value = getattr(self, name)
            if value is not None and name not in takes:
                raise ValueError(
                    f"{name}: does not apply to split_mode={self.split_mode!r}; leave it unset, found {value!r}"
                )
        put("eval_draws", validation.integer(self.eval_draws, "eval_draws", minimum=1, maximum=MAX_EVAL_DRAWS))
        if self.split_mode != "user_split" and self.eval_draws != 1:
            raise ValueError(
                f"eval_draws: expected 1 for split_mode={self.split_mode!r}, whose held-out rows are "
                f"fixed by the data, found {self.eval_draws!r}"
            )
        for name in takes:
            if getattr(self, name) is None:
                put(name, _DEFAULT_FRACTIONS[name])
        if "test_frac" in takes:
            remain = "training users" if self.split_mode == "user_split" else "training interactions"
            check_fractions(self.test_frac, self.val_frac, remain)  # type: ignore[arg-type]  # filled in above
        if "eval_holdout_frac" in takes:
            check_holdout_frac(self.eval_holdout_frac)  # type: ignore[arg-type]
        for name in takes:
            put(name, validation.number(getattr(self, name), name))  # checked above; as a plain float
        check_seed(self.seed)
        put("seed", int(self.seed))
        if self.min_rating is not None:
            try:
                put("min_rating", validation.number(self.min_rating, "min_rating"))
            except ValueError:
                raise ValueError(
                    validation.expected("min_rating", "a finite number or None", self.min_rating)
                ) from None
        check_thresholds(self.min_user_interactions, self.min_item_interactions)
        put("min_user_interactions", int(self.min_user_interactions))
        put("min_item_interactions", int(self.min_item_interactions))

    def replace(self, **changes: Any) -> SplitConfig:
        """A copy with ``changes`` applied, checked again. A new ``split_mode`` takes its own default fractions
        unless ``changes`` gives them (``dataclasses.replace`` would carry the old mode's over, and be refused)."""
        if "split_mode" in changes:
            changes = {**dict.fromkeys(_DEFAULT_FRACTIONS), **changes}
        return dataclasses.replace(self, **changes)

    def split_keywords(self) -> dict[str, Any]:
        """The keywords of the split function of :attr:`split_mode` beyond the frame and the seed."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _FRACTIONS[self.split_mode]}
        if self.split_mode == "user_split":
            out["eval_draws"] = self.eval_draws
        return out

    def to_params(self) -> dict[str, Any]:
        """Every field, as JSON values (``None`` for a fraction the mode does not take), in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
