"""The launch gate on MLflow: resolve the candidate and the incumbent (a run, a ``runs:/`` URI, a registered model's
version or alias), refuse what cannot be gated before any run is made, record the decision in an audit run, and on
PROMOTE with ``promote`` move the registered model's alias to the candidate's version.

The decision itself is :func:`~mlflow_recsys.stats.gate_decision`; its words :func:`~mlflow_recsys.report.gate_line`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import signal
import tempfile
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from mlflow_recsys._digests import shorten
from mlflow_recsys._validation import expected, line
from mlflow_recsys.errors import GateInvalid
from mlflow_recsys.report._gate import gate_line, gate_markdown
from mlflow_recsys.stats._gate_decision import GateDecision, GateRule, gate_decision
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._artifacts import EVALUATION_FILE, PER_USER_FILE
from mlflow_recsys.tracking._context import check_step_run, entry_point_run
from mlflow_recsys.tracking._limits import MAX_TAG_LENGTH
from mlflow_recsys.tracking._naming import logged_metric_keys, mlflow_metric_name
from mlflow_recsys.tracking._runs import RUN_ID, load_evaluation, missing, version_of_run

__all__ = ["GateOutcome", "PromotionTarget", "Subject", "promote_version", "resolve_subject", "run_gate"]

_log = logging.getLogger(__name__)
_MODELS_URI = re.compile(r"models:/(?P<name>[^/@]+)(?:/(?P<version>[0-9]+)|@(?P<alias>[^/@]+))/?")
_RUNS_URI = re.compile(r"runs:/(?P<run>[^/]+)(?:/.*)?")
#: MLflow's tag of a run's note: the audit run's shows the decision and every test.
_NOTE = "mlflow.note.content"


@dataclass(frozen=True)
class Subject:
    """The candidate or the incumbent: as given, the training run whose per-user artifacts are compared, and the
    registered model, version and alias it was reached by (``None`` for a run given directly)."""

    given: str
    run_id: str
    model: str | None = None
    version: str | None = None
    alias: str | None = None


@dataclass(frozen=True)
class PromotionTarget:
    """Where a PROMOTE moves: ``alias`` of registered model ``model`` from ``incumbent_version`` (``None``: no version
    holds it yet) to ``candidate_version``."""

    model: str
    alias: str
    incumbent_version: str | None
    candidate_version: str


@dataclass(frozen=True)
class GateOutcome:
    """A gate that ran: its decision, the one-line summary printed, the audit run, and the version promoted (``None``
    unless ``promote`` and PROMOTE)."""

    decision: GateDecision
    line: str
    audit_run_id: str
    promoted: PromotionTarget | None

    @property
    def exit_code(self) -> int:
        return self.decision.exit_code


def resolve_subject(client: MlflowClient, uri: str, argument: str) -> Subject:
    """The training run ``uri`` names: a run id, ``runs:/<id>[/...]``, ``models:/<name>/<version>`` or
    ``models:/<name>@<alias>`` (the registered version's source run). GateInvalid naming ``argument`` when it names
    nothing that exists."""
    text = line(uri, argument)
    if match := _MODELS_URI.fullmatch(text):
        name, version, alias = match["name"], match["version"], match["alias"]
        what = f"alias {alias!r}" if alias else f"version {version}"
        try:
            found = client.get_model_version_by_alias(name, alias) if alias else client.get_model_version(name, version)
        except MlflowException as exc:
            if not missing(exc):
                raise
            raise GateInvalid(expected(argument, f"an existing {what} of registered model {name!r}", text)) from None
        if not found.run_id:
            raise GateInvalid(
                f"{argument}: registered model {name!r} version {found.version} has no source run, so no per-user "
                f"artifacts to compare ({text})"
            )
        return Subject(text, found.run_id, name, str(found.version), alias)
    match = _RUNS_URI.fullmatch(text)
    if match and ".." in text.split("/"):
        raise GateInvalid(expected(argument, "runs:/<run id>[/<artifact path>] without '..'", text))
    run_id = match["run"] if match else text
    if not RUN_ID.fullmatch(run_id):
        raise GateInvalid(
            expected(argument, "a run id, runs:/<run id>, models:/<name>/<version> or models:/<name>@<alias>", text)
        )
    try:
        client.get_run(run_id)
    except MlflowException as exc:
        if not missing(exc):
            raise
        raise GateInvalid(expected(argument, "an existing run", text)) from None
    return Subject(text, run_id)


def run_gate(
    candidate: str, incumbent: str, rule: GateRule, *, promote: bool = False, alias: str = "champion"
) -> GateOutcome:
    """Gate ``candidate`` against ``incumbent`` by ``rule`` and record it in an audit run.

    Everything that can be checked without the per-user values is checked first, before any run is made:
    both resolve (:func:`resolve_subject`) to different runs that hold per-user artifacts, scored on the same split
    and targets, holding every metric of the rule; with ``promote``, the store has a model registry and the
    candidate is a version of the registered model whose ``alias`` is to move. Then the audit run (``recsys.role`` =
    ``gate``, in the candidate's experiment) logs the inputs and the rule as params, before the per-user values are
    read; then the decision, every test (``gate/tests.csv``, ``gate/decision.json``), the note and the tags
    ``recsys.gate_decision`` and ``recsys.gate_exit_code``. With ``promote`` and PROMOTE, ``alias`` moves to the
    candidate's version and the version it leaves keeps ``previous-<alias>``, after the alias is read again
    (:func:`promote_version`).

    Parameters
    ----------
    candidate, incumbent:
        As :func:`resolve_subject` reads them.
    rule:
        The :class:`~mlflow_recsys.stats.GateRule`.
    promote:
        Move the alias on PROMOTE (default False: a dry run that changes nothing in the registry).
    alias:
        The alias that marks the model in production, default ``"champion"``.

    Returns
    -------
    GateOutcome

    Raises
    ------
    GateInvalid
        Not comparable or not promotable (exit code 3): before any run for everything above; after the audit run
        started (it ends FAILED, its decision INVALID) when the per-user values disagree on users or targets, or the
        alias moved while the gate ran.
    ValueError
        For a ``rule`` that is not a GateRule, or an ``alias`` that is not one line.
    """
    if not isinstance(rule, GateRule):
        raise ValueError(expected("rule", "a GateRule", type(rule).__name__))
    alias = _checked_alias(alias)
    check_step_run()
    client = MlflowClient()
    cand = resolve_subject(client, candidate, "candidate")
    inc = resolve_subject(client, incumbent, "incumbent")
    target = _promotion_target(client, cand, inc, alias) if promote else None
    experiment_id = _check_comparable(client, rule, cand, inc)
    params = {
        **{"candidate": cand.given, "candidate_run_id": cand.run_id, "incumbent": inc.given},
        **{"incumbent_run_id": inc.run_id, "promote": str(promote).lower(), "alias": alias},
        **rule.to_params(),
    }
    run_name = f"gate {rule.primary}"
    with (
        contextlib.ExitStack() as decided,
        entry_point_run(run_name, experiment_id=experiment_id, params=params, tags={tags.ROLE: tags.ROLE_GATE}),
    ):
        _tag_decision("INVALID", 3)  # until there is a decision: a gate cut short (an error, Ctrl-C) made none
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                decision = gate_decision(
                    rule, load_evaluation(inc.run_id), load_evaluation(cand.run_id), names=("incumbent", "candidate")
                )
            except ValueError as exc:  # the per-user values disagree: not comparable
                raise GateInvalid(f"not comparable: {exc}") from None
        for w in caught:  # shown as they were, and kept in the note
            warnings.warn(w.message, w.category, stacklevel=2)
        warned = tuple(str(w.message) for w in caught)
        record = _Record(decision, gate_line(decision, candidate=cand.given, incumbent=inc.given), (cand, inc))
        record.log(warned=warned)
        # Recorded: from here the decision stands, and an interrupt no longer cuts the promotion or the run's end.
        decided.enter_context(_signals_held())
        promoted = None
        if target is not None and decision.decision == "PROMOTE":
            try:
                _promote_recorded(client, target)
            except GateInvalid as exc:
                record.log(warned=warned, refused=exc)
                raise
            promoted = target
        run_id = mlflow.active_run().info.run_id  # type: ignore[union-attr]  # inside entry_point_run
        summary = record.summary
    return GateOutcome(decision, summary, run_id, promoted)


#: What MLflow accepts as an alias: letters, digits, ``_`` and ``-``, at most 255 characters, and neither
#: ``latest`` nor ``v<digits>``, which name versions; ``previous-<alias>`` must fit too.
_ALIAS = re.compile(r"[A-Za-z0-9_-]{1,246}")
_RESERVED_ALIAS = re.compile(r"latest|v[0-9]+", re.IGNORECASE)


def _checked_alias(alias: object) -> str:
    text = line(alias, "alias")
    if not _ALIAS.fullmatch(text) or _RESERVED_ALIAS.fullmatch(text):
        raise GateInvalid(
            expected(
                "alias",
                "letters, digits, _ and - (at most 246, so that previous-<alias> fits MLflow's 255), not 'latest' or "
                "v<digits>",
                text,
            )
        )
    return text


def _check_comparable(client: MlflowClient, rule: GateRule, cand: Subject, inc: Subject) -> str:
    """GateInvalid unless both runs differ, hold per-user artifacts and the rule's metrics, and were scored on the same
    split and targets (as far as their tags tell); the candidate's experiment id otherwise."""
    if cand.run_id == inc.run_id:
        raise GateInvalid(
            f"candidate: expected a run other than the incumbent's, found run {cand.run_id} for both "
            f"({cand.given} and {inc.given})"
        )
    runs = {"candidate": (cand, client.get_run(cand.run_id)), "incumbent": (inc, client.get_run(inc.run_id))}
    for argument, (subject, run) in runs.items():
        if run.info.lifecycle_stage != "active" or run.info.status != "FINISHED":
            state = "deleted" if run.info.lifecycle_stage != "active" else run.info.status
            raise GateInvalid(
                expected(argument, f"a FINISHED, not deleted, run ({subject.given})", f"run {subject.run_id}, {state}")
            )
        held = {a.path for a in client.list_artifacts(subject.run_id)}
        absent = [f for f in (PER_USER_FILE, EVALUATION_FILE) if f not in held]
        if absent:
            raise GateInvalid(
                f"{argument}: run {subject.run_id} ({subject.given}) holds no per-user artifacts ({', '.join(absent)} "
                "missing); gate runs that mlflow-recsys train or import-run logged"
            )
        evaluated = logged_metric_keys(run.data.metrics)
        for name, metric in [("primary", rule.primary), *(("guardrail", g.metric) for g in rule.guardrails)]:
            if evaluated and metric not in evaluated:
                raise GateInvalid(
                    f"{name}: {metric!r} was not evaluated by the {argument}'s run {subject.run_id}; it has {evaluated}"
                )
    if rule.relative:  # a fraction of a mean of 0 is no margin; the logged aggregate says so before any data are read
        logged = runs["incumbent"][1].data.metrics
        margined = [g.metric for g in rule.guardrails] + ([rule.primary] if rule.margin is not None else [])
        for metric in margined:
            if logged.get(mlflow_metric_name(metric)) == 0:
                raise GateInvalid(
                    f"relative: expected a positive mean of {metric!r} for the incumbent, to take a fraction of, "
                    f"found 0 (run {inc.run_id}); give absolute margins"
                )
    for tag, what in ((tags.SPLIT_DIGEST, "split"), (tags.TARGETS_FINGERPRINT, "targets")):
        values = {argument: run.data.tags.get(tag, "") for argument, (_, run) in runs.items()}
        if "" not in values.values() and len(set(values.values())) > 1:
            raise GateInvalid(
                f"not comparable: the candidate was scored on {what} {values['candidate'][:12]}, the incumbent on "
                f"{values['incumbent'][:12]}; gate models evaluated on the same split"
            )
    return runs["candidate"][1].info.experiment_id


def _promotion_target(client: MlflowClient, cand: Subject, inc: Subject, alias: str) -> PromotionTarget:
    """Where a PROMOTE would move, checked now; GateInvalid when the store has no model registry, no registered model
    is named, or the candidate is no version of it."""
    try:
        client.search_registered_models(max_results=1)
    except MlflowException as exc:
        raise GateInvalid(f"promote: this tracking store has no model registry to promote in ({exc.message})") from None
    names = {s.model for s in (inc, cand) if s.model is not None}
    if not names:
        raise GateInvalid(
            "promote: expected a registered model to promote in, found two runs; give the incumbent as "
            "models:/<name>@<alias> or the candidate as models:/<name>/<version>"
        )
    if len(names) > 1:
        raise GateInvalid(f"promote: expected the candidate and incumbent of one registered model, found {names}")
    model = names.pop()
    version = cand.version if cand.model == model else version_of_run(client, model, cand.run_id)
    if version is None:
        raise GateInvalid(
            f"candidate: run {cand.run_id} is no version of registered model {model!r}; register it first "
            f"(mlflow-recsys train --register {model})"
        )
    holder = _alias_version(client, model, alias)
    if holder is None:
        raise GateInvalid(
            f"alias: expected an alias of {model!r} that marks the model in production, found {alias!r}, which marks "
            f"no version; set it on the first version by hand (MlflowClient().set_registered_model_alias)"
        )
    if holder == version:
        raise GateInvalid(f"candidate: version {version} of {model!r} already holds the alias {alias!r}")
    if client.get_model_version(model, holder).run_id != inc.run_id:
        raise GateInvalid(
            f"incumbent: expected the version {model}@{alias} marks now (version {holder}) when promoting, found "
            f"{inc.given} (run {inc.run_id}); gate against models:/{model}@{alias}"
        )
    return PromotionTarget(model, alias, holder, version)


def _alias_version(client: MlflowClient, model: str, alias: str) -> str | None:
    try:
        return str(client.get_model_version_by_alias(model, alias).version)
    except MlflowException as exc:
        if missing(exc):
            return None
        raise


def promote_version(client: MlflowClient, target: PromotionTarget) -> None:
    """Move ``target.alias`` to the candidate's version, the version it leaves keeping ``previous-<alias>``.

    The alias is read again first: if it no longer marks the version it marked when the gate began (another gate, or a
    person, moved it meanwhile), GateInvalid and nothing changes, so two gates racing against one champion cannot both
    promote. (MLflow has no compare-and-set of an alias: the window left is the two calls below.)
    """
    now = _alias_version(client, target.model, target.alias)
    if now != target.incumbent_version:
        raise GateInvalid(
            f"promote: {target.model}@{target.alias} marked version {target.incumbent_version} when the gate began "
            f"and marks version {now} now; nothing was promoted: gate again against the new {target.alias}"
        )
    if target.incumbent_version is not None:
        client.set_registered_model_alias(target.model, f"previous-{target.alias}", target.incumbent_version)
    client.set_registered_model_alias(target.model, target.alias, target.candidate_version)


def _tag_decision(decision: str, code: int) -> None:
    mlflow.set_tags({tags.GATE_DECISION: decision, tags.GATE_EXIT_CODE: str(code)})


def _promote_recorded(client: MlflowClient, target: PromotionTarget) -> None:
    """:func:`promote_version`, announced on the audit run first (``recsys.gate_promoted`` = ``pending: ...``) and
    confirmed after (the caller holds SIGINT and SIGTERM back meanwhile), so a gate killed outright never leaves the
    registry changed and its record silent."""
    moved = f"{target.model}@{target.alias} -> version {target.candidate_version}"
    run_id = mlflow.active_run().info.run_id  # type: ignore[union-attr]  # inside the audit run
    mlflow.set_tag(tags.GATE_PROMOTED, f"pending: {moved}")
    try:
        promote_version(client, target)
    except GateInvalid:
        client.delete_tag(run_id, tags.GATE_PROMOTED)
        raise
    mlflow.set_tag(tags.GATE_PROMOTED, moved)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM noted, not acted on, until the block ends: a recorded decision then stands, the alias moves
    and the audit run ends FINISHED, and the gate exits with the decision's code. (Python runs its signal handlers in
    the main thread whichever thread a signal reached, so swapping the handlers holds them however many threads MLflow
    runs; a thread's signal mask would not.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.signal(s, lambda signum, frame: arrived.append(signum)) for s in held}
    try:
        yield
    finally:
        for held_signal, handler in before.items():
            signal.signal(held_signal, signal.SIG_DFL if handler is None else handler)
        if arrived:
            _log.warning(
                "%s arrived after the gate decided; it finishes with its decision", signal.Signals(arrived[0]).name
            )


@dataclass
class _Record:
    """What the audit run says of a decision: the line, every test as a table and JSON, the note, headline metrics
    and the decision's tags; logged again, as INVALID beside what the tests decided, when a promotion is refused."""

    decision: GateDecision
    summary: str
    subjects: tuple[Subject, Subject]

    def log(self, *, warned: tuple[str, ...], refused: GateInvalid | None = None) -> None:
        decision, (cand, inc) = self.decision, self.subjects
        final = "INVALID" if refused is not None else decision.decision
        code = 3 if refused is not None else decision.exit_code
        if refused is not None:
            self.summary = f"INVALID (the tests said {decision.decision}, but {refused}): {self.summary}"
        record = {
            "decision": final,
            "exit_code": code,
            "tests_decision": decision.decision,
            "line": self.summary,
            "candidate": {"given": cand.given, "run_id": cand.run_id, "version": cand.version},
            "incumbent": {"given": inc.given, "run_id": inc.run_id, "version": inc.version},
            "joint_power": None if math.isnan(decision.joint_power) else decision.joint_power,
            "warnings": list(warned),
            "tests": json.loads(decision.to_frame().to_json(orient="records")),
        }
        with tempfile.TemporaryDirectory(prefix="mlflow-recsys-gate-") as tmp:
            (Path(tmp) / "decision.json").write_text(json.dumps(record, indent=2, allow_nan=False))
            if refused is None:  # the tests and their figures are logged once; a refusal rewrites only the decision
                decision.to_frame().to_csv(Path(tmp) / "tests.csv", index=False)
                first = decision.primary
                metrics = {"primary_difference": first.difference, "primary_p_value": first.p_value}
                if not math.isnan(decision.joint_power):
                    metrics["joint_power"] = decision.joint_power
                mlflow.log_metrics(metrics)
            mlflow.log_artifacts(tmp, "gate")
        reason = None if refused is None else str(refused)
        note = gate_markdown(decision, candidate=cand.given, incumbent=inc.given, refused=reason, warned=warned)
        mlflow.set_tags({tags.RESULT: shorten(self.summary, MAX_TAG_LENGTH), _NOTE: shorten(note, MAX_TAG_LENGTH)})
        _tag_decision(final, code)
