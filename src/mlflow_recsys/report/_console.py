"""What ``mlflow-recsys compare`` prints: the tables of each analysis, the seed table, the procedure in sentences and
the result sentences, as lines of text with names written visibly (one line each)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlflow_recsys.report._analyses import (
    analysis_heading,
    ordered_analyses,
    primary_analysis_text,
    seed_averaged_phrase,
)
from mlflow_recsys.report._escaping import visible_text
from mlflow_recsys.report._notes import result_sentences
from mlflow_recsys.report._text import (
    _test_label,
    display_frame,
    family_phrase,
    interval_level_words,
    later_sections,
    margin_text,
    no_mde_note,
    seed_protocol_text,
)
from mlflow_recsys.report._vocabulary import words

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport, PairwiseComparison


def comparison_printout(outcome, primary: str | None, requested_analysis: str) -> str:
    """The printout of a comparison of runs (``outcome``: a :class:`~mlflow_recsys.tracking._comparison.RunComparison`),
    ending with the comparison run's id."""
    report, averaged, analysis = outcome.report, outcome.seed_averaged, outcome.primary_analysis
    what = {
        "representative-seed": f"one trained run per model: {outcome.representative_seed_rule}",
        "seed-averaged": seed_averaged_phrase(averaged) if averaged else "",
    }
    lines = []
    for kind, r in ordered_analyses(report, averaged, analysis):
        heading = analysis_heading(kind, analysis) if averaged is not None else "Paired comparison"
        lines += [f"\n{heading} ({what[kind]})\n", _table(r)]
    if averaged is not None:
        lines.append("\n" + primary_analysis_text(analysis, requested_analysis))
    if not outcome.seed_frame().empty:
        lines += _seed_table(outcome)
    lines += [""] + [visible_text(line) + "." for line in procedure_lines(outcome.primary_report)]
    if primary:
        lines.append("")
        lines += [visible_text(s) for s in result_sentences(report, primary, averaged, analysis, "plain")]
        lines += [visible_text(spread.results_text(primary)) for spread in outcome.seed_spreads.values()]
    return "\n".join([*lines, f"\ncomparison run {outcome.run_id}"])


def _table(report: ComparisonReport) -> str:
    table = display_frame(report)
    for column in ("metric", "baseline", "candidate"):
        table[column] = table[column].map(visible_text)
    note = no_mde_note(report)
    later = "".join(f"\n\n{part}" for part in later_sections(report, markdown=False))
    return table.to_string(index=False) + (f"\n{note}" if note else "") + later


def _seed_table(outcome) -> list[str]:
    """The seed-spread table, then how each comparison used its seeds and the notes on its rows, in words."""
    from mlflow_recsys.stats._seeds import SEED_COLUMNS

    seeds = outcome.seed_frame()
    # The protocol and the notes are sentences, printed below the table.
    cols = [c for c in SEED_COLUMNS if c not in ("protocol", "notes")]
    seeds = seeds.assign(**{c: seeds[c].map(visible_text) for c in ("metric", "baseline", "candidate")})
    lines = ["\nSpread across training seeds beside spread across users\n"]
    lines.append(seeds[cols].to_string(index=False, float_format=lambda v: f"{v:.6f}"))
    for spread in outcome.seed_spreads.values():
        first = spread.summary["metric"].iloc[0]
        lines.append(visible_text(seed_protocol_text(spread, first)) + ".")
    lines += [
        f"Note on {row.metric}, {row.candidate} vs {row.baseline}: {row.notes}."
        for row in seeds.itertuples()
        if row.notes
    ]
    return lines


def procedure_lines(report: ComparisonReport) -> list[str]:
    """How the p-values were adjusted, and which test and interval each hypothesis used (naming the hypotheses, raw,
    when not every one), in sentences without a final full stop."""
    alpha = report.comparisons[0].alpha
    if report.correction is None:
        lines = [
            f"No adjustment: each of the {len(report.comparisons)} hypotheses is tested on its own; significant "
            f"where p <= {alpha:g}"
        ]
    else:
        lines = [
            f"{words('correction', report.correction)} adjustment {family_phrase(report)}; significant where "
            f"the adjusted p <= {alpha:g}"
        ]

    def which(rows: list[PairwiseComparison]) -> str:
        if len(rows) == len(report.comparisons):
            return "for every hypothesis"
        return "for " + ", ".join(f"{c.metric} ({c.candidate} vs {c.baseline})" for c in rows)

    for method in dict.fromkeys(c.test_method for c in report.comparisons):
        rows = [c for c in report.comparisons if c.test_method == method]
        side = margin_text(report) or words("alternative", rows[0].alternative)
        lines.append(f"Test: {_test_label(rows[0])}, {side}, {which(rows)}")
    for method in dict.fromkeys(c.interval_method for c in report.comparisons):
        rows = [c for c in report.comparisons if c.interval_method == method]
        named = words("interval_method", method, "methods")
        lines.append(f"Interval: {interval_level_words(rows[0])} {named} bootstrap interval, {which(rows)}")
    return lines
