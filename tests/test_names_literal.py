"""Model names and metric keys are shown literally on every surface: markdown, HTML, LaTeX, CSV and plots."""

import html
import io
import re
import warnings

import matplotlib.figure
import matplotlib.text
import numpy as np
import pandas as pd
import pytest
from markdown_it import MarkdownIt

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._escaping import csv_safe_frame, escape_markdown
from mlflow_recsys.report._html import report_html
from mlflow_recsys.report._plots import (
    LABEL_WIDTH,
    critical_difference_plot,
    forest_plot,
    meta_forest_plot,
    plot_label,
    seed_spread_plot,
)
from mlflow_recsys.stats import ComparisonWarning, compare_models, random_effects, rank_across_datasets, seed_spread

HOSTILE_NAMES = [
    "A$\\frac{1}{$",  # unbalanced mathtext: matplotlib raises if it parses it
    "$x^2$",
    "<b>bold</b>",
    "**md**|pipe",
    '=HYPERLINK("x")',
    "_under",  # matplotlib drops legend labels that start with "_"
    "0042",  # tabulate would print it as 42
    "# head\nline [link](http://x) `code` ~strike~ a\\b &amp;",
    "Ελληνικά-модель-ñandú-" * 20,  # long, non-ASCII
]
HOSTILE_METRIC = "*m*|_1_"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# A CommonMark renderer with GFM tables and strikethrough: what a reader of the run notes or report.md sees.
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _inline_tokens(source: str):
    return _MARKDOWN.parseInline(source)[0].children


def markdown_text(source: str) -> str:
    """The text a CommonMark renderer shows for the inline markdown ``source``."""
    return "".join(t.content for t in _inline_tokens(source) if t.type == "text")


def active_markup(source: str) -> list[str]:
    """The markup a renderer reads in ``source``: every token but text and autolinks (links whose text is the
    address)."""
    tokens = _inline_tokens(source)
    autolinks = {i for i, t in enumerate(tokens) if t.type == "link_open" and t.info == "auto"}
    allowed = autolinks | {i + 2 for i in autolinks} | {i + 1 for i in autolinks}
    return [t.type for i, t in enumerate(tokens) if t.type != "text" and i not in allowed]


@pytest.fixture(scope="module")
def report():
    rng = np.random.default_rng(0)
    n = 60
    base = {HOSTILE_METRIC: rng.random(n), "ndcg@100": rng.random(n)}
    results = {"plain": EvaluationResult.from_per_user(base, targets_fingerprint="x")}
    for k, name in enumerate(HOSTILE_NAMES):
        shifted = {m: v + rng.normal(0.01 * k, 0.1, n) for m, v in base.items()}
        results[name] = EvaluationResult.from_per_user(shifted, targets_fingerprint="x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        return compare_models(results, metrics=[HOSTILE_METRIC, "ndcg@100"], reference="plain", n_resamples=999)


@pytest.fixture(scope="module")
def spread():
    rng = np.random.default_rng(1)
    base = rng.random(40)
    seeds = {
        f"${s}$": EvaluationResult.from_per_user(
            {HOSTILE_METRIC: base + rng.normal(0.02, 0.05, 40)}, targets_fingerprint="x"
        )
        for s in range(5)
    }
    return seed_spread(
        EvaluationResult.from_per_user({HOSTILE_METRIC: base}, targets_fingerprint="x"),
        seeds,
        metrics=HOSTILE_METRIC,
        baseline_name="<b>bold</b>",
        candidate_name="**md**|pipe",
        n_resamples=999,
    )


# -- markdown ------------------------------------------------------------------------------


@pytest.mark.parametrize("ch", list("\\`*_[]|~$"))
def test_markdown_escapes_only_what_formats_text(ch):
    assert escape_markdown(f"a{ch}b") == f"a\\{ch}b"


@pytest.mark.parametrize("ch", list("{}()#+-.!>=&'\"@:/"))
def test_markdown_leaves_punctuation_alone_inside_text(ch):
    # Inside a line these characters format nothing, so the source reads as the text does.
    assert escape_markdown(f"a{ch}b") == f"a{ch}b"
    assert markdown_text(f"a{ch}b") == f"a{ch}b"


@pytest.mark.parametrize(
    "text, escaped",
    [
        ("# head", "\\# head"),
        ("- item", "\\- item"),
        ("+ item", "\\+ item"),
        ("1. first", "1\\. first"),
        ("12) twelve", "12\\) twelve"),
        ("> quote", "&gt; quote"),
        ("=", "\\="),
    ],
)
def test_markdown_escapes_a_block_start_only_at_the_start(text, escaped):
    assert escape_markdown(text) == escaped
    assert escape_markdown("x " + text) == "x " + text
    html_out = _MARKDOWN.render(f"- {escaped}")  # as a provenance line puts it: one list item holding the text
    assert html_out.count("<li>") == 1 and "<h1>" not in html_out and "<blockquote>" not in html_out


def test_markdown_html_and_line_breaks_cannot_escape_the_text():
    assert escape_markdown("<b>bold</b> & co >= 4") == "&lt;b>bold&lt;/b> & co >= 4"
    assert escape_markdown("&amp; &#10;") == "&amp;amp; &amp;#10;"  # would otherwise render as "& " and a newline
    assert escape_markdown("a\nb\rc") == "a&#10;b&#13;c"
    assert escape_markdown("**md**|pipe") == "\\*\\*md\\*\\*\\|pipe"
    assert escape_markdown("EASE λ ndcg@100 名前 ml-100k (l2=500)") == "EASE λ ndcg@100 名前 ml-100k (l2=500)"
    assert escape_markdown(7) == "7"


def test_markdown_web_address_is_an_autolink_never_escaped():
    url = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
    line = f"Dataset: movielens-100k ({url}; archive sha256 0a1b_2c). Ratings >= 4 kept as positives."
    escaped = escape_markdown(line)
    assert escaped == f"Dataset: movielens-100k (<{url}>; archive sha256 0a1b\\_2c). Ratings >= 4 kept as positives."
    assert markdown_text(escaped) == line and active_markup(escaped) == []
    assert f'<a href="{url}">{url}</a>' in _MARKDOWN.render(escaped)
    # Punctuation that ends the sentence is not part of the address; an address with odd characters in it is.
    assert escape_markdown("see https://x.org/a_(b)_c.") == "see <https://x.org/a_(b)_c>."
    assert escape_markdown("(https://x.org/q?a=1&b=2)") == "(<https://x.org/q?a=1&b=2>)"


@pytest.mark.parametrize("name", HOSTILE_NAMES + [HOSTILE_METRIC, "\\", "\\|", "&lt;", "a &amp; b"])
def test_an_escaped_name_reads_back_as_itself_and_holds_no_active_markup(name):
    escaped = escape_markdown(name)
    assert markdown_text(escaped) == name
    assert active_markup(escaped) == []
    cells = re.findall(r"<td>(.*?)</td>", _MARKDOWN.render(f"| a | b |\n|---|---|\n| {escaped} | x |\n"), re.S)
    assert [html.unescape(c) for c in cells] == [name.strip(), "x"] or "http" in name  # one cell, the name in it


def test_markdown_table_keeps_one_row_per_hypothesis_and_shows_each_name(report):
    settings, table = report.to_markdown().split("\n\n", 1)
    rows = table.split("\n")
    assert len(rows) == 2 + report.family_size  # header, rule, one line per hypothesis: no name broke a row

    def cells(line):
        # Split on pipes that are not escaped, the way a GFM table does.
        return [markdown_text(c.strip()) for c in re.findall(r"(?:\\.|[^|\\])+", line.strip().strip("|"))]

    header = cells(rows[0])
    assert header[:3] == ["metric", "baseline", "candidate"]
    shown = [tuple(cells(line)[:3]) for line in rows[2:]]
    assert shown == [(c.metric, c.baseline, c.candidate) for c in report.comparisons]
    assert all(len(cells(line)) == len(header) for line in rows[2:])


def test_results_sentence_in_markdown_reads_back_as_the_plain_sentence(report):
    for c in report.comparisons:
        md = report.results_text(c.metric, c.candidate, markup="markdown")
        plain = report.results_text(c.metric, c.candidate)
        assert c.candidate in plain and c.metric in plain and c.baseline in plain
        assert markdown_text(md) == plain
        assert escape_markdown(c.candidate) in md and escape_markdown(c.metric) in md
    bold = report.results_text("ndcg@100", "<b>bold</b>", markup="markdown")
    assert "<b>" not in bold and "&lt;b>bold&lt;/b>" in bold
    with pytest.raises(ValueError, match="markup: expected 'markdown' or 'plain', found 'rst'"):
        report.results_text("ndcg@100", "0042", markup="rst")


def test_seed_spread_sentence_in_markdown_reads_back_as_the_plain_sentence(spread):
    md = spread.results_text(HOSTILE_METRIC, markup="markdown")
    plain = spread.results_text(HOSTILE_METRIC)
    assert "**md**|pipe minus <b>bold</b> on *m*|_1_" in plain
    assert "\\*\\*md\\*\\*\\|pipe minus &lt;b>bold&lt;/b> on \\*m\\*\\|\\_1\\_" in md
    assert markdown_text(md) == plain


def test_methods_text_names_no_model_so_names_cannot_change_it(report):
    rng = np.random.default_rng(0)
    n = 60
    base = {HOSTILE_METRIC: rng.random(n), "ndcg@100": rng.random(n)}
    results = {"plain": EvaluationResult.from_per_user(base, targets_fingerprint="x")}
    for k in range(len(HOSTILE_NAMES)):
        shifted = {m: v + rng.normal(0.01 * k, 0.1, n) for m, v in base.items()}
        results[f"model{k}"] = EvaluationResult.from_per_user(shifted, targets_fingerprint="x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        tame = compare_models(results, metrics=[HOSTILE_METRIC, "ndcg@100"], reference="plain", n_resamples=999)
    assert report.methods_text() == tame.methods_text()
    assert not any(name in report.methods_text() for name in HOSTILE_NAMES + [HOSTILE_METRIC])


# -- HTML and LaTeX --------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Tight layout not applied")
def test_html_report_escapes_names_once(report, spread, tmp_path):
    forest_plot(report, tmp_path / "forest.png")
    page = report_html(
        report,
        {"**md**|pipe vs <b>bold</b>": spread},
        primary="ndcg@100",
        title="<i>t</i>",
        forest_png=(tmp_path / "forest.png").read_bytes(),
    )
    assert "<b>bold</b>" not in page and "<i>t</i>" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "&lt;i&gt;t&lt;/i&gt;" in page
    for c in report.comparisons:
        if c.metric == "ndcg@100":
            assert f"<p>{html.escape(report.results_text(c.metric, c.candidate, markup='plain'))}</p>" in page
    assert html.escape(spread.results_text(HOSTILE_METRIC, markup="plain")) in page
    assert "\\*\\*md" not in page  # the HTML shows names, not their markdown escapes


def test_latex_table_escapes_names_and_percent_signs(report):
    latex = report.to_latex()
    assert "$x^2$" not in latex and r"\$x\textasciicircum{}2\$" in latex
    assert r"A\$\textbackslash{}frac\{1\}\{\$" in latex
    assert r"\_under" in latex and r"\textbackslash{}b \&amp;" in latex
    level = f"{report.comparisons[0].confidence_level:.0%}".replace("%", r"\%")
    assert f"{level} CI" in latex


# -- CSV ----------------------------------------------------------------------------------


def test_csv_safe_frame_quotes_formula_text_and_leaves_numbers():
    frame = pd.DataFrame(
        {
            "name": ['=HYPERLINK("x")', "+1", "-cmd", "@SUM(A1)", "\tx", "\rx", "plain", "a=b", None],
            "difference": [-0.5, -1.0, 0.25, -1e-9, 0.0, 1.0, -2.0, 3.0, np.nan],
            "n": [-3, -2, -1, 0, 1, 2, 3, 4, 5],
            "kind": pd.Categorical(["=a", "b", "=a", "b", "b", "b", "b", "b", "b"]),
            "=label": ["-x"] * 9,
        }
    )
    before = frame.copy()
    safe = csv_safe_frame(frame)
    expected = ['\'=HYPERLINK("x")', "'+1", "'-cmd", "'@SUM(A1)", "'\tx", "'\rx", "plain", "a=b", None]
    pd.testing.assert_series_equal(safe["name"], pd.Series(expected, name="name", dtype=frame["name"].dtype))
    assert safe["kind"].tolist() == ["'=a", "b", "'=a", "b", "b", "b", "b", "b", "b"]
    assert list(safe.columns) == ["name", "difference", "n", "kind", "'=label"]
    assert safe["'=label"].tolist() == ["'-x"] * 9
    pd.testing.assert_series_equal(safe["difference"], frame["difference"])  # negative floats stay floats
    pd.testing.assert_series_equal(safe["n"], frame["n"])
    pd.testing.assert_frame_equal(frame, before)  # the input is not modified
    # Rows 0-4 only: pandas leaves a field holding "\r" unquoted, so reading it back splits the line.
    back = pd.read_csv(io.StringIO(safe.iloc[:5].to_csv(index=False)))
    assert back["name"].tolist() == expected[:5]
    assert back["difference"].dtype == np.float64 and back["difference"].tolist() == [-0.5, -1.0, 0.25, -1e-9, 0.0]


def test_csv_safe_frame_of_a_report_changes_only_hostile_text(report):
    frame = report.to_frame()
    safe = csv_safe_frame(frame)
    hyperlink = frame["candidate"] == '=HYPERLINK("x")'
    assert safe.loc[hyperlink, "candidate"].tolist() == ['\'=HYPERLINK("x")'] * 2
    pd.testing.assert_frame_equal(safe.loc[~hyperlink], frame.loc[~hyperlink])
    numeric = frame.select_dtypes("number").columns
    pd.testing.assert_frame_equal(safe[numeric], frame[numeric])


# -- plots -------------------------------------------------------------------------------------


@pytest.fixture
def saved_figures(monkeypatch):
    """Figures the plot functions save, kept for inspection after they close them."""
    figures = []
    original = matplotlib.figure.Figure.savefig

    def savefig(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return figures


def literal_texts(figure):
    """Every non-empty text of ``figure``, asserting that none is parsed as mathtext."""
    texts = [t for t in figure.findobj(matplotlib.text.Text) if t.get_text()]
    assert texts and all(t.get_parse_math() is False for t in texts)
    return [t.get_text() for t in texts]


def assert_png(path):
    data = path.read_bytes()
    assert len(data) > len(PNG_SIGNATURE) and data.startswith(PNG_SIGNATURE)


@pytest.mark.filterwarnings("ignore:Tight layout not applied")
def test_forest_plot_draws_names_as_plain_text(report, tmp_path, saved_figures):
    forest_plot(report, tmp_path / "forest.png")
    assert_png(tmp_path / "forest.png")
    (figure,) = saved_figures
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert labels == [f"{plot_label(c.candidate)} vs {plot_label(c.baseline)}\n{c.metric}" for c in report.comparisons]
    assert set(labels) <= set(literal_texts(figure))


def test_plot_labels_are_one_short_line_and_stay_distinct():
    assert plot_label("$x^2$") == "$x^2$" and plot_label("_under") == "_under"
    assert plot_label("line1\nline2\r\n| row |") == "line1\\nline2\\r\\n| row |"
    long_a, long_b = "M" * 300, "M" * 299 + "N"
    assert len(plot_label(long_a)) == len(plot_label(long_b)) == LABEL_WIDTH
    assert plot_label(long_a) != plot_label(long_b) and plot_label(long_a).startswith("M" * (LABEL_WIDTH - 7) + "…")


def test_seed_spread_plot_draws_names_seeds_and_metric_as_plain_text(spread, tmp_path, saved_figures):
    per_seed = pd.concat(
        [spread.per_seed_frame().assign(comparison=name) for name in ("_under", "$x^2$")], ignore_index=True
    )
    seed_spread_plot(per_seed, tmp_path / "seeds.png")
    assert_png(tmp_path / "seeds.png")
    (figure,) = saved_figures
    ax = figure.axes[0]
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["_under", "$x^2$"]
    assert ax.get_title() == HOSTILE_METRIC
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"${s}$" for s in range(5)]
    texts = literal_texts(figure)
    assert {"_under", "$x^2$", HOSTILE_METRIC, "$0$"} <= set(texts)


def test_meta_forest_plot_draws_dataset_names_as_plain_text(tmp_path, saved_figures):
    names = HOSTILE_NAMES[:4]
    meta = random_effects(dict(zip(names, [0.01, 0.03, -0.01, 0.02], strict=True)), dict.fromkeys(names, 0.01))
    meta_forest_plot(meta, tmp_path / "meta.png", title=HOSTILE_METRIC)
    assert_png(tmp_path / "meta.png")
    (figure,) = saved_figures
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert labels[:4] == [plot_label(n) for n in names] and labels[4].startswith("pooled (I² ")
    assert labels[5] == "prediction" and set(labels) | {HOSTILE_METRIC} <= set(literal_texts(figure))


def test_critical_difference_plot_draws_a_bar_per_group_and_names_as_plain_text(tmp_path, saved_figures):
    rng = np.random.default_rng(0)
    names = HOSTILE_NAMES[:5]
    scores = pd.DataFrame(rng.normal(size=(40, 5)) + 0.4 * np.arange(5), columns=names)
    ranks = rank_across_datasets(scores, posthoc="nemenyi")
    assert len(ranks.groups) >= 2
    critical_difference_plot(ranks, tmp_path / "cd.png")
    assert_png(tmp_path / "cd.png")
    (figure,) = saved_figures
    texts = literal_texts(figure)
    for model, rank in zip(ranks.models, ranks.average_ranks, strict=True):
        assert f"{plot_label(model)} ({rank:.2f})" in texts
    assert f"CD {ranks.critical_difference:.2f}" in texts
    bars = [line for line in figure.axes[0].get_lines() if line.get_linewidth() == 3]
    assert len(bars) == len(ranks.groups)
