"""The comparison report as one self-contained HTML page (the ``report.html`` artifact): a narrow key table, sized to
fit the MLflow UI's artifact viewer at a 1280-pixel window, then a scrollable details table; with slices, a table per
slice under the exploratory caveat."""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

from mlflow_recsys.report._analyses import (
    analysis_heading,
    ordered_analyses,
    primary_analysis_text,
    seed_averaging_text,
    stated_results,
)
from mlflow_recsys.report._citations import references_bibtex
from mlflow_recsys.report._global_metrics import GLOBAL_NOTE, global_cells, global_header
from mlflow_recsys.report._notes import _declaration
from mlflow_recsys.report._rows import row_cells
from mlflow_recsys.report._slices import CAVEAT, slice_cells, slice_header
from mlflow_recsys.report._text import methods_text, no_mde_note, results_text, seed_protocol_text, settings_text

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport
    from mlflow_recsys.stats._exposure import ExposureAnalysis
    from mlflow_recsys.stats._slices import SliceAnalysis

__all__ = [
    "DETAIL_COLUMNS",
    "KEY_COLUMNS",
    "details_table",
    "global_section",
    "key_table",
    "legend",
    "report_html",
    "slices_section",
]

#: Headers of the key table, in order.
KEY_COLUMNS = ("metric", "comparison", "difference", "interval", "adjusted p", "direction", "mde", "W/T/L")
#: Headers of the details table, in order: the rows' names, then the display columns the key table leaves out.
DETAIL_COLUMNS = (
    *("metric", "comparison", "baseline_mean", "candidate_mean", "n_units", "n_nonzero", "tie_rate"),
    *("p_value", "relative"),
)

# The key table fits a narrow viewer: names break at spaces and after _ (and before @), headers and intervals may
# take two lines; nothing else wraps.
_STYLE = (
    "body{font-family:sans-serif;font-size:14px;max-width:1100px;margin:1em auto;padding:0 8px;line-height:1.45;"
    "overflow-wrap:break-word}h1{font-size:1.5em}h2{font-size:1.25em}h3{font-size:1.05em}"
    "table{border-collapse:collapse;font-size:0.8em;font-variant-numeric:tabular-nums}"
    "td,th{border:1px solid #ccc;padding:2px 3px;text-align:right;white-space:nowrap}th{background:#f3f3f3}"
    ".key th:nth-child(-n+2),.details th:nth-child(-n+2),td.name{text-align:left}"
    ".key th,.key td.name{white-space:normal}.key td.interval{white-space:normal}"
    "td.better{color:#176b2c;font-weight:bold}td.worse{color:#a3171d;font-weight:bold}"
    ".legend{font-size:0.85em;color:#444}.key-wrap,.wide{overflow-x:auto}img{max-width:100%}"
    "pre{background:#f7f7f7;padding:1em;overflow-x:auto;font-size:0.8em}"
)
# Added only to a page with slices, so a page without them stays byte for byte as it was.
_SLICES_STYLE = ".slices th:nth-child(-n+3){text-align:left}.caveat{border-left:4px solid #c27c0e;padding-left:8px}"


def _name(text: str) -> str:
    """``text`` escaped, with a line-break opportunity after each ``_`` and before each ``@``."""
    return html.escape(text).replace("_", "_<wbr>").replace("@", "<wbr>@")


def _comparison(c, seeds: bool = False) -> str:
    """``candidate vs baseline`` of comparison ``c``, escaped; with each side's seed count when ``seeds``."""
    sides = ((c.candidate, c.candidate_seeds), (c.baseline, c.baseline_seeds))
    return " vs ".join(_name(n) + (f" ({k}&nbsp;seed{'' if k == 1 else 's'})" if seeds else "") for n, k in sides)


def _row(cells: list[tuple[str, str]]) -> str:
    """One ``<tr>`` of cells, each with its class ("" for none); names come escaped, numbers are escaped here."""
    return (
        "<tr>"
        + "".join(
            f'<td class="{cls}">{text if cls == "name" else html.escape(text)}</td>'
            if cls
            else f"<td>{html.escape(text)}</td>"
            for cls, text in cells
        )
        + "</tr>"
    )


def _table(headers: tuple[str, ...], rows: list[str], css_class: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    return f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def key_table(report: ComparisonReport, *, seeds: bool = False) -> str:
    """The key columns (:data:`KEY_COLUMNS`), one row per hypothesis, numbers with six decimals; with ``seeds``, the
    comparison names each side's number of training seeds."""
    rows = []
    for c in report.comparisons:
        r = row_cells(c, digits=6, signed=False)
        names = _comparison(c, seeds)
        numbers = [("", r.difference), ("interval", r.interval), ("", r.adjusted_p)]
        rows.append(
            _row(
                [("name", _name(r.metric)), ("name", names), *numbers]
                + [(r.direction if r.direction in ("better", "worse") else "", r.direction), ("", r.mde), ("", r.wtl)]
            )
        )
    return _table(KEY_COLUMNS, rows, "key")


def details_table(report: ComparisonReport) -> str:
    """The display columns the key table leaves out (:data:`DETAIL_COLUMNS`), one row per hypothesis."""
    rows = []
    for c in report.comparisons:
        r = row_cells(c, digits=6, signed=False)
        cells = [r.baseline_mean, r.candidate_mean, str(c.n_units), str(c.n_nonzero), r.tie_rate, r.p_value]
        rows.append(
            _row([("name", _name(r.metric)), ("name", _comparison(c))] + [("", v) for v in cells + [r.relative]])
        )
    return _table(DETAIL_COLUMNS, rows, "details")


def legend(report: ComparisonReport) -> str:
    """One escaped line on how to read the key table: :func:`settings_text`, then the direction."""
    note, first = no_mde_note(report), report.comparisons[0]
    reading = "better or worse" if first.hypothesis == "superiority" else f"{first.hypothesis} shown"
    return html.escape(
        f"{settings_text(report)}; direction: {reading} where the adjusted p is at most "
        f"{first.alpha:.6g}, else as the interval reads." + (f" {note}" if note else "")
    )


def report_html(
    report: ComparisonReport,
    spreads: dict,
    *,
    primary: str | None,
    title: str,
    forest_png: bytes,
    seed_png: bytes | None = None,
    provenance_html: str | None = None,
    primary_declared: bool = False,
    seed_averaged: ComparisonReport | None = None,
    primary_analysis: str | None = None,
) -> str:
    """One self-contained HTML page: result sentence, key table, details, forest plot, seed spread, methods, references.

    Images are embedded as base64 data URIs, so the page opens anywhere, including as an MLflow artifact, without other
    files. ``provenance_html``, an already escaped section on what was compared, goes before the methods.
    ``primary_declared`` says whether the primary metric was fixed before the models were trained; only then is it
    called "declared in advance". ``seed_averaged``, when given, is the seed-averaged comparison
    (:func:`~mlflow_recsys.stats.compare_seed_averaged`): its key table follows the representative-seed one under its
    own heading, with the seed counts. ``primary_analysis`` (``"representative-seed"`` or ``"seed-averaged"``; default
    ``None``: the settings' default rule, seed-averaged when ``seed_averaged`` is given) names the analysis the
    conclusion rests on: with a seed-averaged report, every heading and sentence says which is the primary analysis and
    which the sensitivity analysis, the primary one's sentences come first, and the methods end by saying why.
    """
    if primary_analysis is None:
        primary_analysis = "seed-averaged" if seed_averaged is not None else "representative-seed"
    analyses = ordered_analyses(report, seed_averaged, primary_analysis)
    sliced = [(kind, shown.slices) for kind, shown in analyses if shown.slices is not None]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}{_SLICES_STYLE if sliced else ''}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if primary is not None:
        parts.append(f"<p>{_declaration(f'<b>{html.escape(primary)}</b>', primary_declared)[0]}</p>")
        for label, shown, c in stated_results(report, seed_averaged, primary_analysis, primary):
            bold = f"<b>{label}.</b> " if label else ""
            parts.append(f"<p>{bold}{html.escape(results_text(shown, c, markup='plain'))}</p>")
    parts += _analyses(report, seed_averaged, primary_analysis, forest_png)
    if report.global_metrics is not None:
        parts += global_section(report.global_metrics)
    if spreads:
        parts += _seed_spread_section(spreads, primary, seed_png)
    for kind, analysis in sliced:
        if seed_averaged is None:
            parts += slices_section(analysis)
        else:
            which = analysis_heading(kind, primary_analysis)
            parts += slices_section(analysis, heading=f"Exploratory slices ({which})", id_prefix=f"{kind}-slice")
    if provenance_html:
        parts.append(provenance_html)
    parts += [
        "<h2>Methods</h2>",
        f"<p>{html.escape(methods_text(report))}</p>",
        *([f"<p>{html.escape(primary_analysis_text(primary_analysis))}</p>"] if seed_averaged is not None else []),
        "<h2>References</h2>",
        f"<pre>{html.escape(references_bibtex(*(r for r in (report, seed_averaged) if r is not None)))}</pre>",
        "</body></html>",
    ]
    return "\n".join(parts)


def slices_section(
    analysis: SliceAnalysis, *, heading: str = "Exploratory slices", id_prefix: str = "slice"
) -> list[str]:
    """The exploratory slices as HTML: ``heading``, the caveat (:data:`~mlflow_recsys.report._slices.CAVEAT`), then per
    slice its name, its definition and a table of its stratum rows (stratum, metric, pair, users, difference, interval,
    Holm-adjusted p, W/T/L and the slice's Cochran's Q with I² for the row's pair and metric), the table inside a
    ``div`` with id ``<id_prefix>-<i>``, i the slice's position. Slice names, definitions, strata, metrics and models
    are escaped."""
    header = tuple(slice_header(analysis)[1:])  # the slice is the table's heading
    cells = slice_cells(analysis)
    parts = [f"<h2>{html.escape(heading)}</h2>", f'<p class="caveat"><em>{html.escape(CAVEAT)}</em></p>']
    for i, (name, definition) in enumerate(analysis.definitions.items()):
        rows = [
            _row(
                [
                    ("name", _name(r.stratum)),
                    ("name", _name(r.metric)),
                    ("name", f"{_name(r.candidate)} vs {_name(r.baseline)}"),
                ]
                + [("", v) for v in (r.users, r.difference, r.interval, r.holm_p, r.wtl, r.heterogeneity)]
            )
            for r in cells
            if r.slice == name
        ]
        parts += [
            f"<h3>Slice: {_name(name)}</h3>",
            f"<p>{html.escape(definition)}</p>",
            f'<div id="{id_prefix}-{i}" class="wide">{_table(header, rows, "slices")}</div>',
        ]
    return parts


def global_section(analysis: ExposureAnalysis) -> list[str]:
    """The global metrics as HTML: a heading, :data:`~mlflow_recsys.report._global_metrics.GLOBAL_NOTE` and one table
    (metric, pair, users, both values, difference, interval, p, Holm p, bootstrap bias), names escaped."""
    rows = [
        _row(
            [("name", _name(c.metric)), ("name", f"{_name(c.candidate)} vs {_name(c.baseline)}")]
            + [("", v) for v in (c.users, c.baseline_value, c.candidate_value, c.difference, c.interval, c.p)]
            + [("", c.holm_p), ("", c.bias)]
        )
        for c in global_cells(analysis)
    ]
    table = _table(tuple(global_header(analysis)), rows, "global")
    return [
        "<h2>Global metrics</h2>",
        f"<p><em>{html.escape(GLOBAL_NOTE)}</em></p>",
        f'<div class="wide">{table}</div>',
    ]


def _image(data: bytes, alt: str) -> str:
    return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _analyses(
    report: ComparisonReport, seed_averaged: ComparisonReport | None, primary_analysis: str, forest_png: bytes
) -> list[str]:
    """Each analysis' key table, the primary one's first with its forest plot below; then their details tables."""
    two = seed_averaged is not None
    ids = {
        "representative-seed": ("report-table", "details-table"),
        "seed-averaged": ("seed-averaged-table", "seed-averaged-details"),
    }
    parts, details = [], ["<h2>Details</h2>"]
    for kind, shown in ordered_analyses(report, seed_averaged, primary_analysis):
        heading, averaged = analysis_heading(kind, primary_analysis), kind == "seed-averaged"
        parts += [
            f"<h2>{heading if two else 'Paired comparison'}</h2>",
            *([f"<p>{html.escape(seed_averaging_text(shown).strip())}</p>"] if averaged else []),
            f'<div id="{ids[kind][0]}" class="key-wrap">{key_table(shown, seeds=averaged)}</div>',
            f'<p class="legend">{legend(shown)}</p>',
        ]
        if kind == primary_analysis:
            what = f"the {kind} comparison's differences" if two else "the differences"
            parts.append(_image(forest_png, f"forest plot of {what} with their intervals"))
        table = f'<div id="{ids[kind][1]}" class="wide">{details_table(shown)}</div>'
        details.append(f"<h3>{heading}</h3>{table}" if two else table)
    return parts + details


def _seed_spread_section(spreads: dict, primary: str | None, seed_png: bytes | None) -> list[str]:
    """Each seed-spread table with its sentence (on the primary metric, else the first), then the per-seed plot."""
    parts = ["<h2>Spread across training seeds</h2>"]
    for name, spread in spreads.items():
        frame = spread.to_frame()
        parts.append(f"<h3>{html.escape(name)}</h3>")
        parts.append(f"<p>{html.escape(seed_protocol_text(spread, frame['metric'].iloc[0]))}.</p>")
        parts.append(
            '<div class="wide">'
            + frame.drop(columns=["baseline", "candidate", "protocol"]).to_html(
                index=False, border=0, float_format=lambda v: f"{v:.6f}"
            )
            + "</div>"
        )
        key = primary if primary in set(frame["metric"]) else frame["metric"].iloc[0]
        parts.append(f"<p>{html.escape(spread.results_text(key, markup='plain'))}</p>")
    if seed_png is not None:
        parts.append(_image(seed_png, "per-seed differences with their intervals"))
    return parts
