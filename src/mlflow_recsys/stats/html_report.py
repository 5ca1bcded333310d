"""The comparison report as one self-contained HTML page (the ``report.html`` artifact)."""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

from mlflow_recsys.stats.reporting import display_frame, methods_text, references_bibtex, results_text

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats.comparison import ComparisonReport


def report_html(
    report: "ComparisonReport",
    spreads: dict,
    *,
    primary: str | None,
    title: str,
    forest_png: bytes,
    seed_png: bytes | None = None,
    provenance_html: str | None = None,
    primary_declared: bool = False,
    seed_averaged: "ComparisonReport | None" = None,
) -> str:
    """One self-contained HTML page: result sentence, table, forest plot, seed spread, methods, references.

    Images are embedded as base64 data URIs, so the page opens anywhere,
    including as an MLflow artifact, without other files. ``provenance_html``,
    an already escaped section on what was compared, goes before the methods.
    ``primary_declared`` says whether the primary metric was fixed before the
    models were trained; only then is it called "declared in advance".
    ``seed_averaged``, when given, is the seed-averaged comparison
    (:func:`~mlflow_recsys.stats.compare_seed_averaged`) shown beside the
    representative-seed table under its own heading.
    """
    def image(data: bytes, alt: str) -> str:
        return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}"
        ".wide{overflow-x:auto}table{border-collapse:collapse;font-size:0.75em;white-space:nowrap}"
        "td,th{border:1px solid #ccc;padding:2px 5px;text-align:right}th{background:#f3f3f3}img{max-width:100%}pre{background:#f7f7f7;padding:1em;"
        "overflow-x:auto;font-size:0.8em}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if primary is not None:
        when = "declared in advance" if primary_declared else "chosen at comparison time, not before training"
        parts.append(f"<p>Primary metric ({when}): <b>{html.escape(primary)}</b>.</p>")
        for c in report.comparisons:
            if c.metric == primary:
                parts.append(f"<p>{html.escape(results_text(report, c, markup='plain'))}</p>")
    parts += [
        "<h2>Paired comparison</h2>",
        f'<div id="report-table" class="wide">{display_frame(report).to_html(index=False, border=0)}</div>',
        image(forest_png, "forest plot of the differences with their intervals"),
    ]
    if spreads:
        parts.append("<h2>Spread across training seeds</h2>")
        for name, spread in spreads.items():
            frame = spread.to_frame()
            parts.append(f"<h3>{html.escape(name)}</h3>")
            parts.append('<div class="wide">' + frame.drop(columns=["baseline", "candidate"]).to_html(
                index=False, border=0, float_format=lambda v: f"{v:.6f}") + "</div>")
            key = primary if primary in set(frame["metric"]) else frame["metric"].iloc[0]
            parts.append(f"<p>{html.escape(spread.results_text(key, markup='plain'))}</p>")
        if seed_png is not None:
            parts.append(image(seed_png, "per-seed differences with their intervals"))
    if provenance_html:
        parts.append(provenance_html)
    parts += [
        "<h2>Methods</h2>",
        f"<p>{html.escape(methods_text(report))}</p>",
        "<h2>References</h2>",
        f"<pre>{html.escape(references_bibtex())}</pre>",
        "</body></html>",
    ]
    return "\n".join(parts)
