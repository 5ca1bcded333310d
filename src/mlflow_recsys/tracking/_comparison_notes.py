"""The comparison run's notes and result tags: headline, result sentences and a compact table that fit
MLflow's 8,000-character limits by construction."""

from __future__ import annotations

from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

from mlflow_recsys.report.escaping import escape_markdown, name_writer, visible_text
from mlflow_recsys.report.text import (
    ANALYSIS_TITLES,
    analysis_heading,
    stated_results,
)
from mlflow_recsys.stats import (
    ComparisonReport,
    SeedSpread,
)
from mlflow_recsys.stats.comparison import Markup
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.limits import (
    MAX_TAG_LENGTH,
    shorten,
)
from mlflow_recsys.tracking.naming import pair_label
from mlflow_recsys.tracking.provenance import (
    provenance_lines,
    provenance_markdown,
)
from mlflow_recsys.tracking.server_page import recsys_page_url

#: Widest model name shown in the run notes; the report files show every name whole.
NOTE_NAME_WIDTH = 80
#: Fewest table rows the notes keep before they drop the result sentences to make room.
MIN_NOTE_ROWS = 10


def note_versions(
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    primary: str | None,
    provenance: dict | None = None,
    declared: bool = False,
    averaged: ComparisonReport | None = None,
    analysis: str = "representative-seed",
):
    """The run notes, fullest first: MLflow keeps 8,000 characters, and :func:`fit_text` takes the first that fits.

    After the full notes come compact ones: the result sentences (while they fit), then a table of the key
    columns with names cut to :data:`NOTE_NAME_WIDTH` and as many whole rows as fit, and a pointer to the files.
    """
    title = ["## Paired comparison", ""]
    declaration, sentences, seeds = _result_paragraphs(
        report, spreads, primary, declared, averaged, "markdown", analysis
    )
    what = [provenance_markdown(provenance), ""] if provenance else []
    tables = [report.to_markdown(), ""]
    if averaged is not None:
        tables = []
        for kind, shown in ordered_analyses(report, averaged, analysis):
            tables += [f"### {analysis_heading(kind, analysis)}", "", shown.to_markdown(), ""]
    pointer = _note_pointer(bool(spreads), analysis if averaged is not None else None)
    yield "\n".join(title + declaration + sentences + tables + seeds + what + [pointer])
    primary_report = dict(ordered_analyses(report, averaged, analysis))[analysis]
    compact_label = analysis_heading(analysis, analysis) if averaged is not None else None
    yield from _compact_notes(
        primary_report, title, declaration, sentences, seeds, _compact_provenance(provenance), compact_label, pointer
    )


def ordered_analyses(
    report: ComparisonReport, averaged: ComparisonReport | None, analysis: str
) -> list[tuple[str, ComparisonReport]]:
    """The analyses made, primary first: ``("seed-averaged", averaged)`` and ``("representative-seed", report)``."""
    made = [("representative-seed", report)] + ([("seed-averaged", averaged)] if averaged is not None else [])
    return sorted(made, key=lambda pair: pair[0] != analysis)


def _result_paragraphs(
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    primary: str | None,
    declared: bool,
    averaged: ComparisonReport | None,
    markup: Markup,
    analysis: str = "representative-seed",
) -> tuple[list[str], list[str], list[str]]:
    """The primary metric's declaration, its result sentences and the seed sentences, as lines each followed by
    a blank one: in markdown for the run notes, in plain text for ``summary.txt`` and the terminal."""
    name = name_writer(markup)

    def bold(text: str) -> str:
        return f"**{text}**" if markup == "markdown" else text

    when = "declared in advance" if declared else "chosen at comparison time, not before training"
    declaration = [f"Primary metric ({when}): {bold(name(primary))}.", ""] if primary else []
    sentences = (
        [
            (f"{bold(label + '.')} " if label else "")
            + shown.results_text(primary, c.candidate, c.baseline, markup=markup)
            for label, shown, c in stated_results(report, averaged, analysis, primary)
        ]
        if primary
        else []
    )
    sentences = [line for text in sentences for line in (text, "")]
    seeds = []
    for (base, cand), spread in spreads.items():
        key = primary or spread.to_frame()["metric"].iloc[0]
        label = name(pair_label(base, cand))
        seeds += [f"{bold(f'Seeds ({label})')}: {spread.results_text(key, markup=markup)}", ""]
    return declaration, sentences, seeds


def summary_text(
    report: ComparisonReport,
    spreads: dict[tuple[str, str], SeedSpread],
    primary: str | None,
    provenance: dict,
    declared: bool,
    averaged: ComparisonReport | None,
    analysis: str = "representative-seed",
) -> str:
    """``summary.txt``: what the run notes say, as plain text for a terminal (the study prints it).

    No markup and no escapes: a web address reads as it is and can be copied; names keep control
    characters as visible escapes, so every line is one line.
    """
    declaration, sentences, seeds = (
        [visible_text(line) for line in part]
        for part in _result_paragraphs(report, spreads, primary, declared, averaged, "plain", analysis)
    )
    tables = [str(report), ""]  # already one line per row, names written visibly
    if averaged is not None:
        tables = []
        for kind, shown in ordered_analyses(report, averaged, analysis):
            tables += [analysis_heading(kind, analysis), "", str(shown), ""]
    what = ["What was compared", ""] + [f"- {visible_text(line)}" for line in provenance_lines(provenance)]
    what += [f"- {visible_text(model)}: {visible_text(i['why'])}" for model, i in provenance["models"].items()]
    lines = [
        "Paired comparison",
        "",
        *declaration,
        *sentences,
        *tables,
        *seeds,
        *what,
        "",
        _note_pointer(bool(spreads), analysis if averaged is not None else None),
    ]
    return "\n".join(lines) + "\n"


def _note_pointer(has_seed_table: bool, analysis: str | None = None) -> str:
    """The last line of the run notes: where the full report is, which table file holds which analysis when a
    seed-averaged comparison was made (``analysis``: the primary one's name), and the seed table when one was
    logged."""
    files = "report.html (table, plots, methods), report.md and report.csv"
    if analysis is not None:
        role = {kind: "primary" if kind == analysis else "sensitivity" for kind in ANALYSIS_TITLES}
        files += (
            f" (report.csv: the representative-seed comparison, the {role['representative-seed']} analysis; "
            f"seed_averaged.csv: the seed-averaged comparison, the {role['seed-averaged']} analysis)"
        )
    seeds = "; seed_spread.csv holds the seed table" if has_seed_table else ""
    return f"The full report is in this run's artifacts: {files}{seeds}."


def _compact_provenance(provenance: dict | None) -> list[str]:
    """The data and split in sentences, and which run stands for each model: the notes' short provenance."""
    if not provenance:
        return []
    models = "; ".join(
        f"{escape_markdown(shorten(m, NOTE_NAME_WIDTH))}: {escape_markdown(i['why'])}"
        for m, i in provenance["models"].items()
    )
    if len(models) > MAX_TAG_LENGTH // 5:
        models = "listed in report.md"
    lines = [f"- {escape_markdown(line)}" for line in provenance_lines(provenance)]
    return lines + [f"- Runs in the table: {models}.", ""]


def _compact_notes(
    report: ComparisonReport,
    title: list[str],
    declared: list[str],
    sentences: list[str],
    seeds: list[str],
    what: list[str],
    label: str | None,
    pointer: str,
):
    """The compact notes, fullest first: the sentences while they fit, a table of as many whole rows as fit,
    ``pointer`` to the files; last, a line that says the table does not fit."""

    def cut(name: str) -> str:
        return escape_markdown(shorten(name, NOTE_NAME_WIDTH))

    header = [
        "| metric | candidate | baseline | difference | interval | adjusted p | direction |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [
        f"| {escape_markdown(r.metric)} | {cut(r.candidate)} | {cut(r.baseline)} | {r.difference:+.4f} | "
        f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}] | {r.adjusted_p_value:.4g} | {r.direction} |"
        for r in report.to_frame().itertuples()
    ]
    seeds_elsewhere = ["The seed-spread sentences are in report.html.", ""] if seeds else []
    if label is not None:
        header = [f"{label} (the sensitivity analysis is in report.md):", ""] + header
    for extra in (sentences + seeds, sentences + seeds_elsewhere, seeds_elsewhere):
        head = title + declared + extra + what
        # The longest prefix of rows that fits: the text grows by one line per row.
        fixed = (
            len(
                "\n".join(
                    head + header + ["", f"{len(rows)} more of the {len(rows)} rows are in report.md.", "", pointer]
                )
            )
            + 1
        )
        budget, n = MAX_TAG_LENGTH - fixed, 0
        while n < len(rows) and budget - (len(rows[n]) + 1) >= 0:
            budget -= len(rows[n]) + 1
            n += 1
        if extra != seeds_elsewhere and n < min(len(rows), MIN_NOTE_ROWS):
            continue  # a table matters more than the sentences, which report.md holds too
        more = [f"{len(rows) - n} more of the {len(rows)} rows are in report.md.", ""] if n < len(rows) else []
        yield "\n".join(head + header + rows[:n] + [""] + more + [pointer])
    yield "\n".join(title + [f"{len(rows)} hypotheses; the table does not fit MLflow's run notes.", "", pointer])


def headline_sentence(
    report: ComparisonReport, primary: str | None, averaged: ComparisonReport | None, analysis: str
) -> str:
    """The primary analysis' first result sentence of the primary metric, or of the first compared metric without
    one; named ``Primary analysis: ...`` when a sensitivity analysis exists beside it."""
    shown = dict(ordered_analyses(report, averaged, analysis))[analysis]
    first = next(c for c in shown.comparisons if c.metric == (primary or shown.comparisons[0].metric))
    sentence = shown.results_text(first.metric, first.candidate, first.baseline)
    return sentence if averaged is None else f"{analysis_heading(analysis, analysis)}. {sentence}"


def primary_declared_in_advance(runs: list[Run], primary: str | None) -> bool:
    """Whether ``primary`` was fixed before the compared models were trained.

    True when every compared run is a child of one study run (``mlflow.parentRunId``) that logged this
    primary metric as its ``primary`` param and started before all of them: the ``main`` entry point logs
    the primary metric when the study starts.
    """
    parents = {r.data.tags.get(MLFLOW_PARENT_RUN_ID) for r in runs}
    parent_id = parents.pop() if len(parents) == 1 else None  # None: several parents, or none
    if primary is None or parent_id is None:
        return False
    try:
        study = MlflowClient().get_run(parent_id)
    except Exception:  # a parent that is gone or unreadable declares nothing
        return False
    return study.data.params.get("primary") == primary and study.info.start_time <= min(r.info.start_time for r in runs)


def result_tags(first: dict, primary, headline: str, run_name: str, note: str) -> dict:
    """The tags a comparison run gets with its results (its role and sources it got when it was made): the split,
    targets and dataset of ``first`` (a source run's tags), the primary metric and the result headline, its name and
    notes."""
    return {
        tags.SPLIT_DIGEST: first.get(tags.SPLIT_DIGEST, ""),
        tags.TARGETS_FINGERPRINT: first.get(tags.TARGETS_FINGERPRINT, ""),
        tags.DATASET: first.get(tags.DATASET, ""),
        tags.PRIMARY_METRIC: primary or "",
        tags.RESULT: shorten(headline, MAX_TAG_LENGTH),
        MLFLOW_RUN_NAME: run_name,
        MLFLOW_RUN_NOTE: note,
    }


def page_link_text(experiment_id: str) -> str:
    """The closing line of the notes and ``summary.txt``: where the server's recsys page shows these runs, or ''."""
    page = recsys_page_url(experiment_id)
    return f"\n\nCompare these and other runs on the server's page: {page}" if page else ""
