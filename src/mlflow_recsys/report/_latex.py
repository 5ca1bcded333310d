"""A :class:`~mlflow_recsys.stats.ComparisonReport` as a booktabs LaTeX table; its exploratory slices and its global
metrics (coverage, Gini) as one more table each.

The formatting functions compute nothing a reader could not recompute from the report's columns. Model names and metric
keys are user input: the table passes every one of them, in cells and caption alike, through
:func:`~mlflow_recsys.report.escape_latex`, so a name can neither run LaTeX commands nor break a line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mlflow_recsys.report._escaping import LATEX_CAPTION_WIDTH, escape_latex, latex_cell
from mlflow_recsys.report._global_metrics import GLOBAL_NOTE, global_cells
from mlflow_recsys.report._rows import NO_MDE, format_level, interval_level, row_cells
from mlflow_recsys.report._slices import CAVEAT, SliceCells, slice_cells
from mlflow_recsys.report._text import no_mde_note, settings_text
from mlflow_recsys.stats._comparison import ComparisonReport
from mlflow_recsys.stats._exposure import ExposureAnalysis
from mlflow_recsys.stats._slices import SliceAnalysis

__all__ = ["LATEX_PREAMBLE", "MARKERS", "global_latex", "report_latex", "significance_marker", "slices_latex"]

#: The packages the LaTeX table needs; :func:`report_latex` writes this line as a comment above it.
LATEX_PREAMBLE = r"\usepackage{booktabs,adjustbox}"

#: Significance markers: (symbol, divisor of alpha), strictest first. ``***`` when the adjusted p-value is at most
#: alpha/50, ``**`` at most alpha/5, ``*`` at most alpha (0.001, 0.01, 0.05 for alpha = 0.05).
MARKERS = (("***", 50), ("**", 5), ("*", 1))

_LABEL = re.compile(r"[A-Za-z0-9:._-]+")
_EXPONENT = re.compile(r"e([-+][0-9]+)")


def report_latex(report: ComparisonReport, *, label: str = "tab:comparison", title: str | None = None) -> str:
    r"""The report as a booktabs table in a floating ``table`` environment, with a caption stating the settings.

    One row per hypothesis, in the report's order, with seven columns: the metric, ``candidate vs baseline``, the
    difference (candidate minus baseline) with its significance marker, the interval, the adjusted p-value (headed
    ``$p$`` when the report has no correction), the mde and W/T/L. Numbers are in math mode, with four decimals and true
    minus signs; a one-sided interval has ``\infty`` as its open end; a p-value below 0.0001 is written as ``m\times
    10^{e}``. The marker (:data:`MARKERS`) is set by the adjusted p-value: ``^{*}`` at most alpha, ``^{**}`` at most
    alpha/5, ``^{***}`` at most alpha/50. The caption starts with ``title`` and names, in words and numbers, the
    test(s), B, the interval's level and method, the correction and its families, alpha, the marker thresholds and, for
    a seed-averaged report, each model's number of training seeds.

    The table is set ``\small`` inside ``\begin{adjustbox}{max totalsize={\linewidth}{0.75\textheight}}``, which
    shrinks it to the line width when it is wider, and to the page when it is taller (a slice of many strata), and
    leaves it as it is otherwise, so the preamble needs :data:`LATEX_PREAMBLE`,
    ``\usepackage{booktabs,adjustbox}``; the source's first line is a comment saying so. Names, metric keys and
    ``title`` pass through :func:`escape_latex` wherever they appear, caption included; they pass Greek, Cyrillic and
    CJK characters and emoji unchanged, which pdflatex cannot typeset without extra packages (see there).

    A report with slices gets a table of them after the first, :func:`slices_latex` labelled ``<label>-slices``, and
    one with global metrics a table of those last, :func:`global_latex` labelled ``<label>-global``.

    Parameters
    ----------
    report:
        A report with at least one hypothesis.
    label:
        The ``\label`` of the table, default ``"tab:comparison"``: letters, digits and ``: . _ -`` only.
    title:
        The caption's first sentence, as plain text (it is escaped), e.g. ``"One trained run per model (ELSA: seed 0,
        the lowest)."``; ``None`` (default) for none.

    Returns
    -------
    str
        LaTeX source: the comment line, then ``\begin{table}`` to ``\end{table}`` (once more with slices, and with
        global metrics), ending in a newline.

    Raises
    ------
    ValueError
        If the report holds no hypothesis or ``label`` holds other characters.
    TypeError
        If ``report`` is not a ComparisonReport or ``title`` is neither a string nor ``None``.
    """
    if not isinstance(report, ComparisonReport):
        raise TypeError(f"report: expected a ComparisonReport, found {type(report).__name__}")
    if not report.comparisons:
        raise ValueError("report: expected at least one hypothesis, found none")
    _check_label(label)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title: expected a string or None, found {type(title).__name__}")
    header = [
        "Metric",
        "Comparison",
        "Difference",
        f"{format_level(interval_level(report.comparisons[0]))[:-1]}\\% CI",
        "$p$" if report.correction is None else "Adj.~$p$",
        "MDE",
        "W/T/L",
    ]
    rows = []
    for c in report.comparisons:
        r, marker = row_cells(c, signed=False), significance_marker(c.adjusted_p_value, c.alpha)
        difference = _tex(r.difference) + (f"^{{{marker}}}" if marker else "")
        cells = [f"${cell}$" for cell in (difference, _tex(r.interval), _tex(r.adjusted_p), _tex(r.mde))]
        rows.append([latex_cell(r.metric), _pair_cell(r.candidate, r.baseline), *cells, r.wtl])
    lines = [" & ".join(cells) + r" \\" for cells in [header, *rows]]
    table = _booktabs(_latex_caption(report, title), label, "llrcrrr", lines)
    sliced = "" if report.slices is None else slices_latex(report.slices, label=f"{label}-slices")
    exposure = "" if report.global_metrics is None else global_latex(report.global_metrics, label=f"{label}-global")
    return "\n".join([f"% Needs {LATEX_PREAMBLE} in the preamble.", *table, ""]) + sliced + exposure


def _check_label(label: object) -> None:
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise ValueError(f"label: expected letters, digits and ':._-' only, found {label!r}")


def _header(template: tuple[str, ...], rows: Sequence) -> list[str]:
    """A table's column heads, ``{level}`` filled in from the first row's ``confidence_level`` (empty without rows)."""
    level = format_level(rows[0].confidence_level)[:-1] if rows else ""
    return [h.format(level=level) for h in template]


def _booktabs(caption: str, label: str, columns: str, lines: list[str]) -> list[str]:
    """A floating booktabs table set ``\\small`` and shrunk to the line width when wider and to the page when taller
    (a float taller than the page runs off it): ``lines`` are the header row, then the body."""
    return [
        r"\begin{table}",
        r"\centering",
        f"\\caption{{{caption}}}",
        f"\\label{{{label}}}",
        r"\small",
        r"\begin{adjustbox}{max totalsize={\linewidth}{0.75\textheight}}",
        f"\\begin{{tabular}}{{{columns}}}",
        r"\toprule",
        lines[0],
        r"\midrule",
        *lines[1:],
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{adjustbox}",
        r"\end{table}",
    ]


#: Headers of the slices table, in order; ``{level}`` is the interval's.
_SLICE_HEADER = ("Stratum", "Metric", "Comparison", "Users", "Difference", "{level}\\% CI", "Holm $p$", "W/T/L", "$Q$",
                "$p_Q$", "$I^2$")  # fmt: skip


def slices_latex(analysis: SliceAnalysis, *, label: str = "tab:slices") -> str:
    r"""The exploratory slices as a booktabs table of their own, whose caption opens with the caveat
    (:data:`~mlflow_recsys.report._slices.CAVEAT`) and gives each slice's definition.

    Each slice is a group of rows under its name (set in italics across the table), groups separated by a rule; a row
    is one (stratum, metric, pair) with the stratum's users, the difference, its interval, the Holm-adjusted p-value
    within the slice, W/T/L, and the slice's Cochran's Q, its p-value and I² for that pair and metric. The differences
    carry no significance markers: the strata are explored, not tested as the primary hypotheses are. Numbers are in
    math mode as in :func:`report_latex`, and every slice name, definition, stratum, metric and model passes through
    :func:`escape_latex`. The preamble needs :data:`LATEX_PREAMBLE`. More than :data:`LATEX_ROWS_PER_TABLE` rows
    continue in further tables, labelled ``<label>-2``, ``<label>-3``, ..., each captioned as a continuation, with
    the slice's name repeated over the rows that go on with it.

    Parameters
    ----------
    analysis:
        The report's ``slices``.
    label:
        The ``\label`` of the table (letters, digits and ``: . _ -``); :func:`report_latex` gives ``<label>-slices``.

    Returns
    -------
    str
        ``\begin{table}`` to ``\end{table}`` (once per part), ending in a newline.

    Raises
    ------
    ValueError
        If ``label`` holds other characters.
    """
    _check_label(label)
    header = _header(_SLICE_HEADER, analysis.strata)
    cells = slice_cells(analysis)
    defined = "; ".join(f"{name}: {text}" for name, text in analysis.definitions.items())
    caption = escape_latex(
        f"{CAVEAT} Slices: {defined}. Difference = candidate - baseline, mean over the users of the stratum; "
        "W/T/L = users on which the candidate scored higher/equal/lower; Q, its p-value and I-squared belong to the "
        "slice, pair and metric, and repeat on each of its strata.",
        width=LATEX_CAPTION_WIDTH,
    )
    parts = _slice_parts(analysis, cells, len(header))
    tables = []
    for k, part in enumerate(parts):
        text = caption if k == 0 else f"Exploratory slices, continued (part {k + 1} of {len(parts)})."
        tables += _booktabs(
            text, label if k == 0 else f"{label}-{k + 1}", "lllrrcrrrrr", [" & ".join(header) + r" \\", *part]
        )
    return "\n".join([*tables, ""])


#: Most stratum rows in one LaTeX table: a longer slice table continues in another, so each fits a page at its size
#: (TeX cannot even shrink a box taller than 16,383pt, about 1,400 rows).
LATEX_ROWS_PER_TABLE = 40


def _slice_parts(analysis: SliceAnalysis, cells: list[SliceCells], width: int) -> list[list[str]]:
    """The slice table's body lines in parts of at most :data:`LATEX_ROWS_PER_TABLE` stratum rows: each slice's rows
    under its name (repeated, "continued", at the top of a part that goes on with it), slices apart by a rule."""
    parts: list[list[str]] = [[]]
    rows_in_part = 0
    for name in analysis.definitions:
        rows = [" & ".join(_slice_row(r)) + r" \\" for r in cells if r.slice == name]
        for start in range(0, len(rows), LATEX_ROWS_PER_TABLE):
            chunk = rows[start : start + LATEX_ROWS_PER_TABLE]
            if rows_in_part and rows_in_part + len(chunk) > LATEX_ROWS_PER_TABLE:
                parts.append([])
                rows_in_part = 0
            title = f"\\emph{{{latex_cell(name)}}}" + (" (continued)" if start else "")
            parts[-1] += [r"\midrule"] if parts[-1] else []
            parts[-1] += [f"\\multicolumn{{{width}}}{{l}}{{{title}}} \\\\", *chunk]
            rows_in_part += len(chunk)
    return parts


def _slice_row(r: SliceCells) -> list[str]:
    """The cells of one stratum row: names escaped, numbers in math mode."""
    numbers = (r.difference, r.interval, r.holm_p)
    heterogeneity = (r.q, r.q_p, r.i_squared.replace("%", r"\%"))
    return [
        latex_cell(r.stratum),
        latex_cell(r.metric),
        _pair_cell(r.candidate, r.baseline),
        r.users,
        *(f"${_tex(cell)}$" for cell in numbers),
        r.wtl,
        *(f"${_tex(cell)}$" for cell in heterogeneity),
    ]


#: Headers of the global metrics' table, in order; ``{level}`` is the interval's.
_GLOBAL_HEADER = ("Metric", "Comparison", "Users", "Baseline", "Candidate", "Difference", "{level}\\% CI", "$p$",
                 "Holm $p$", "Bootstrap bias")  # fmt: skip


def global_latex(analysis: ExposureAnalysis, *, label: str = "tab:global") -> str:
    r"""The global metrics (catalogue coverage, Gini index of exposure) as a booktabs table of their own, captioned by
    :data:`~mlflow_recsys.report._global_metrics.GLOBAL_NOTE`.

    One row per (metric, pair), with the cells of the text and HTML renderings
    (:func:`~mlflow_recsys.report._global_metrics.global_cells`): users, each model's value, the difference, its
    recentred bootstrap interval, p from swapping lists, Holm's p within these rows and the bootstrap bias. Numbers
    are in math mode as in :func:`report_latex`, without significance markers (a family of its own); metric keys and
    model names pass through :func:`escape_latex`. The preamble needs :data:`LATEX_PREAMBLE`.

    ``analysis`` is the report's ``global_metrics``; ``label`` the table's ``\label`` (letters, digits and
    ``: . _ -``; :func:`report_latex` gives ``<label>-global``). Returns ``\begin{table}`` to ``\end{table}``, ending in
    a newline; ValueError if ``label`` holds other characters.
    """
    _check_label(label)
    header = _header(_GLOBAL_HEADER, analysis.comparisons)
    rows = [
        [
            latex_cell(c.metric),
            _pair_cell(c.candidate, c.baseline),
            c.users,
            *(f"${_tex(cell)}$" for cell in (c.baseline_value, c.candidate_value, c.difference, c.interval)),
            *(f"${_tex(cell)}$" for cell in (c.p, c.holm_p, c.bias)),
        ]
        for c in global_cells(analysis)
    ]
    lines = [" & ".join(cells) + r" \\" for cells in [header, *rows]]
    return "\n".join([*_booktabs(escape_latex(GLOBAL_NOTE), label, "llrrrrcrrr", lines), ""])


def significance_marker(adjusted_p: float, alpha: float) -> str:
    """``"***"``, ``"**"``, ``"*"`` or ``""`` for an adjusted p-value at significance level ``alpha``.

    Parameters
    ----------
    adjusted_p:
        The hypothesis' adjusted p-value, in [0, 1].
    alpha:
        The significance level, :attr:`PairwiseComparison.alpha`.

    Returns
    -------
    str
        ``"***"`` when ``adjusted_p <= alpha / 50``, ``"**"`` when ``<= alpha / 5``, ``"*"`` when ``<= alpha`` (the
        hypothesis is significant), else ``""`` (also for NaN).
    """
    for symbol, divisor in MARKERS:
        if adjusted_p <= alpha / divisor:
            return symbol
    return ""


def _latex_caption(report: ComparisonReport, title: str | None) -> str:
    alpha, note = report.comparisons[0].alpha, no_mde_note(report)
    plain = " ".join([*([title] if title else []), f"{settings_text(report)}.", *([note] if note else [])])
    p = "$p" if report.correction is None else "adjusted $p"
    thresholds = ", ".join(
        f"$^{{{symbol}}}$ {p} \\le {_tex(f'{alpha / divisor:.6g}')}$" for symbol, divisor in reversed(MARKERS)
    )
    return (
        escape_latex(plain, width=LATEX_CAPTION_WIDTH)
        + f" Significance level $\\alpha = {_tex(f'{alpha:.6g}')}$ ({p} \\le \\alpha$ is significant);"
        + f" markers: {thresholds}."
    )


def _pair_cell(candidate: str, baseline: str) -> str:
    return f"{latex_cell(candidate)} vs {latex_cell(baseline)}"


def _tex(cell: str) -> str:
    """A cell of :func:`~mlflow_recsys.report._rows.row_cells` (or a float as Python writes it) as LaTeX math:
    ``1.23e-05`` as ``1.23\\times 10^{-5}``, ``inf`` as ``\\infty``, ``n/a`` upright."""
    cell = _EXPONENT.sub(lambda m: f"\\times 10^{{{int(m.group(1))}}}", cell)
    return cell.replace("inf", r"\infty").replace(NO_MDE, r"\mathrm{n/a}")
