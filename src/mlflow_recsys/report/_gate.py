"""The gate's decision in words: one line for a terminal or a CI log, and the audit run's markdown."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mlflow_recsys.report._escaping import visible_text
from mlflow_recsys.report._rows import decision_words, format_level, interval_level, row_cells

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._gate_decision import GateDecision
    from mlflow_recsys.stats._results import PairwiseComparison

__all__ = ["gate_line", "gate_markdown", "test_words"]


def test_words(c: PairwiseComparison) -> str:
    """``ndcg@100 non-inferior within 0.005 (difference -0.0012, 90% interval [-0.0031, +0.0007], p = 0.0001)``:
    one test of the gate, names written visibly (one line)."""
    cells = row_cells(c)
    level = format_level(interval_level(c))
    return (
        f"{visible_text(c.metric)} {decision_words(c)} (difference {cells.difference}, {level} interval "
        f"{cells.interval}, p = {cells.p_value})"
    )


def gate_line(decision: GateDecision, *, candidate: str = "candidate", incumbent: str = "incumbent") -> str:
    """One line: the decision, the candidate and incumbent as given, the primary test, each guardrail's outcome and
    the rule's power, e.g. ``PROMOTE runs:/ab12 vs models:/recsys@champion: ndcg@100 non-inferior within 0.005
    (...); guardrails: recall@20 non-inferior within 0.01 (...); power of the rule if the models are equal 0.83``."""
    text = f"{decision.decision} {visible_text(candidate)} vs {visible_text(incumbent)}: {test_words(decision.primary)}"
    if decision.guardrails:
        text += "; guardrails: " + ", ".join(test_words(g) for g in decision.guardrails)
    if not math.isnan(decision.joint_power):
        text += f"; power of the rule if the models are equal {decision.joint_power:.2f}"
    return text


def gate_markdown(
    decision: GateDecision,
    *,
    candidate: str,
    incumbent: str,
    refused: str | None = None,
    warned: tuple[str, ...] = (),
) -> str:
    """The audit run's note: the decision, the rule and every test, as markdown (names in code spans); with
    ``refused`` (why a PROMOTE could not promote) the decision is INVALID, and ``warned`` lists the warnings the
    tests gave."""
    rule = decision.rule
    margins = "relative to the incumbent's mean" if rule.relative else "in metric units"
    heading = f"{decision.decision} (exit code {decision.exit_code})"
    if refused is not None:
        heading = f"INVALID (exit code 3): the tests said {decision.decision}, but {refused}"
    lines = [
        f"# Gate: {visible_text(heading)}",
        "",
        f"Candidate `{visible_text(candidate)}` against incumbent `{visible_text(incumbent)}`.",
        "",
        f"Rule: primary metric `{visible_text(rule.primary)}`, {rule.hypothesis}"
        + (f" with margin {rule.margin!r} ({margins})" if rule.margin is not None else "")
        + "; guardrails "
        + (", ".join(f"`{visible_text(g.metric)}` margin {g.margin!r}" for g in rule.guardrails) or "none")
        + f"; each test at alpha = {1 - rule.confidence_level:.4g} with no adjustment across guardrails "
        "(Schultzberg, Ankargren & Frånberg, 2024). PROMOTE when every test passes, REJECT when one is shown worse "
        "by more than its margin, HOLD otherwise.",
        "",
        "| role | test |",
        "|---|---|",
        *(f"| {'primary' if i == 0 else 'guardrail'} | {test_words(c)} |" for i, c in enumerate(decision.tests)),
    ]
    if not math.isnan(decision.joint_power):
        lines += [
            "",
            f"Power of the rule if the candidate equals the incumbent on every metric: {decision.joint_power:.3f} "
            "(product of each non-inferiority test's power by the normal approximation, the metrics taken as "
            "independent).",
        ]
    if warned:
        lines += ["", "Warnings:", "", *(f"- {visible_text(w)}" for w in warned)]
    return "\n".join(lines) + "\n"
