"""Exploratory slices in report.html, the LaTeX export and the references: every stratum row as the frames hold it,
the caveat, user text escaped (never raw), Cochran (1954) and Higgins & Thompson (2002) cited only with slices, and a
report without slices rendered exactly as without this feature.

Expected cells are formatted here from ``report.slices.to_frame()`` and ``heterogeneity_frame()``, and expected escapes
are written out by hand, not taken from the renderers' helpers.
"""

import dataclasses
import re
import warnings
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

import mlflow_recsys.tracking._comparison_files as comparison_files
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report import references_bibtex, report_html
from mlflow_recsys.report._latex import LATEX_ROWS_PER_TABLE
from mlflow_recsys.stats import ComparisonWarning, Slice, compare_models, history_slice
from test_report_exports import compile_latex, needs_pdflatex

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
SCRIPT = "<script>alert(1)</script>"
AMPERSAND = "R&D_#1"
#: A slice and its strata named with every character LaTeX acts on that the brief names, and HTML's ``<``, ``>``, ``&``.
SLICE = "grp_50%&#\\"
LOW, HIGH = "low&<b>", "hi_%#\\"
#: Each name as LaTeX source, written out by hand.
LATEX = {
    SCRIPT: r"\textless{}script\textgreater{}alert(1)\textless{}/script\textgreater{}",
    AMPERSAND: r"R\&D\_\#1",
    SLICE: r"grp\_50\%\&\#\textbackslash{}",
    LOW: r"low\&\textless{}b\textgreater{}",
    HIGH: r"hi\_\%\#\textbackslash{}",
    "EASE": "EASE",
    "ndcg@10": "ndcg@10",
}
HEADER = ["stratum", "metric", "candidate vs baseline", "users", "difference", "95% interval", "Holm p", "W/T/L",
          "heterogeneity"]  # fmt: skip


def _latex(text: str) -> str:
    """``text`` as LaTeX: the names above as written there; a history stratum (``0-6``, ``>=7``) with its ``>``."""
    return LATEX.get(text, text.replace(">", r"\textgreater{}"))


COCHRAN, HIGGINS = "@article{cochran1954combination,", "@article{higgins2002quantifying,"


class Page(HTMLParser):
    """The tables of a page by the id of the ``div`` around them, and the text of its headings and paragraphs."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.headings: list[str] = []
        self.paragraphs: list[str] = []
        self._id: str | None = None
        self._cell: list[str] | None = None
        self._text: list[str] | None = None
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            self._id = dict(attrs).get("id")
        elif tag == "tr" and self._id:
            self.tables.setdefault(self._id, []).append([])
        elif tag in ("td", "th") and self._id:
            self._cell = []
        elif tag in ("h2", "h3", "p"):
            self._text = []

    def handle_endtag(self, tag):
        if tag == "div":
            self._id = None
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[self._id][-1].append("".join(self._cell))
            self._cell = None
        elif tag in ("h2", "h3", "p") and self._text is not None:
            (self.paragraphs if tag == "p" else self.headings).append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        for sink in (self._cell, self._text):
            if sink is not None:
                sink.append(data)


def _p(p: float) -> str:
    return f"{p:.2e}" if 0 < p < 1e-4 else f"{p:.4f}"


def _results(n=90, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.arange(n) + 500
    base = rng.random(n)
    fp = "f" * 64
    models = {"EASE": base, SCRIPT: base + rng.normal(0.03, 0.1, n), AMPERSAND: base + rng.normal(-0.01, 0.1, n)}
    return {m: EvaluationResult.from_per_user({"ndcg@10": v}, sample_ids=ids, targets_fingerprint=fp) for m, v in
            models.items()}, ids  # fmt: skip


def _compare(results, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        return compare_models(results, metrics="ndcg@10", reference="EASE", n_resamples=999, random_state=1, **kwargs)


@pytest.fixture(scope="module")
def sliced():
    results, ids = _results()
    own = Slice.from_labels(SLICE, pd.Series(np.where(np.arange(ids.size) < 40, LOW, HIGH), index=ids))
    history = history_slice(pd.Series(np.arange(ids.size) % 13, index=ids), bins=2)
    return _compare(results, slices=[history, own])


def _page(report, **kwargs) -> str:
    return report_html(report, {}, primary=None, title="study", forest_png=PNG, **kwargs)


def _expected_rows(report, name: str) -> list[list[str]]:
    """The stratum rows of slice ``name`` as the page must show them, from the report's frames."""
    het = report.slices.heterogeneity_frame().set_index(["slice", "metric", "baseline", "candidate"])
    rows = []
    for r in report.slices.to_frame().itertuples():
        if r.slice != name:
            continue
        h = het.loc[(r.slice, r.metric, r.baseline, r.candidate)]
        rows.append(
            [
                r.stratum,
                r.metric,
                f"{r.candidate} vs {r.baseline}",
                str(r.n_units),
                f"{r.difference:+.4f}",
                f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]",
                _p(r.adjusted_p_value),
                f"{r.wins}/{r.ties}/{r.losses}",
                f"Q = {h.q:.2f}, p = {_p(h.p_value)}, I² = {h.i_squared:.0%}",
            ]  # fmt: skip
        )
    return rows


def test_html_shows_the_caveat_and_each_slice_with_every_stratum_row(sliced):
    page = Page(_page(sliced))
    assert "Exploratory slices" in page.headings
    caveat = next(p for p in page.paragraphs if p.startswith("Exploratory slices:"))
    assert "Holm-adjusted within each slice" in caveat and "Not evidence on their own." in caveat
    assert "Cochran (1954)" in caveat and "Higgins & Thompson, 2002" in caveat
    assert [h for h in page.headings if h.startswith("Slice: ")] == ["Slice: history", f"Slice: {SLICE}"]
    for i, name in enumerate(["history", SLICE]):
        table = page.tables[f"slice-{i}"]
        assert table[0] == HEADER
        assert table[1:] == _expected_rows(sliced, name)
    # 2 strata x 2 candidates in each slice, every row shown once
    assert sum(len(page.tables[f"slice-{i}"]) - 1 for i in range(2)) == len(sliced.slices.strata) == 8
    assert f"labels supplied for {SLICE!r}" in page.paragraphs  # the definition, decoded as a browser shows it


def test_html_escapes_names_strata_and_slices_and_never_writes_them_raw(sliced):
    source = _page(sliced)
    section = source[source.index("<h2>Exploratory slices</h2>") : source.index("<h2>Methods</h2>")]
    assert SCRIPT not in source and "<b>" not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt; vs EASE" in section
    assert "R&amp;D_<wbr>#1 vs EASE" in section
    assert "low&amp;&lt;b&gt;" in section and "hi_<wbr>%#\\" in section
    assert "<h3>Slice: grp_<wbr>50%&amp;#\\</h3>" in section
    # no ampersand but those that start an entity
    assert not re.findall(r"&(?!amp;|lt;|gt;|#x27;|quot;)", section)


def test_html_without_slices_is_the_page_with_the_slices_taken_out(sliced):
    plain = dataclasses.replace(sliced, slices=None)
    without, with_ = _page(plain), _page(sliced)
    assert "Exploratory" not in without and "slices" not in without and "cochran" not in without
    start, end = with_.index("<h2>Exploratory slices</h2>\n"), with_.index("<h2>Methods</h2>")
    bib = with_.index("\n@article{cochran1954combination")
    trimmed = with_[:start] + with_[end:bib] + with_[with_.index("</pre>", bib) :]
    trimmed = trimmed.replace(".slices th:nth-child(-n+3){text-align:left}", "").replace(
        ".caveat{border-left:4px solid #c27c0e;padding-left:8px}", ""
    )
    assert trimmed == without


def test_a_seed_averaged_page_names_the_analysis_of_each_slices_section(sliced):
    averaged = dataclasses.replace(
        sliced,
        comparisons=tuple(dataclasses.replace(c, candidate_seeds=3) for c in sliced.comparisons),
    )
    page = Page(_page(sliced, seed_averaged=averaged))
    assert [h for h in page.headings if h.startswith("Exploratory slices")] == [
        "Exploratory slices (Primary analysis: seed-averaged comparison)",
        "Exploratory slices (Sensitivity analysis: representative-seed comparison)",
    ]
    assert page.tables["seed-averaged-slice-1"][1:] == _expected_rows(sliced, SLICE)
    assert page.tables["representative-seed-slice-0"][1:] == _expected_rows(sliced, "history")


def _slices_table(latex: str) -> str:
    tables = latex.split("\\begin{table}")
    assert len(tables) == 3, "expected the comparison's table and the slices' table"
    return "\\begin{table}" + tables[2]


def test_latex_adds_a_slices_table_with_the_caveat_in_its_caption(sliced):
    plain_latex = dataclasses.replace(sliced, slices=None).to_latex()
    latex = sliced.to_latex(label="tab:x")
    assert latex.startswith(plain_latex.replace("tab:comparison", "tab:x"))  # the first table is as without slices
    table = _slices_table(latex)
    assert "\\label{tab:x-slices}" in table and table.endswith("\\end{table}\n")
    caption = table[table.index("\\caption{") + len("\\caption{") : table.index("}\n\\label{")]
    assert caption.startswith("Exploratory slices: each stratum compared on its own users;")
    assert "Cochran (1954)" in caption and "(Higgins \\& Thompson, 2002)" in caption
    assert f"{LATEX[SLICE]}: labels supplied for \\textquotesingle{{}}{LATEX[SLICE]}" in caption
    header = (
        "Stratum & Metric & Comparison & Users & Difference & 95\\% CI & Holm $p$ & W/T/L & $Q$ & $p_Q$ & $I^2$ \\\\"
    )
    assert header in table.splitlines()
    assert "\\begin{tabular}{lllrrcrrrrr}" in table


def test_latex_slices_rows_hold_every_number_as_formatted(sliced):
    lines = _slices_table(sliced.to_latex()).splitlines()
    het = sliced.slices.heterogeneity_frame().set_index(["slice", "metric", "baseline", "candidate"])
    for name in ("history", SLICE):
        group = lines.index(f"\\multicolumn{{11}}{{l}}{{\\emph{{{_latex(name)}}}}} \\\\")
        for k, r in enumerate(sliced.slices.to_frame().query("slice == @name").itertuples(), start=1):
            h = het.loc[(r.slice, r.metric, r.baseline, r.candidate)]
            cells = [
                _latex(r.stratum),
                "ndcg@10",
                f"{LATEX[r.candidate]} vs EASE",
                str(r.n_units),
                f"${r.difference:+.4f}$",
                f"$[{r.ci_low:+.4f}, {r.ci_high:+.4f}]$",
                f"${_p(r.adjusted_p_value)}$",
                f"{r.wins}/{r.ties}/{r.losses}",
                f"${h.q:.2f}$",
                f"${_p(h.p_value)}$",
                f"${h.i_squared * 100:.0f}\\%$",
            ]
            assert lines[group + k] == " & ".join(cells) + " \\\\"
    assert sum(line.count(" vs EASE") for line in lines) == len(sliced.slices.strata)


def test_latex_escapes_every_name_and_never_writes_one_raw(sliced):
    latex = sliced.to_latex()
    for raw in (SCRIPT, AMPERSAND, SLICE, LOW, HIGH):
        assert raw not in latex, raw
        assert LATEX[raw] in _slices_table(latex), raw
    # outside math and escapes, no character LaTeX would act on is left
    table = re.sub(r"\$[^$]*\$", "", _slices_table(latex))
    table = re.sub(r"\\(?:[&%#_$]|textbackslash\{\}|textless\{\}|textgreater\{\}|textquotesingle\{\})", "", table)
    body = table.split("\\midrule\n", 1)[1].split("\\bottomrule")[0].replace(" \\\\\n", "\n")
    assert not re.findall(r"[%#_<>]|&(?! )|\\(?!multicolumn|emph|midrule)", body)


@needs_pdflatex
def test_pdflatex_typesets_the_slices_table_within_the_line_width(sliced, tmp_path):
    log = compile_latex(tmp_path, sliced.to_latex())
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log


@needs_pdflatex
def test_a_name_opening_a_latex_row_with_a_bracket_or_star_is_typeset_as_it_is(tmp_path):
    """A row's \\\\ takes a [ after it for its spacing argument (pdflatex stopped: "Missing number") and a * for its
    star (lost): a stratum, model or metric name opening a row with one gets {} before it, and prints whole."""
    results, ids = _results(n=40, seed=5)
    results = {"[A]": results["EASE"], "*B*": results[SCRIPT]}
    labels = pd.Series(np.where(np.arange(ids.size) < 20, "[link](http://x)", "**bold**"), index=ids)
    report = compare_models(
        results, metrics="ndcg@10", reference="[A]", n_resamples=99, slices=Slice.from_labels("s", labels)
    )
    latex = report.to_latex()
    assert "{}[link](http://x) & " in latex and "{}**bold** & " in latex
    compile_latex(tmp_path, latex)  # fails the test on any LaTeX error


def test_a_stratum_without_spread_has_no_heterogeneity_on_every_surface():
    results, ids = _results(n=30, seed=2)
    results = {m: results[m] for m in ("EASE", SCRIPT)}
    same = results["EASE"].per_user["ndcg@10"].copy()
    shifted = results[SCRIPT].per_user["ndcg@10"].copy()
    same[:10], shifted[:10] = 0.5, 0.625  # exact in binary: the first stratum's differences have no spread at all
    results = {
        m: EvaluationResult.from_per_user({"ndcg@10": v}, sample_ids=ids, targets_fingerprint="f" * 64)
        for m, v in (("EASE", same), (SCRIPT, shifted))
    }
    sl = Slice.from_labels("part", pd.Series(["flat"] * 10 + ["rest"] * 20, index=ids))
    report = _compare(results, slices=sl)
    assert np.isnan(report.slices.heterogeneity[0].q)
    assert [row[-1] for row in Page(_page(report)).tables["slice-0"][1:]] == ["n/a", "n/a"]
    assert _slices_table(report.to_latex()).count("$\\mathrm{n/a}$ & $\\mathrm{n/a}$ & $\\mathrm{n/a}$ \\\\") == 2
    assert str(report).splitlines()[-1].endswith("  n/a")


def test_text_and_markdown_rows_show_i_squared(sliced):
    h = sliced.slices.heterogeneity_frame().iloc[0]
    cell = f"Q = {h.q:.2f}, p = {_p(h.p_value)}, I² = {h.i_squared:.0%}"
    assert cell in str(sliced) and cell in sliced.to_markdown()


def test_references_add_cochran_and_higgins_thompson_only_with_slices(sliced):
    plain = dataclasses.replace(sliced, slices=None)
    base = references_bibtex(plain)
    assert COCHRAN not in base and HIGGINS not in base
    full = references_bibtex(sliced)
    assert full.startswith(base) and full.index(COCHRAN) < full.index(HIGGINS)
    assert "pages   = {101--129}" in full and "journal = {Biometrics}" in full and "doi     = {10.2307/3001666}" in full
    assert "pages   = {1539--1558}" in full and "journal = {Statistics in Medicine}" in full
    assert references_bibtex() == full  # with no report: every entry, as docs/citing.md lists them
    assert references_bibtex(plain, sliced) == full  # either analysis' slices bring them in
    assert COCHRAN in _page(plain, seed_averaged=sliced) and COCHRAN not in _page(plain)
    assert COCHRAN in _page(sliced) and HIGGINS in _page(sliced)


def test_a_comparison_runs_files_cite_and_show_slices_only_when_it_has_them(sliced, tmp_path, monkeypatch):
    monkeypatch.setattr(comparison_files, "provenance_markdown", lambda provenance: "what was compared")
    provenance = {"models": {m: {"why": "seed 0"} for m in ("EASE", SCRIPT, AMPERSAND)}}
    settings = {"primary_analysis_used": "representative-seed", "primary_analysis": "auto"}
    for report, out in ((sliced, tmp_path / "sliced"), (dataclasses.replace(sliced, slices=None), tmp_path / "plain")):
        out.mkdir()
        comparison_files.write_texts(out, report, None, provenance, settings)
    assert COCHRAN in (tmp_path / "sliced" / "references.bib").read_text()
    assert COCHRAN not in (tmp_path / "plain" / "references.bib").read_text()
    assert "\\label{tab:comparison-slices}" in (tmp_path / "sliced" / "report.tex").read_text()
    assert "slices" not in (tmp_path / "plain" / "report.tex").read_text()


@needs_pdflatex
@pytest.mark.parametrize(("strata", "metrics"), [(80, 1), (160, 5)])
def test_a_slice_table_of_many_rows_continues_in_tables_that_fit_a_page(tmp_path, strata, metrics):
    """80 rows were a float taller than the page ("Float too large"); 1,600 a box TeX cannot set ("Dimension too
    large"). Each table holds at most LATEX_ROWS_PER_TABLE rows, the slice named again over those that go on."""
    rng = np.random.default_rng(strata)
    ids = np.arange(2 * strata) + 500
    keys = [f"ndcg@{k}" for k in range(5, 5 + metrics)]
    base = {k: rng.random(ids.size) for k in keys}
    results = {
        name: EvaluationResult.from_per_user(
            {k: v + rng.normal(0.01, 0.1, ids.size) * (name != "EASE") for k, v in base.items()},
            sample_ids=ids,
            targets_fingerprint="f" * 64,
        )
        for name in ("EASE", "ELSA", "POP")
    }
    labels = pd.Series([f"s{i // 2:03d}" for i in range(ids.size)], index=ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        report = compare_models(
            results, metrics=keys, reference="EASE", n_resamples=99, slices=Slice.from_labels("many", labels)
        )
    rows = len(report.slices.strata)
    assert rows == strata * metrics * 2
    latex = report.to_latex(label="tab:t")
    tables = latex.count("\\begin{table}") - 1  # the main table first
    assert tables == -(-rows // LATEX_ROWS_PER_TABLE)
    assert [f"\\label{{tab:t-slices-{k}}}" in latex for k in range(2, tables + 1)] == [True] * (tables - 1)
    assert latex.count("\\emph{many} (continued)") == tables - 1
    log = compile_latex(tmp_path, latex)
    assert "Float too large" not in log and "Overfull \\vbox" not in log and "Overfull \\hbox" not in log
