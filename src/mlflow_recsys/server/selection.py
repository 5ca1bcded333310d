"""What the page's Compare form asks for, and the checks it must pass before a job starts.

The form offers the settings people change most (reference, primary metric, metrics, correction and B); every
other setting, and every default, is the ``mlflow-recsys compare`` command's. The checks are
:func:`~mlflow_recsys.tracking.comparison.compare_runs`'s own, run in the same order and raising the same
messages, but without reading a single artifact, so a refusal is immediate and leaves nothing behind.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import cast

from mlflow.tracking import MlflowClient

from mlflow_recsys.stats.corrections import Correction
from mlflow_recsys.stats.settings import ComparisonSettings
from mlflow_recsys.tracking.limits import shorten
from mlflow_recsys.tracking.runs import RUN_ID, RunSelectionError

#: ``correction`` choices of the form (the command line's), ``none`` meaning no adjustment.
CORRECTIONS = ("holm", "bonferroni", "none")


@functools.cache
def cli_defaults() -> dict:
    """The ``compare`` command's option defaults, read from the command itself so the two cannot drift."""
    from mlflow_recsys.cli import compare

    return {p.name: p.default for p in compare.params if p.name not in ("run_ids", "run_ids_csv")}


@dataclass(frozen=True)
class Selection:
    """Runs ticked on the page and the settings chosen beside them."""

    run_ids: list[str]
    reference: str | None = None
    primary: str | None = None
    metrics: list[str] | None = None
    correction: str = "holm"
    n_resamples: int = 9999
    experiment_ids: list[str] = field(default_factory=list)  # the listing the form came from

    def settings(self) -> ComparisonSettings:
        """The comparison's settings: those of the form, and for the rest the defaults (the command line's too).

        Raises
        ------
        ValueError
            For a setting out of range, with the command line's message.
        """
        return ComparisonSettings(
            reference=self.reference,
            metrics=None if self.metrics is None else tuple(self.metrics),
            primary=self.primary,
            # the form's text, checked by ComparisonSettings like any caller's
            correction=None if self.correction == "none" else cast(Correction, self.correction),
            n_resamples=self.n_resamples,
        )

    def to_json(self) -> dict:
        return {
            "reference": self.reference,
            "primary": self.primary,
            "metrics": self.metrics,
            "correction": self.correction,
            "n_resamples": self.n_resamples,
        }


#: How the job page writes a setting left unset (None): what the comparison then does.
_UNSET_TEXT = {
    "reference": "none: every pair",
    "metrics": "every metric the runs share",
    "primary": "none declared",
    "correction": "none",
    "random_state": "none (fresh entropy)",
    "seed": "lowest seed of each model",
}


#: How the job page writes a boolean setting.
_BOOLEAN_TEXT = {"True": "yes", "False": "no"}


def shown_settings(settings: dict, *, primary_analysis_used: str | None = None) -> list[tuple[str, str]]:
    """(name, value) of every setting a job's comparison runs under, as the job page lists them: the form's
    choices (``settings``, :meth:`Selection.to_json`) and, for the rest, the actual defaults, in
    :class:`~mlflow_recsys.stats.settings.ComparisonSettings` field order; an unset one in words, a boolean as
    ``yes``/``no``, and ``primary_analysis`` with the analysis it resolved to (``auto: seed-averaged``) once the
    comparison run logged it (its ``primary_analysis_used`` param, given as ``primary_analysis_used``)."""
    params = Selection(run_ids=[], **settings).settings().to_params()
    shown = {
        name: _UNSET_TEXT.get(name, value) if value == "None" else _BOOLEAN_TEXT.get(value, value)
        for name, value in params.items()
    }
    if primary_analysis_used and shown["primary_analysis"] != primary_analysis_used:
        shown["primary_analysis"] += f": {primary_analysis_used}"
    return list(shown.items())


def parse_form(form) -> Selection:
    """A :class:`Selection` from the posted form (a werkzeug ``MultiDict``).

    Raises
    ------
    RunSelectionError
        If no run is ticked, ``correction`` is not a choice, or ``n_resamples`` is not a whole number.
    """
    run_ids = [r.strip() for r in form.getlist("run") if r.strip()]
    if not run_ids:
        raise RunSelectionError("runs: expected at least two ticked runs, found none")
    malformed = [r for r in run_ids if not RUN_ID.fullmatch(r)]
    if malformed:
        raise RunSelectionError(
            f"runs: expected MLflow run ids (letters, digits, _ and -), found {shorten(malformed[0], 40)!r}"
        )
    correction = form.get("correction", cli_defaults()["correction"])
    if correction not in CORRECTIONS:
        raise RunSelectionError(f"correction: expected one of {list(CORRECTIONS)}, found {correction!r}")
    raw = form.get("n_resamples", "").strip() or str(cli_defaults()["n_resamples"])
    try:
        n_resamples = int(raw)
    except ValueError:
        raise RunSelectionError(f"n_resamples: expected a whole number, found {raw!r}") from None
    metrics = [m for m in form.getlist("metrics") if m] or None
    return Selection(
        run_ids=run_ids,
        reference=form.get("reference") or None,
        primary=form.get("primary") or None,
        metrics=metrics,
        correction=correction,
        n_resamples=n_resamples,
        experiment_ids=[e for e in form.getlist("experiment") if e],
    )


def check(client: MlflowClient, selection: Selection) -> None:
    """Every check :func:`~mlflow_recsys.tracking.comparison.compare_runs` makes before it reads an artifact.

    Raises
    ------
    RunSelectionError, ValueError
        With the command line's message: a setting out of range, a run that is missing, not FINISHED or not a
        training run, runs of different splits, a single model, a reference or metric that names nothing.
    """
    from mlflow_recsys.tracking.comparison import check_selection

    check_selection(run_ids=list(selection.run_ids), settings=selection.settings(), client=client)
