"""Exports of a ComparisonReport: the LaTeX table, the text views, and the saved directory.

Expected values are computed here from the report's own columns, with an escape table and a marker rule
written independently of ``mlflow_recsys.report``.
"""

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import warnings

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.stats

from mlflow_recsys._digests import shorten
from mlflow_recsys.report._escaping import LATEX_CAPTION_WIDTH, LATEX_NAME_WIDTH, escape_latex
from mlflow_recsys.report._latex import report_latex
from mlflow_recsys.stats import ComparisonReport, ComparisonWarning, PairwiseComparison, compare_models
from mlflow_recsys.stats import _storage as storage
from simulated import result

HOSTILE = "a_b%&#$ {}~^\\"
HOSTILE_METRIC = "m_1%<x>|y"
NEWLINE_NAME = "two\nlines\r"

#: What each LaTeX special character must become, written out here rather than taken from the module.
EXPECTED_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "`": r"\textasciigrave{}",
    "'": r"\textquotesingle{}",
    '"': r"\UseTextSymbol{T1}{\textquotedbl}",
}
#: Characters that form a ligature with the next one of their kind (``--`` en dash, ``,,`` low quotes in T1).
LIGATURE_CHARACTERS = "-,"
SPECIALS = set("\\&%$#_{}~^`'\"")
ESCAPE_TOKEN = re.compile(
    r"\\(?:textbackslash|textasciitilde|textasciicircum|textless|textgreater|textbar|textasciigrave|textquotesingle)"
    r"\{\}|\\UseTextSymbol\{T1\}\{\\textquotedbl\}|\\[&%$#_{}]|[-,]\{\}"
)
PDFLATEX = shutil.which("pdflatex")
ADJUSTBOX = PDFLATEX is not None and bool(
    subprocess.run(["kpsewhich", "adjustbox.sty"], capture_output=True, text=True).stdout.strip()
)
needs_pdflatex = pytest.mark.skipif(
    not ADJUSTBOX, reason="needs pdflatex and adjustbox.sty (apt install texlive-latex-extra)"
)


def visible(name: str) -> str:
    """``name`` with each non-printable character written as its Python escape (``\\n``)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in name)


def expected_latex(name: str) -> str:
    text = visible(name)
    out = []
    for i, ch in enumerate(text):
        out.append(EXPECTED_ESCAPES.get(ch, ch))
        if ch in LIGATURE_CHARACTERS and (i + 1 == len(text) or text[i + 1] == ch):
            out.append("{}")
    return ("{}" if text[:1] in ("[", "*") else "") + "".join(out)  # else a row's \\ before it takes it as argument


def unescaped_specials(text: str) -> set[str]:
    """Special characters left in ``text`` once escapes and ``$...$`` math are removed: LaTeX would act on them."""
    rest = ESCAPE_TOKEN.sub("", text)
    rest = re.sub(r"\$[^$]*\$", "", rest)
    return set(rest) & SPECIALS


def expected_marker(p: float, alpha: float) -> str:
    if p <= alpha / 50:
        return "***"
    if p <= alpha / 5:
        return "**"
    if p <= alpha:
        return "*"
    return ""


def expected_p_text(p: float, mcse: float = 0.0) -> str:
    """Four decimals, or for a p-value estimated from resamples down to the decimal place of twice its Monte Carlo
    standard error (two at least); below 1e-4 in scientific notation."""
    if p < 1e-4:
        return f"{p:.2e}"
    decimals = 4 if mcse == 0 else min(4, max(2, math.ceil(-math.log10(2 * mcse))))
    return f"{p:.{decimals}f}"


def expected_p_latex(p: float, mcse: float = 0.0) -> str:
    if p >= 1e-4:
        return f"${expected_p_text(p, mcse)}$"
    mantissa, exponent = f"{p:.2e}".split("e")
    return f"${mantissa}\\times 10^{{{int(exponent)}}}$"


def quiet_compare(results, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        return compare_models(results, **kwargs)


def standardised(n, seed):
    """A fixed vector with mean exactly 0 (up to rounding) and SD (ddof=1) 1."""
    z = np.random.default_rng(seed).normal(size=n)
    z -= z.mean()
    return z / z.std(ddof=1)


@pytest.fixture(scope="module")
def marker_report():
    """Four candidates whose t-test p-values fall in each marker band: t = 1.0, 2.2, 3.0 and 6.0 on 200 users."""
    n, sd = 200, 0.1
    z = standardised(n, 0)
    base = np.full(n, 0.4)
    results = {"base": result({"ndcg@100": base, "recall@20": base})}
    for name, t in [("none", 1.0), ("one", 2.2), ("two", 3.0), ("three", 6.0)]:
        d = t * sd / np.sqrt(n) + sd * z
        results[name] = result({"ndcg@100": base + d, "recall@20": base + d[::-1] * 0.5})
    return quiet_compare(
        results, metrics=["ndcg@100", "recall@20"], reference="base", test_method="t", correction=None, n_resamples=999
    )


@pytest.fixture(scope="module")
def hostile_report():
    rng = np.random.default_rng(1)
    n = 80
    base = {HOSTILE_METRIC: rng.random(n), "ndcg@100": rng.random(n)}
    results = {"plain": result(base)}
    for k, name in enumerate([HOSTILE, NEWLINE_NAME]):
        results[name] = result({m: v + rng.normal(0.03 * (k + 1), 0.1, n) for m, v in base.items()})
    report = quiet_compare(
        results, metrics=[HOSTILE_METRIC, "ndcg@100"], reference="plain", n_resamples=999, primary=HOSTILE_METRIC
    )
    return seed_averaged(report, {HOSTILE: 3, NEWLINE_NAME: 2, "plain": 1})


def seed_averaged(report, seeds):
    """The report with each model's seed count set, as a seed-averaged comparison would have it."""
    return dataclasses.replace(
        report,
        comparisons=tuple(
            dataclasses.replace(c, baseline_seeds=seeds[c.baseline], candidate_seeds=seeds[c.candidate])
            for c in report.comparisons
        ),
    )


def table_rows(latex: str) -> list[list[str]]:
    body = latex.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
    lines = [line for line in body.split("\n") if line.strip()]
    assert all(line.endswith(" \\\\") for line in lines)
    return [[cell.strip() for cell in re.split(r"(?<!\\)&", line[: -len(" \\\\")])] for line in lines]


def compile_latex(tmp_path, body: str, *, preamble: str = "") -> str:
    """pdflatex's log for a plain article holding ``body``; fails the test on any LaTeX error."""
    source = (
        "\\documentclass{article}\n\\usepackage{booktabs,adjustbox}\n"
        + preamble
        + "\n\\begin{document}\n"
        + body
        + "\n\\end{document}\n"
    )
    (tmp_path / "doc.tex").write_text(source, encoding="utf-8")
    done = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert done.returncode == 0, log[-3000:]
    return log


def caption(latex: str) -> str:
    start = latex.index("\\caption{") + len("\\caption{")
    end = latex.index("}\n\\label{")
    return latex[start:end]


# -- LaTeX ---------------------------------------------------------------------------------------

NUMBER = r"-?\d+\.\d{4}"


def test_latex_is_a_narrow_booktabs_table_with_one_row_per_hypothesis(marker_report):
    latex = marker_report.to_latex()
    for rule in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert latex.count(rule) == 1
    lines = latex.split("\n")
    assert lines[0] == "% Needs \\usepackage{booktabs,adjustbox} in the preamble."
    assert lines[1] == "\\begin{table}" and "\\label{tab:comparison}" in latex
    assert (
        "\\small\n\\begin{adjustbox}{max totalsize={\\linewidth}{0.75\\textheight}}\n\\begin{tabular}{llrcrrr}\n"
        in latex
    )
    assert latex.endswith("\\end{tabular}\n\\end{adjustbox}\n\\end{table}\n")
    header = latex.split("\\toprule\n", 1)[1].split(" \\\\\n", 1)[0]
    assert header == "Metric & Comparison & Difference & 95\\% CI & $p$ & MDE & W/T/L"  # no correction: p
    rows = table_rows(latex)
    assert len(rows) == len(marker_report.comparisons)
    for row, c in zip(rows, marker_report.comparisons, strict=True):
        assert len(row) == 7
        assert row[:2] == [c.metric, f"{c.candidate} vs {c.baseline}"]
        assert re.fullmatch(rf"\${c.difference:.4f}(\^\{{\*+\}})?\$", row[2]), row[2]
        assert row[3] == f"$[{c.ci_low:.4f}, {c.ci_high:.4f}]$"
        assert row[5] == f"${c.mde:.4f}$" and row[6] == f"{c.wins}/{c.ties}/{c.losses}"
        # every number is in math mode, so a minus sign is a minus, not a hyphen
        assert all(cell.startswith("$") and cell.endswith("$") for cell in row[2:6])
    assert report_latex(marker_report, label="tab:x-1") == marker_report.to_latex(label="tab:x-1")


def test_latex_markers_follow_the_adjusted_p_value_and_alpha(marker_report):
    frame = marker_report.to_frame()
    rows = table_rows(marker_report.to_latex())
    found = []
    for row, p, level in zip(rows, frame["adjusted_p_value"], frame["confidence_level"], strict=True):
        match = re.fullmatch(rf"\$({NUMBER})(?:\^\{{(\*+)\}})?\$", row[2])
        assert match, row[2]
        found.append(match.group(2) or "")
        assert found[-1] == expected_marker(p, 1 - level)
    # the fixture reaches every level, so each threshold is exercised
    assert set(found) == {"", "*", "**", "***"}
    # and with no correction the single star is exactly the significant column
    assert [m != "" for m in found] == frame["significant"].tolist()


def test_latex_p_values_match_scipy_and_tiny_ones_use_powers_of_ten(marker_report):
    rows = table_rows(marker_report.to_latex())
    assert any(c.adjusted_p_value < 1e-4 for c in marker_report.comparisons)
    for row, c in zip(rows, marker_report.comparisons, strict=True):
        p = scipy.stats.ttest_1samp(c.unit_differences, 0.0).pvalue
        assert c.adjusted_p_value == pytest.approx(p, rel=1e-9)
        assert row[4] == expected_p_latex(c.adjusted_p_value, c.adjusted_p_value_mcse)


def test_latex_caption_states_test_b_level_correction_alpha_and_thresholds():
    rng = np.random.default_rng(5)
    base = rng.random(60)
    results = {
        "A": result({"m": base}),
        "B": result({"m": base + rng.normal(0.02, 0.1, 60)}),
        "C": result({"m": base + rng.normal(0.0, 0.1, 60)}),
    }
    # (settings, needles, alpha, alpha/5, alpha/50 as the caption must write them)
    cases = [
        (
            dict(),
            ["randomization test", "B = 9,999", "Holm", "2 hypotheses", "95\\%", "percentile"],
            "0.05",
            "0.01",
            "0.001",
        ),
        (
            dict(test_method="bootstrap", correction="bonferroni", confidence_level=0.9),
            ["bootstrap test", "B = 9,999 resamples", "Bonferroni", "90\\%"],
            "0.1",
            "0.02",
            "0.002",
        ),
        (dict(test_method="t", correction=None), ["t-test", "not adjusted"], "0.05", "0.01", "0.001"),
        (
            dict(test_method="wilcoxon", zero_method="pratt", interval_method="bca"),
            ["Wilcoxon signed-rank test", "zero differences ranked, then their ranks dropped", "BCa"],
            "0.05",
            "0.01",
            "0.001",
        ),
        (dict(alternative="greater"), ["one-sided", "candidate higher"], "0.05", "0.01", "0.001"),
        (dict(confidence_level=0.9875), ["98.75\\%"], "0.0125", "0.0025", "0.00025"),
        (dict(confidence_level=0.999, correction=None), ["99.9\\%"], "0.001", "0.0002", "2\\times 10^{-5}"),
    ]
    for kwargs, needles, alpha, two, three in cases:
        report = quiet_compare(results, metrics="m", reference="A", **kwargs)
        text = caption(report.to_latex())
        p = "$p" if kwargs.get("correction", "holm") is None else "adjusted $p"
        for needle in needles + [
            f"$\\alpha = {alpha}$",
            f"({p} \\le \\alpha$ is significant)",
            f"$^{{*}}$ {p} \\le {alpha}$",
            f"$^{{**}}$ {p} \\le {two}$",
            f"$^{{***}}$ {p} \\le {three}$",
            "W/T/L",
        ]:
            assert needle in text, (kwargs, needle)
        if p == "$p":
            assert "adjusted $p" not in text
        assert not re.search(r"\de[-+]?\d", text), text  # never Python's 2e-05
        if kwargs.get("test_method") in ("t", "wilcoxon"):
            # the test has no resamples; B appears once, for the bootstrap interval
            assert text.count("B = 9,999") == 1 and "sign patterns" not in text
        assert not unescaped_specials(text), text
        assert "seed" not in text


def test_latex_title_is_the_escaped_first_sentence_of_the_caption(marker_report):
    title = "One trained run per model (ELSA_2: seed 0, the lowest) -- 50% of 'runs'."
    text = caption(marker_report.to_latex(title=title))
    assert text.startswith(expected_latex(title) + " Paired comparison on 200 users")
    assert not unescaped_specials(text)
    assert caption(marker_report.to_latex()).startswith("Paired comparison")
    assert caption(marker_report.to_latex(title="")) == caption(marker_report.to_latex())
    with pytest.raises(TypeError, match="title: expected a string or None, found int"):
        marker_report.to_latex(title=3)


def test_latex_one_sided_interval_has_an_infinite_end():
    rng = np.random.default_rng(2)
    base = rng.random(50)
    results = {"A": result({"m": base}), "B": result({"m": base + rng.normal(0.05, 0.1, 50)})}
    greater = quiet_compare(results, metrics="m", reference="A", alternative="greater", n_resamples=999)
    less = quiet_compare(results, metrics="m", reference="A", alternative="less", n_resamples=999)
    (g,) = greater.comparisons
    (lo,) = less.comparisons
    assert table_rows(greater.to_latex())[0][3] == f"$[{g.ci_low:.4f}, \\infty)$"
    assert table_rows(less.to_latex())[0][3] == f"$(-\\infty, {lo.ci_high:.4f}]$"


def test_latex_escapes_hostile_names_everywhere(hostile_report):
    latex = hostile_report.to_latex()
    rows = table_rows(latex)
    assert len(rows) == len(hostile_report.comparisons)
    header = latex.split("\\toprule\n", 1)[1].split(" \\\\\n", 1)[0]
    assert header.split(" & ")[4] == "Adj.~$p$"
    for row, c in zip(rows, hostile_report.comparisons, strict=True):
        assert row[:2] == [expected_latex(c.metric), expected_latex(f"{c.candidate} vs {c.baseline}")]
        for cell in row:
            assert not unescaped_specials(cell), cell
        assert all(cell.startswith("$") and cell.endswith("$") for cell in row[2:6])
    assert any(c.ci_low < 0 for c in hostile_report.comparisons)  # minus signs in math mode, then
    text = caption(latex)
    assert not unescaped_specials(text), text
    # the primary metric (named by the family phrase) and the seed-averaged models appear escaped, never raw
    assert expected_latex(HOSTILE_METRIC) in text and HOSTILE_METRIC not in text
    assert f"{expected_latex(HOSTILE)}: 3 seeds" in text and f"{expected_latex(NEWLINE_NAME)}: 2 seeds" in text
    assert "plain: 1 seed;" in text and text.startswith("Seed-averaged over training seeds (")
    assert HOSTILE not in latex and NEWLINE_NAME not in latex and "\r" not in latex
    # every line of the table is a whole row (a name's line break is written as text)
    assert latex.count("\n") == 15 + len(rows)  # 11 lines before the rows, 4 after


def test_escape_latex_agrees_with_the_independent_table():
    texts = [
        HOSTILE,
        HOSTILE_METRIC,
        NEWLINE_NAME,
        "".join(EXPECTED_ESCAPES),
        "Ελληνικά ñ 007",
        "\\\\ ~ ^ ",
        "a--b---c-",
        "p,,q,",
        "x-y, z",
        'it\'s "q" `b`',
        "!`?` <<a>>",
    ]
    for text in texts:
        assert escape_latex(text) == expected_latex(text)
    assert escape_latex("a--b,,c-") == "a-{}-b,{},c-{}"
    assert escape_latex("sign-flip, two-sided") == "sign-flip, two-sided"  # prose stays readable


@needs_pdflatex
@pytest.mark.parametrize("encoding", ["", "\\usepackage[T1]{fontenc}"], ids=["OT1", "T1"])
def test_pdflatex_typesets_every_escape(encoding, tmp_path):
    names = [
        "a--b---c",
        "x''y``z",
        'q"uote"',
        "it's",
        "p,,q",
        "<<a>> |b|",
        "!`?`",
        HOSTILE,
        HOSTILE_METRIC,
        "ñandú-é",
        "end-",
        NEWLINE_NAME,
    ]
    lines = "\n\n".join(f"[{escape_latex(n)}]" for n in names)
    caption_text = " ".join(f"[{escape_latex(n)}]" for n in names)
    compile_latex(
        tmp_path,
        f"\\listoftables\n\\begin{{table}}\\caption{{{caption_text}}}\\end{{table}}\n{lines}",
        preamble=encoding,
    )
    if encoding and shutil.which("pdftotext"):  # T1 has every glyph, so the text comes back exactly
        extracted = subprocess.run(
            ["pdftotext", "-enc", "UTF-8", str(tmp_path / "doc.pdf"), "-"], capture_output=True, text=True, check=True
        ).stdout
        for name in names:
            assert f"[{visible(name)}]" in extracted.splitlines(), name


@needs_pdflatex
def test_a_realistic_table_fits_the_line_width(tmp_path):
    rng = np.random.default_rng(0)
    n = 500
    metrics = ["calibrated_recall@20", "ndcg@100", "recall@50", "mrr@100"]
    base = {m: rng.random(n) for m in metrics}
    results = {"EASE": result(base)}
    for name, shift in [("ELSA-large", -0.01), ("MultVAE_tuned", 0.02)]:
        results[name] = result({m: v + rng.normal(shift, 0.1, n) for m, v in base.items()})
    report = quiet_compare(results, metrics=metrics, reference="EASE", primary="ndcg@100", n_resamples=999)
    report = seed_averaged(report, {"EASE": 1, "ELSA-large": 3, "MultVAE_tuned": 5})
    latex = report.to_latex(title="One trained run per model (ELSA-large: seed 0, the lowest).")
    assert "textquotesingle" not in latex  # no apostrophe in the prose, which would print as a straight quote
    log = compile_latex(tmp_path, latex + "\n" + report.to_latex(label="tab:again"))
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log


def test_latex_cuts_names_and_words_too_long_for_tex():
    """TeX cannot set a box wider than 16,383pt (about 2,000 characters): a cell's name is cut to LATEX_NAME_WIDTH
    characters, and so is any longer word of a caption; distinct names stay distinct by their hashes."""
    long_a, long_b = "A" * 2500, "A" * 2499 + "B"
    results = {long_a: result({"m": np.linspace(0, 1, 40)}), long_b: result({"m": np.linspace(0.1, 1, 40)})}
    report = quiet_compare(results, metrics="m", reference=long_a, n_resamples=199)
    latex = report.to_latex(title="T" * 800 + " then words")
    body, caption_text = latex.split("\\midrule")[1], caption(latex)
    cells = [cell.strip() for cell in body.splitlines()[1].split(" & ")[1].split(" vs ")]
    assert [len(cell) for cell in cells] == [LATEX_NAME_WIDTH] * 2 and cells[0] != cells[1]
    assert cells[0] == escape_latex(shorten(long_b, LATEX_NAME_WIDTH)) and "A" * LATEX_NAME_WIDTH not in latex
    assert caption_text.startswith(shorten("T" * 800, LATEX_NAME_WIDTH) + " then words")
    assert escape_latex("x" * LATEX_NAME_WIDTH) == "x" * LATEX_NAME_WIDTH  # a word that fits is whole


@needs_pdflatex
def test_pdflatex_typesets_names_of_thousands_of_characters(tmp_path):
    long_a, long_b, key = "A" * 2500, "B c" * 1000, "m" * 3000  # one word too long for a box; many, for a cell
    results = {long_a: result({key: np.linspace(0, 1, 40)}), long_b: result({key: np.linspace(0.1, 1, 40)})}
    report = quiet_compare(results, metrics=key, reference=long_a, n_resamples=199)
    compile_latex(tmp_path, report.to_latex(title="T" * 3000))
    compile_latex(tmp_path, report.to_latex(title="a b " * 1500))  # words that fit, a caption too long for one line
    assert len(caption(report.to_latex(title="a b " * 1500))) < 2 * LATEX_CAPTION_WIDTH


def test_latex_refuses_a_bad_label_and_an_empty_report(marker_report):
    with pytest.raises(ValueError, match="label"):
        marker_report.to_latex(label="tab:{x}")
    with pytest.raises(ValueError, match="at least one hypothesis"):
        ComparisonReport(comparisons=(), correction=None, reference=None).to_latex()


# -- text ----------------------------------------------------------------------------------------


def pair(c) -> str:
    """``ELSA (3 seeds) vs EASE``: a side's seed count when it averages several."""
    sides = [
        visible(name) + (f" ({seeds} seeds)" if seeds > 1 else "")
        for name, seeds in ((c.candidate, c.candidate_seeds), (c.baseline, c.baseline_seeds))
    ]
    return " vs ".join(sides)


def test_str_is_a_settings_line_and_one_row_per_hypothesis(hostile_report, marker_report):
    for report in (hostile_report, marker_report):
        text = str(report)
        lines = text.split("\n")
        assert len(lines) == 2 + len(report.comparisons) == len(text.splitlines())
        assert "alpha = 0.05" in lines[0] and "bootstrap interval" in lines[0]
        assert lines[1].split()[:2] == ["metric", "candidate"]
        for line, c in zip(lines[2:], report.comparisons, strict=True):
            assert line.startswith(visible(c.metric))
            assert pair(c) in line
            assert expected_p_text(c.adjusted_p_value, c.adjusted_p_value_mcse) in line and c.direction in line
            assert f"{c.wins}/{c.ties}/{c.losses}" in line
    assert "two\\nlines\\r" in str(hostile_report)


def test_a_seed_averaged_report_says_so_first_in_every_view(hostile_report, marker_report):
    settings = str(hostile_report).split("\n")[0]
    assert settings.startswith("Seed-averaged over training seeds (")
    assert f"{visible(HOSTILE)}: 3 seeds" in settings and "plain: 1 seed" in settings
    assert repr(hostile_report) == (
        "<ComparisonReport (seed-averaged): 4 hypotheses, holm, families primary=2 secondary=2>"
    )
    for line, c in zip(hostile_report.summary().splitlines(), hostile_report.comparisons, strict=True):
        assert f"  {visible(c.candidate)} ({c.candidate_seeds} seeds) vs plain  " in line, line
    # a report of single trained runs mentions no seeds anywhere
    assert "seed" not in str(marker_report) + marker_report.summary() + repr(marker_report)


def test_text_alpha_has_the_digits_of_the_level():
    rng = np.random.default_rng(5)
    base = rng.random(60)
    results = {"A": result({"m": base}), "B": result({"m": base + rng.normal(0.02, 0.1, 60)})}
    for level, alpha in [(0.9875, "0.0125"), (0.9, "0.1"), (0.999, "0.001")]:
        report = quiet_compare(results, metrics="m", reference="A", confidence_level=level, n_resamples=999)
        assert str(report).split("\n")[0].endswith(f"; alpha = {alpha}")


def test_summary_has_one_line_per_hypothesis_with_its_adjusted_p(hostile_report, marker_report):
    for report in (hostile_report, marker_report):
        lines = report.summary().splitlines()
        assert len(lines) == len(report.comparisons)
        for line, c in zip(lines, report.comparisons, strict=True):
            assert pair(c) in line
            assert f"adj. p {expected_p_text(c.adjusted_p_value, c.adjusted_p_value_mcse)}" in line
            assert f"{c.difference:+.4f} [{c.ci_low:+.4f}, {c.ci_high:+.4f}]" in line
            assert f"W/T/L {c.wins}/{c.ties}/{c.losses}" in line and f"mde {c.mde:.4f}" in line
            assert c.direction in line


def test_repr_is_short(marker_report, hostile_report):
    assert repr(marker_report) == "<ComparisonReport: 8 hypotheses, no correction, families all=8>"
    single = seed_averaged(hostile_report, {HOSTILE: 1, NEWLINE_NAME: 1, "plain": 1})
    assert repr(single) == "<ComparisonReport: 4 hypotheses, holm, families primary=2 secondary=2>"


# -- save and load -------------------------------------------------------------------------------


def bits(x: float) -> int:
    return int(np.array(x, dtype=np.float64).view(np.uint64))


def assert_identical(saved: ComparisonReport, loaded: ComparisonReport) -> None:
    assert type(loaded) is ComparisonReport
    assert (loaded.correction, loaded.reference, loaded.primary) == (saved.correction, saved.reference, saved.primary)
    assert len(loaded.comparisons) == len(saved.comparisons)
    for a, b in zip(saved.comparisons, loaded.comparisons, strict=True):
        assert type(b) is PairwiseComparison
        for f in dataclasses.fields(PairwiseComparison):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if x is None:
                assert y is None, f.name
            elif isinstance(x, np.ndarray):
                assert isinstance(y, np.ndarray) and y.dtype == np.float64 and y.shape == x.shape, f.name
                assert np.array_equal(x.view(np.uint64), y.view(np.uint64)), f.name
            elif isinstance(x, (bool, np.bool_)):
                assert type(y) is bool and y == x, f.name
            elif isinstance(x, int):
                assert type(y) is int and y == x, f.name
            elif isinstance(x, float):
                assert type(y) is float and bits(y) == bits(x), (f.name, x, y)
            else:
                assert type(y) is str and y == x, f.name


def roundtrip_cases():
    rng = np.random.default_rng(9)
    n = 50
    base = rng.random(n)
    results = {
        "EASE": result({"ndcg@100": base, "recall@20": rng.random(n)}),
        "ELSA": result({"ndcg@100": base + rng.normal(0.01, 0.1, n), "recall@20": rng.random(n)}),
        HOSTILE: result({"ndcg@100": base + rng.normal(0.2, 0.1, n), "recall@20": rng.random(n)}),
    }
    both = dict(metrics=["ndcg@100", "recall@20"], n_resamples=999)
    small = {k: result({"m": v.per_user["ndcg@100"][:10]}) for k, v in results.items()}
    zero_base = {"zero": result({"m": np.zeros(n)}), "some": result({"m": rng.random(n)})}
    return {
        "randomization": (results, dict(reference="EASE", primary="ndcg@100", **both)),
        "exact": (small, dict(metrics="m", reference="EASE", n_resamples=9999)),
        "t": (results, dict(test_method="t", correction="bonferroni", **both)),
        "wilcoxon": (results, dict(test_method="wilcoxon", zero_method="zsplit", reference="ELSA", **both)),
        "bca": (results, dict(interval_method="bca", family="all", primary="recall@20", **both)),
        "greater": (results, dict(alternative="greater", reference="EASE", **both)),
        "less": (results, dict(alternative="less", reference="EASE", test_method="bootstrap", **both)),
        "random_state_none": (results, dict(random_state=None, correction=None, **both)),
        "random_state_huge": (results, dict(random_state=2**63 - 1, **both)),  # the largest seed; not a float64
        "nan_relative": (zero_base, dict(metrics="m", n_resamples=999)),
    }


@pytest.mark.parametrize("case", list(roundtrip_cases()))
def test_save_load_roundtrip_is_exact(case, tmp_path):
    results, kwargs = roundtrip_cases()[case]
    report = quiet_compare(results, **kwargs)
    if case == "exact":
        assert {c.test_method for c in report.comparisons} == {"randomization-exact"}
    if case in ("t", "wilcoxon"):
        assert all(c.null_distribution is None for c in report.comparisons)
    if case == "wilcoxon":
        assert {c.zero_method for c in report.comparisons} == {"zsplit"}
    if case in ("greater", "less"):
        assert all(np.isinf(c.ci_high if case == "greater" else c.ci_low) for c in report.comparisons)
    if case.startswith("random_state"):
        assert all(c.random_state == kwargs["random_state"] for c in report.comparisons)
    if case == "nan_relative":
        assert np.isnan(report.comparisons[0].relative_difference)
    saved = report.save(tmp_path / "report")
    assert saved == tmp_path / "report"
    assert sorted(os.listdir(saved)) == ["comparisons.parquet", "report.json"]
    loaded = ComparisonReport.load(saved)
    assert_identical(report, loaded)
    # what is loaded prints and exports as the original
    assert str(loaded) == str(report) and loaded.summary() == report.summary()
    assert loaded.to_latex() == report.to_latex() and loaded.to_markdown() == report.to_markdown()


def test_seed_averaged_counts_and_odd_floats_roundtrip(hostile_report, tmp_path):
    c = hostile_report.comparisons[0]
    odd_values = np.resize([-0.0, np.nan, np.inf, -np.inf, 5e-324], c.n_units)
    odd = dataclasses.replace(
        c, mde=float("nan"), ci_low=-0.0, bootstrap_standard_error=float("inf"), unit_differences=odd_values
    )
    report = dataclasses.replace(hostile_report, comparisons=(odd, *hostile_report.comparisons[1:]))
    assert report.seed_averaged
    storage.save_report(report, tmp_path / "r")
    loaded = storage.load_report(tmp_path / "r")
    assert_identical(report, loaded)
    assert loaded.seed_averaged
    assert [(x.baseline_seeds, x.candidate_seeds) for x in loaded.comparisons] == [(1, 3), (1, 3), (1, 2), (1, 2)]


def test_every_field_is_a_column_and_the_json_holds_the_report(hostile_report, tmp_path):
    path = hostile_report.save(tmp_path / "r")
    schema = pq.read_schema(path / "comparisons.parquet")
    assert schema.names == [f.name for f in dataclasses.fields(PairwiseComparison)]
    for name in ("unit_differences", "null_distribution", "bootstrap_distribution"):
        assert str(schema.field(name).type).startswith("list<") and str(schema.field(name).type.value_type) == "double"
    from mlflow_recsys import __version__

    meta = json.loads((path / "report.json").read_text())
    assert meta == {
        "format": "mlflow-recsys-comparison-report",
        "format_version": 1,
        "package_version": __version__,
        "correction": "holm",
        "reference": "plain",
        "primary": HOSTILE_METRIC,
        "n_hypotheses": 4,
    }


def test_saving_again_replaces_an_earlier_report(hostile_report, marker_report, tmp_path):
    path = tmp_path / "r"
    hostile_report.save(path)
    marker_report.save(path)
    assert_identical(marker_report, ComparisonReport.load(path))
    assert os.listdir(tmp_path) == ["r"]  # no temporary or old directory left beside it


def test_an_unserialisable_report_writes_nothing(hostile_report, tmp_path):
    bad = dataclasses.replace(hostile_report.comparisons[1], metric=object())
    report = dataclasses.replace(hostile_report, comparisons=(hostile_report.comparisons[0], bad))
    with pytest.raises(
        TypeError,
        match=r"report\.comparisons\[1\]\.metric: expected a value stored as string, "
        "found object",
    ):
        report.save(tmp_path / "r")
    texts = dataclasses.replace(hostile_report.comparisons[0], unit_differences=np.array(["a", "b"]))
    with pytest.raises(
        TypeError,
        match=r"report\.comparisons\[0\]\.unit_differences: expected a value stored as "
        r"list<item: double>, found ndarray",
    ):
        dataclasses.replace(hostile_report, comparisons=(texts,)).save(tmp_path / "r")
    assert os.listdir(tmp_path) == []


def test_a_failure_while_writing_leaves_no_partial_directory(hostile_report, marker_report, tmp_path, monkeypatch):
    def disk_full(self, data, encoding=None):
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(storage.Path, "write_text", disk_full)  # report.json, after the Parquet file
    with pytest.raises(OSError, match="No space left"):
        hostile_report.save(tmp_path / "new")
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    hostile_report.save(tmp_path / "old")
    monkeypatch.setattr(storage.Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        marker_report.save(tmp_path / "old")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["old"]
    assert_identical(hostile_report, ComparisonReport.load(tmp_path / "old"))


def test_refuses_to_overwrite_what_save_did_not_write(hostile_report, tmp_path):
    (tmp_path / "file").write_text("keep me")
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("keep me")
    hostile_report.save(tmp_path / "mixed")
    (tmp_path / "mixed" / "notes.txt").write_text("keep me")
    (tmp_path / "link").symlink_to(tmp_path / "other")
    for name in ("file", "empty", "other", "mixed", "link"):
        with pytest.raises(FileExistsError, match=re.escape(str(tmp_path / name))):
            hostile_report.save(tmp_path / name)
    assert (tmp_path / "file").read_text() == "keep me" and (tmp_path / "other" / "notes.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["empty", "file", "link", "mixed", "other"]
    assert sorted(os.listdir(tmp_path / "mixed")) == ["comparisons.parquet", "notes.txt", "report.json"]


def test_load_names_the_missing_file(hostile_report, tmp_path):
    with pytest.raises(FileNotFoundError):
        ComparisonReport.load(tmp_path / "absent")
    for name in ("report.json", "comparisons.parquet"):
        path = hostile_report.save(tmp_path / name.split(".")[0])
        (path / name).unlink()
        with pytest.raises(ValueError, match=re.escape(str(path / name))):
            ComparisonReport.load(path)
    (tmp_path / "plainfile").write_text("x")
    with pytest.raises(ValueError, match="found a file"):
        ComparisonReport.load(tmp_path / "plainfile")


def test_a_report_saved_before_a_column_existed_loads_with_its_default(hostile_report, tmp_path):
    # Reports saved before issue 32 have no effect-size or Monte Carlo error columns; a column without a default
    # (here `difference`) missing means a file this package did not write.
    import pyarrow.parquet as pq

    path = hostile_report.save(tmp_path / "old")
    table = pq.read_table(path / "comparisons.parquet")
    pq.write_table(table.drop_columns(["p_value_mcse", "effect_size_dz"]), path / "comparisons.parquet")
    loaded = ComparisonReport.load(path)
    assert [c.p_value_mcse for c in loaded.comparisons] == [0.0] * len(loaded.comparisons)
    assert all(math.isnan(c.effect_size_dz) for c in loaded.comparisons)
    assert [c.difference for c in loaded.comparisons] == [c.difference for c in hostile_report.comparisons]
    pq.write_table(table.drop_columns(["difference"]), path / "comparisons.parquet")
    with pytest.raises(ValueError, match=r"comparisons\.parquet: expected a column 'difference', found none"):
        ComparisonReport.load(path)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"format_version": 2}, "expected format_version 1, found 2"),
        ({"format_version": None}, "expected format_version 1, found None"),
        ({"format_version": True}, "expected format_version 1, found True"),
        ({"format_version": 1.0}, "expected format_version 1, found 1.0"),
        ({"format": "something-else"}, "expected format 'mlflow-recsys-comparison-report'"),
    ],
)
def test_load_refuses_an_unknown_report_json(hostile_report, tmp_path, change, message):
    path = hostile_report.save(tmp_path / "r")
    meta = json.loads((path / "report.json").read_text())
    meta.update(change)
    (path / "report.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=re.escape(message)):
        ComparisonReport.load(path)
    (path / "report.json").write_text("{not json")
    with pytest.raises(ValueError, match="report.json: expected JSON"):
        ComparisonReport.load(path)


def test_load_lets_an_unreadable_file_raise_os_error(hostile_report, tmp_path, monkeypatch):
    path = hostile_report.save(tmp_path / "r")

    def denied(file, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    # as a user without read permission would see it (chmod does not stop root, who may run this)
    monkeypatch.setattr(storage.Path, "read_bytes", denied)
    with pytest.raises(PermissionError, match="report.json"):
        ComparisonReport.load(path)
    monkeypatch.undo()
    monkeypatch.setattr(storage, "open", denied, raising=False)
    with pytest.raises(PermissionError, match="comparisons.parquet"):
        ComparisonReport.load(path)


def test_save_names_a_missing_or_non_directory_parent_and_makes_nothing(hostile_report, tmp_path):
    missing = tmp_path / "absent" / "deeper"
    with pytest.raises(FileNotFoundError, match=re.escape(f"its parent {str(missing)!r}")):
        hostile_report.save(missing / "report")
    (tmp_path / "file").write_text("keep me")
    with pytest.raises(NotADirectoryError, match=re.escape(f"its parent {str(tmp_path / 'file')!r}")):
        hostile_report.save(tmp_path / "file" / "report")
    assert os.listdir(tmp_path) == ["file"] and (tmp_path / "file").read_text() == "keep me"
