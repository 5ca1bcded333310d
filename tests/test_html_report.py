"""report.html without a browser: the key table, the details table, the seed-averaged section, escaping.

The page is parsed with the standard library's HTML parser, so the checks read
what a browser shows (text with entities decoded, ``<wbr>`` invisible), and
the expected cells are formatted here from ``report.to_frame()``, not through
the page's own helpers.
"""

import dataclasses
import math
import re
import warnings
from html.parser import HTMLParser

import numpy as np
import pytest

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._analyses import primary_analysis_text
from mlflow_recsys.report._html import report_html
from mlflow_recsys.report._text import display_frame
from mlflow_recsys.stats import ComparisonWarning, compare_models

KEY = ["metric", "comparison", "difference", "interval", "adjusted p", "direction", "mde", "W/T/L"]
DETAILS = [
    "metric",
    "comparison",
    "baseline_mean",
    "candidate_mean",
    "n_units",
    "n_nonzero",
    "tie_rate",
    "p_value",
    "relative",
]
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


class Page(HTMLParser):
    """Tables of a page by the id of the element around them, and the text of its headings and paragraphs."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.headings: list[str] = []
        self.paragraphs: list[str] = []
        self._ids: list[str | None] = []
        self._rows: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._text: list[str] | None = None
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            self._ids.append(dict(attrs).get("id"))
        elif tag == "table":
            self._rows = self.tables.setdefault(next((i for i in reversed(self._ids) if i), ""), [])
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []
        elif tag in ("h1", "h2", "h3", "p"):
            self._text = []

    def handle_endtag(self, tag):
        if tag == "div" and self._ids:
            self._ids.pop()
        elif tag == "table":
            self._rows = None
        elif tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag in ("h1", "h2", "h3", "p") and self._text is not None:
            (self.paragraphs if tag == "p" else self.headings).append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        for sink in (self._cell, self._text):
            if sink is not None:
                sink.append(data)


def _p(p: float, mcse: float = 0.0) -> str:
    """A p-value as the page must print it: four decimals, or, estimated from resamples, down to the decimal place of
    twice its Monte Carlo standard error (two at least)."""
    if p < 1e-4:
        return f"{p:.2e}"
    decimals = 4 if mcse == 0 else min(4, max(2, math.ceil(-math.log10(2 * mcse))))
    return f"{p:.{decimals}f}"


def _report(names=("Popularity", "EASE", "ELSA"), metrics=("ndcg@100", "calibrated_recall@20", "mrr@20")):
    rng = np.random.default_rng(3)
    n = 80
    base = {m: rng.random(n) for m in metrics}
    results = {names[0]: EvaluationResult.from_per_user(base, targets_fingerprint="x")}
    for k, name in enumerate(names[1:]):
        results[name] = EvaluationResult.from_per_user(
            {m: v + rng.normal(0.04 * k, 0.1, n) for m, v in base.items()}, targets_fingerprint="x"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        return compare_models(results, metrics=list(metrics), reference=names[0], primary=metrics[0], n_resamples=999)


def _seed_averaged(report, seeds):
    """The report with each side's seed count set (as a seed-averaged comparison would have them)."""
    return dataclasses.replace(
        report,
        comparisons=tuple(
            dataclasses.replace(c, baseline_seeds=seeds[c.baseline], candidate_seeds=seeds[c.candidate])
            for c in report.comparisons
        ),
    )


def _page(report, **kwargs) -> str:
    return report_html(report, {}, primary=report.primary, title="study", forest_png=PNG, **kwargs)


@pytest.fixture(scope="module")
def report():
    return _report()


def test_key_table_holds_the_key_columns_one_row_per_hypothesis(report):
    rows = Page(_page(report)).tables["report-table"]
    assert rows[0] == KEY
    frame = report.to_frame()
    expected = [
        [
            r.metric,
            f"{r.candidate} vs {r.baseline}",
            f"{r.difference:.6f}",
            f"[{r.ci_low:.6f}, {r.ci_high:.6f}]",
            _p(r.adjusted_p_value, r.adjusted_p_value_mcse),
            r.direction,
            f"{r.mde:.6f}",
            f"{r.wins}/{r.ties}/{r.losses}",
        ]
        for r in frame.itertuples()
    ]
    assert rows[1:] == expected
    assert len(rows) - 1 == len(report.comparisons) == 6


def test_details_table_holds_the_other_columns(report):
    page = Page(_page(report))
    rows = page.tables["details-table"]
    assert rows[0] == DETAILS
    frame = report.to_frame()
    expected = [
        [
            r.metric,
            f"{r.candidate} vs {r.baseline}",
            f"{r.baseline_mean:.6f}",
            f"{r.candidate_mean:.6f}",
            str(r.n_units),
            str(r.n_nonzero),
            f"{r.tie_rate:.1%}",
            _p(r.p_value, r.p_value_mcse),
            f"{r.relative_difference:.2%}",
        ]
        for r in frame.itertuples()
    ]
    assert rows[1:] == expected
    # Between them, the two tables show every column of the display frame, and only the names twice.
    shown_as = {
        "baseline": "comparison",
        "candidate": "comparison",
        "ci_low": "interval",
        "ci_high": "interval",
        "adjusted_p": "adjusted p",
    }
    assert {shown_as.get(c, c) for c in display_frame(report).columns} == set(KEY) | set(DETAILS)
    assert set(KEY) & set(DETAILS) == {"metric", "comparison"}


def test_seed_averaged_section_appears_only_when_given(report):
    plain = _page(report)
    assert "Seed-averaged" not in plain and "seed-averaged-table" not in plain
    assert "Paired comparison" in Page(plain).headings

    seeds = {"Popularity": 1, "EASE": 1, "ELSA": 3}
    averaged = _seed_averaged(report, seeds)
    page = Page(_page(report, seed_averaged=averaged))
    # By default (as ComparisonSettings.primary_analysis="auto") the seed-averaged comparison is the primary analysis.
    primary, sensitivity = (
        "Primary analysis: seed-averaged comparison",
        "Sensitivity analysis: representative-seed comparison",
    )
    # The primary analysis' table comes first, with the forest plot of that analysis, in the key and details alike.
    assert [h for h in page.headings if h in (primary, sensitivity)] == [primary, sensitivity] * 2
    assert "forest plot of the seed-averaged comparison's differences" in _page(report, seed_averaged=averaged)
    flipped = Page(_page(report, seed_averaged=averaged, primary_analysis="representative-seed"))
    first, second = "Primary analysis: representative-seed comparison", "Sensitivity analysis: seed-averaged comparison"
    assert [h for h in flipped.headings if h in (first, second)] == [first, second] * 2
    assert primary_analysis_text("seed-averaged") in page.paragraphs
    assert "Paired comparison" not in page.headings
    # The representative-seed table is unchanged; the seed-averaged one names each side's seeds.
    assert page.tables["report-table"] == Page(plain).tables["report-table"]
    rows = page.tables["seed-averaged-table"]
    assert rows[0] == KEY and len(rows) - 1 == len(averaged.comparisons)
    for row, c in zip(rows[1:], averaged.comparisons, strict=True):
        s = {1: "1\u00a0seed", 3: "3\u00a0seeds"}  # a number and its unit stay on one line
        assert row[1] == f"{c.candidate} ({s[seeds[c.candidate]]}) vs {c.baseline} ({s[seeds[c.baseline]]})"
        assert row[2] == f"{c.difference:.6f}"
    # Under the seed-averaged table: how the seeds were averaged and what inference covers; the legend counts them.
    sentence = next(p for p in page.paragraphs if p.startswith("Seed-averaged: each model's per-user values averaged"))
    assert "1 to 3 per model" in sentence
    assert "inference remains over users" in sentence and "a new training seed" in sentence
    legend = next(p for p in page.paragraphs if p.startswith("Seed-averaged over training seeds ("))
    assert "Popularity: 1 seed" in legend and "EASE: 1 seed" in legend and "ELSA: 3 seeds" in legend
    assert page.tables["seed-averaged-details"][0] == DETAILS
    # Above the tables, the primary metric's sentence of each comparison, each labelled, the primary analysis' first.
    sentences = []
    for label, source in ((primary + ". ", averaged), (sensitivity + ". ", report)):
        for c in source.comparisons:
            if c.metric == report.primary:
                # A pair in which neither side has seeds has one comparison in both analyses: it is stated once,
                # in the primary analysis, and not again as a sensitivity result.
                shown = label.startswith("Primary") or c.candidate == "ELSA"
                sentence = label + source.results_text(c.metric, c.candidate, c.baseline)
                assert (sentence in page.paragraphs) == shown
                sentences += [page.paragraphs.index(sentence)] if shown else []
    assert sentences == sorted(sentences)


HOSTILE = ["<b>bold</b>", "a&amp;b \"q\" 'x'", "<script>alert(1)</script>_x@y"]


def test_hostile_names_are_escaped_and_shown_literally():
    report = _report(names=tuple(HOSTILE), metrics=("<i>m</i>@1", "ndcg@100"))
    averaged = _seed_averaged(report, dict.fromkeys(HOSTILE, 2))
    source = _page(report, seed_averaged=averaged)
    for raw in ["<b>bold</b>", "<script>", "<i>m</i>"]:
        assert raw not in source
    assert len(re.findall(r"<script", source, flags=re.I)) == 0
    page = Page(source)
    for table in ("report-table", "details-table", "seed-averaged-table", "seed-averaged-details"):
        shown = {row[0] for row in page.tables[table][1:]}
        assert shown == {"<i>m</i>@1", "ndcg@100"}
    comparisons = {row[1] for row in page.tables["report-table"][1:]}
    assert comparisons == {f"{HOSTILE[1]} vs {HOSTILE[0]}", f"{HOSTILE[2]} vs {HOSTILE[0]}"}
    legend = next(p for p in page.paragraphs if p.startswith("Seed-averaged over training seeds ("))
    assert all(f"{name}: 2" in legend for name in HOSTILE)
