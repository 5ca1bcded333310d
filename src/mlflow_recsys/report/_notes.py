"""A comparison run's notes (markdown, within MLflow's 8,000 characters by construction) and ``summary.txt``.

The notes are one shape whatever the comparison: the primary metric, its result sentences and the seed sentences within
:data:`NOTE_PARAGRAPHS` characters, the data and split in short lines, at most :data:`NOTE_ROWS` rows of the primary
analysis' table and a pointer to the report files. Every name in them is cut to :data:`NOTE_NAME_WIDTH` characters as
written (escapes included), so each part has a fixed largest size and their sum, :data:`NOTE_BOUND`, is below the limit;
nothing is tried and measured afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlflow_recsys._digests import shorten
from mlflow_recsys.report._analyses import ANALYSIS_TITLES, analysis_heading, ordered_analyses, stated_results
from mlflow_recsys.report._escaping import Writer, escape_markdown, name_writer, visible_text
from mlflow_recsys.report._provenance import provenance_lines
from mlflow_recsys.report._rows import row_cells
from mlflow_recsys.report._text import results_text, seed_spread_text

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport
    from mlflow_recsys.stats._seeds import SeedSpread

#: Widest name (model, metric key, seed pair) in the run notes as written, escapes included; files show it whole.
NOTE_NAME_WIDTH = 40
#: Most rows of the table in the notes; report.md holds every row.
NOTE_ROWS = 8
#: Characters the result and seed sentences may take together; those that do not fit are in report.html.
NOTE_PARAGRAPHS = 4000
#: Widest line of the data and split, and of the runs in the table, in the notes.
NOTE_LINE_WIDTH = 240
#: Longest closing line (the server page's address) the notes keep; a longer one is left out.
NOTE_LINK_WIDTH = 300
#: What the notes can hold at most, from the parts' largest sizes (checked against MLflow's 8,000 by a test that writes
#: the longest notes there can be).
NOTE_BOUND = 7900


def _fit(text: str, width: int) -> str:
    """``text`` in markdown in at most ``width`` (at least 21) characters: when its escaped form is longer, cut to the
    longest prefix whose escaped form, with an ellipsis and a hash (so cut texts stay apart), fits. A character's escape
    is at most 10 characters (``\\U0010ffff``), so one character always does."""
    written = escape_markdown(text)
    if len(written) <= width:
        return written
    fits, over = 10, width + 1  # cuts (see shorten) known to fit and not to; escapes only grow with the prefix
    while over - fits > 1:
        middle = (fits + over) // 2
        fits, over = (middle, over) if len(escape_markdown(shorten(text, middle))) <= width else (fits, middle)
    return escape_markdown(shorten(text, fits))


def note_name(name: str) -> str:
    """``name`` as the run notes write it: in markdown, at most :data:`NOTE_NAME_WIDTH` characters."""
    return _fit(name, NOTE_NAME_WIDTH)


def _bold(text: str, markup: Writer) -> str:
    return text if markup == "plain" else f"**{text}**"


def result_sentences(
    report: ComparisonReport, primary: str | None, averaged: ComparisonReport | None, analysis: str, markup: Writer
) -> list[str]:
    """The result sentences of ``primary``, names written by ``markup`` (``"plain"``, ``"markdown"`` or a function such
    as :func:`note_name`), labels in bold unless plain."""
    return [
        (f"{_bold(label + '.', markup)} " if label else "") + results_text(shown, c, markup=markup)
        for label, shown, c in (stated_results(report, averaged, analysis, primary) if primary else [])
    ]


def _seed_sentences(spreads: dict[str, SeedSpread], primary: str | None, markup: Writer) -> list[str]:
    """A sentence per seed table, on ``primary`` (else its first metric), written as :func:`result_sentences`."""
    name = name_writer(markup)
    return [
        f"{_bold(f'Seeds ({name(label)})', markup)}: "
        + seed_spread_text(spread, primary or spread.summary["metric"].iloc[0], markup=markup)
        for label, spread in spreads.items()
    ]


def _declaration(written: str | None, declared: bool) -> list[str]:
    """The primary metric's line and a blank one, ``written`` as the caller writes it (bold in markdown or HTML)."""
    when = "declared in advance" if declared else "chosen at comparison time, not before training"
    return [f"Primary metric ({when}): {written}.", ""] if written else []


def note_pointer(has_seed_table: bool, analysis: str | None = None) -> str:
    """The last line of the run notes: where the full report is, which table file holds which analysis when a
    seed-averaged comparison was made (``analysis``: the primary one's name), and the seed table when one was logged."""
    files = "report.html (table, plots, methods), report.md and report.csv"
    if analysis is not None:
        role = {kind: "primary" if kind == analysis else "sensitivity" for kind in ANALYSIS_TITLES}
        files += (
            f" (report.csv: the representative-seed comparison, the {role['representative-seed']} analysis; "
            f"seed_averaged.csv: the seed-averaged comparison, the {role['seed-averaged']} analysis)"
        )
    seeds = "; seed_spread.csv holds the seed table" if has_seed_table else ""
    return f"The full report is in this run's artifacts: {files}{seeds}."


def run_note(
    report: ComparisonReport,
    spreads: dict[str, SeedSpread],
    primary: str | None,
    provenance: dict | None = None,
    *,
    declared: bool = False,
    averaged: ComparisonReport | None = None,
    analysis: str = "representative-seed",
    link: str = "",
) -> str:
    """The comparison run's notes, at most :data:`NOTE_BOUND` characters whatever the names and sizes.

    ``spreads`` are the seed tables by pair label, ``provenance`` what
    :func:`~mlflow_recsys.tracking._provenance.collect_provenance` gathered, ``link`` a closing line (the server page's
    address; left out when longer than :data:`NOTE_LINK_WIDTH`).
    """
    sentences = result_sentences(report, primary, averaged, analysis, note_name)
    seeds = _seed_sentences(spreads, primary, note_name)
    kept, used = [], 0
    for paragraph in sentences + seeds:
        if used + len(paragraph) + 2 > NOTE_PARAGRAPHS:
            kept += ["The other result and seed sentences are in report.html.", ""]
            break
        kept += [paragraph, ""]
        used += len(paragraph) + 2
    shown = dict(ordered_analyses(report, averaged, analysis))[analysis]
    header = [
        "| metric | candidate | baseline | difference | interval | adjusted p | direction |",
        "|---|---|---|---|---|---|---|",
    ]
    if averaged is not None:
        header = [f"{analysis_heading(analysis, analysis)} (the sensitivity analysis is in report.md):", ""] + header
    rows = []
    for c in shown.comparisons[:NOTE_ROWS]:
        r = row_cells(c)
        names = " | ".join(note_name(n) for n in (r.metric, r.candidate, r.baseline))
        rows.append(f"| {names} | {r.difference} | {r.interval} | {r.adjusted_p} | {r.direction} |")
    n = len(shown.comparisons)
    more = [f"{n - len(rows)} more of the {n} rows are in report.md.", ""] if len(rows) < n else []
    return "\n".join(
        ["## Paired comparison", "", *_declaration(primary and f"**{note_name(primary)}**", declared)]
        + kept
        + _note_provenance(provenance)
        + [*header, *rows, "", *more, note_pointer(bool(spreads), analysis if averaged is not None else None)]
    ) + (link if len(link) <= NOTE_LINK_WIDTH else "")


def _note_provenance(provenance: dict | None) -> list[str]:
    """The data and split in lines, and which run stands for each model: the notes' short provenance."""
    if not provenance:
        return []
    models = "; ".join(f"{m}: {i['why']}" for m, i in provenance["models"].items())
    lines = [f"- {_fit(line, NOTE_LINE_WIDTH)}" for line in provenance_lines(provenance)]
    return lines + [f"- Runs in the table: {_fit(models, NOTE_LINE_WIDTH)}.", ""]


def summary_text(
    report: ComparisonReport,
    spreads: dict[str, SeedSpread],
    primary: str | None,
    provenance: dict,
    *,
    declared: bool = False,
    averaged: ComparisonReport | None = None,
    analysis: str = "representative-seed",
) -> str:
    """``summary.txt``: what the run notes say, whole, as plain text for a terminal (the study prints it).

    No markup and no escapes: a web address reads as it is and can be copied; names keep control characters as visible
    escapes, so every line is one line.
    """
    sentences = result_sentences(report, primary, averaged, analysis, "plain")
    seeds = _seed_sentences(spreads, primary, "plain")
    tables = []
    for kind, shown in ordered_analyses(report, averaged, analysis):
        tables += ([analysis_heading(kind, analysis), ""] if averaged is not None else []) + [str(shown), ""]
    what = ["What was compared", ""] + [f"- {line}" for line in provenance_lines(provenance)]
    what += [f"- {model}: {i['why']}" for model, i in provenance["models"].items()]
    lines = [
        "Paired comparison",
        "",
        *_declaration(primary, declared),
        *(line for paragraph in sentences + seeds for line in (paragraph, "")),
    ]
    lines = [visible_text(line) for line in lines] + tables + [visible_text(line) for line in what]
    return "\n".join([*lines, "", note_pointer(bool(spreads), analysis if averaged is not None else None)]) + "\n"


def headline_sentence(
    report: ComparisonReport, primary: str | None, averaged: ComparisonReport | None, analysis: str
) -> str:
    """The primary analysis' first result sentence of the primary metric, or of the first compared metric without one;
    named ``Primary analysis: ...`` when a sensitivity analysis exists beside it."""
    shown = dict(ordered_analyses(report, averaged, analysis))[analysis]
    first = next(c for c in shown.comparisons if c.metric == (primary or shown.comparisons[0].metric))
    sentence = results_text(shown, first)
    return sentence if averaged is None else f"{analysis_heading(analysis, analysis)}. {sentence}"
