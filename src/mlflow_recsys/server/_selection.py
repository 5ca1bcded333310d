"""What the page's Compare form asks for, and how a job page lists the settings.

The form offers the settings people change most (reference, primary metric, metrics, correction and B); every
other setting, and every default, is as :class:`~mlflow_recsys.stats.ComparisonSettings` declares it
(so the ``mlflow-recsys compare`` command's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlflow_recsys._digests import shorten
from mlflow_recsys.settings_schema import NONE_WORD, settings_of
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.tracking._runs import RUN_ID, RunSelectionError

#: The settings the page's form offers, each as :class:`~mlflow_recsys.stats.ComparisonSettings`
#: declares it; every other setting keeps its declared default.
FORM_SETTINGS = (
    *("reference", "primary", "metrics", "correction", "n_resamples", "hypothesis", "margin", "relative_margin"),
    "slices",
    "global_metrics",
)

_DECLARED = settings_of(ComparisonSettings)


@dataclass(frozen=True)
class Selection:
    """Runs ticked on the page and the settings chosen beside them.

    ``chosen`` holds each of :data:`FORM_SETTINGS` (the declared default where the form left one out) as
    posted, converted to its type but not checked, so a refused form is shown again as it was filled in.
    """

    run_ids: list[str]
    chosen: dict[str, Any] = field(default_factory=dict)
    experiment_ids: list[str] = field(default_factory=list)  # the listing the form came from

    def __post_init__(self) -> None:
        defaults = {name: _DECLARED[name][0] for name in FORM_SETTINGS}
        object.__setattr__(self, "chosen", {**defaults, **self.chosen})

    def settings(self) -> ComparisonSettings:
        """The comparison's settings: the form's, and the declared defaults for the rest; ValueError, with the
        command line's message, for a setting out of range."""
        return ComparisonSettings(**self.chosen)


#: How the job page writes a setting left unset (None): what the comparison then does.
_UNSET_TEXT = {
    "reference": "none: every pair",
    "metrics": "every metric the runs share",
    "primary": "none declared",
    "correction": "none",
    "random_state": "none (fresh entropy)",
    "representative_seed": "lowest seed of each model",
    "margin": "none (superiority)",
    "slices": "none",
    "global_metrics": "none",
}


def shown_settings(chosen: dict, *, primary_analysis_used: str | None = None) -> list[tuple[str, str]]:
    """(name, value) of every setting a job's comparison runs under, as the job page lists them: the form's
    choices (``chosen``, :attr:`Selection.chosen`) and, for the rest, the declared defaults, in
    :class:`~mlflow_recsys.stats.ComparisonSettings` field order; an unset one in words, a boolean as
    ``yes``/``no``, and ``primary_analysis`` with the analysis it resolved to (``auto: seed-averaged``) once the
    comparison run logged it (its ``primary_analysis_used`` param, given as ``primary_analysis_used``)."""
    settings = Selection(run_ids=[], chosen=chosen).settings()
    shown = {}
    for name, (_, declared) in _DECLARED.items():
        value = getattr(settings, name)
        if value is None:
            shown[name] = _UNSET_TEXT[name]
        elif isinstance(value, bool):
            shown[name] = "yes" if value else "no"
        else:
            shown[name] = declared.text(value)
    if primary_analysis_used and shown["primary_analysis"] != primary_analysis_used:
        shown["primary_analysis"] += f": {primary_analysis_used}"
    return list(shown.items())


def form_fields() -> dict[str, dict[str, Any]]:
    """What the form shows of each of :data:`FORM_SETTINGS`: its ``help``, ``choices`` (``none`` last when it
    may be unset) and range (``low``, ``high``), from the settings' declarations."""
    out = {}
    for name in FORM_SETTINGS:
        declared = _DECLARED[name][1]
        choices = [*declared.choices, *([NONE_WORD] if declared.optional else [])] if declared.choices else []
        out[name] = {"help": declared.help, "choices": choices, "low": declared.low, "high": declared.high}
    return out


def parse_form(form) -> Selection:
    """A :class:`Selection` from the posted form (a werkzeug ``MultiDict``), each setting converted to its declared
    type (:meth:`~mlflow_recsys.settings_schema.Setting.convert`): an empty name is unset, any other empty field
    the declared default. RunSelectionError if no run is ticked, or a ticked run is not a run id."""
    run_ids = [r.strip() for r in form.getlist("run") if r.strip()]
    if not run_ids:
        raise RunSelectionError("runs: expected at least two ticked runs, found none")
    malformed = [r for r in run_ids if not RUN_ID.fullmatch(r)]
    if malformed:
        raise RunSelectionError(
            f"runs: expected MLflow run ids (letters, digits, _ and -), found {shorten(malformed[0], 40)!r}"
        )
    chosen: dict[str, Any] = {
        "metrics": [m for m in form.getlist("metrics") if m] or None,
        "relative_margin": form.get("relative_margin", "") == "true",  # a checkbox posts nothing when clear
        "slices": _DECLARED["slices"][1].convert(form.get("slices", "")) or None,
        "global_metrics": _DECLARED["global_metrics"][1].convert(form.get("global_metrics", "")) or None,
    }
    for name in ("reference", "primary", "correction", "n_resamples", "hypothesis", "margin"):
        text = form.get(name, "")
        if text.strip() or _DECLARED[name][1].kind == "name":
            chosen[name] = _DECLARED[name][1].convert(text)
    return Selection(run_ids=run_ids, chosen=chosen, experiment_ids=[e for e in form.getlist("experiment") if e])
