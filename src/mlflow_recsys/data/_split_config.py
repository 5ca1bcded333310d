"""How a split is made: one frozen, checked object for the split and preprocessing settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from mlflow_recsys.data._preprocess import MAX_THRESHOLD
from mlflow_recsys.data._split import check_fractions
from mlflow_recsys.settings_schema import check_fields, setting

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


def _share(help: str, **details: Any) -> Any:
    """A share in (0, 1), declared unset: its split mode's default applies, or none where the mode takes none."""
    return setting(None, help, "number", low=0, high=1, optional=True, **details)


@dataclass(frozen=True)
class SplitConfig:
    """The settings of a split and its preprocessing, checked when made and kept in canonical form.

    Made once by ``mlflow-recsys split`` (the ``split`` entry point) and by Python callers of
    :func:`~mlflow_recsys.tracking.run_split`; :func:`~mlflow_recsys.data.build_recsys_checkpoint` builds one from its
    keywords. :meth:`to_params` is what the checkpoint's manifest records under ``parameters`` and the split run logs as
    params. Each field is declared below with its type, default, range and meaning
    (:mod:`~mlflow_recsys.settings_schema`), and the ``split`` command's options are made from those declarations.

    ``user_split`` is strong generalisation: held-out users' histories are split into fold-in and targets (Liang et al.,
    2018, "Variational Autoencoders for Collaborative Filtering"). A fraction left ``None`` takes its default (0.2, 0.2,
    0.1) where the split mode takes it and stays ``None`` where it does not; ``test_frac + val_frac`` must stay below 1.

    Raises ValueError naming the field, what it accepts and what it got; also for a fraction the split mode does not
    take, or ``eval_draws`` other than 1 outside ``user_split``."""

    split_mode: str = setting(
        "user_split",
        "user_split: held-out users' histories split into fold-in and targets; leave_one_out: each user's last "
        "interaction is the target; time_split: a global cut by time",
        "choice",
        choices=SPLIT_MODES,
    )
    seed: int = setting(42, "seed of every random choice of the split", "seed")
    eval_draws: int = setting(
        1, "user_split: fold-in/target draws per held-out user", "integer", low=1, high=MAX_EVAL_DRAWS
    )
    eval_holdout_frac: float | None = _share("user_split: share of a held-out user's items scored [default: 0.2]")
    test_frac: float | None = _share(
        "user_split: share of users; time_split: share of interactions, by time [default: 0.2]"
    )
    val_frac: float | None = _share("as test_frac, for validation [default: 0.1]", includes_low=True)
    min_rating: float | None = setting(
        4.0, "lowest value kept as a positive; none keeps every row", "number", optional=True
    )
    min_user_interactions: int = setting(5, "k-core threshold for users", "integer", low=1, high=MAX_THRESHOLD)
    min_item_interactions: int = setting(1, "k-core threshold for items", "integer", low=1, high=MAX_THRESHOLD)

    def __post_init__(self) -> None:
        check_fields(self)
        takes = _FRACTIONS[self.split_mode]
        for name, default in _DEFAULT_FRACTIONS.items():
            value = getattr(self, name)
            if value is not None and name not in takes:
                raise ValueError(
                    f"{name}: does not apply to split_mode={self.split_mode!r}; leave it unset, found {value!r}"
                )
            if value is None and name in takes:
                object.__setattr__(self, name, default)
        if self.split_mode != "user_split" and self.eval_draws != 1:
            raise ValueError(
                f"eval_draws: expected 1 for split_mode={self.split_mode!r}, whose held-out rows are "
                f"fixed by the data, found {self.eval_draws!r}"
            )
        if "test_frac" in takes:
            remain = "training users" if self.split_mode == "user_split" else "training interactions"
            check_fractions(self.test_frac, self.val_frac, remain)  # type: ignore[arg-type]  # filled in above

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
