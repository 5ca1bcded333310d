"""A :class:`~mlflow_recsys.stats.ComparisonReport` as a LaTeX table, as text, and as a saved copy on disk.

The formatting functions compute nothing a reader could not recompute from the
report's columns. Model names and metric keys are user input: the LaTeX table
passes every one of them, in cells and caption alike, through
:func:`escape_latex`; the text views write control characters as visible
escapes (:func:`~mlflow_recsys.report.text.visible_text`), so a name can
neither run LaTeX commands nor break a line.

A saved report is a directory of two files: ``comparisons.parquet``, one row
per hypothesis holding every field of
:class:`~mlflow_recsys.stats.PairwiseComparison` (the resampling replicates as
``list<double>`` columns), and ``report.json``, the report-wide fields with a
format name and version. :func:`load_report` gives back a report equal to the
saved one field by field, floats bit for bit, and refuses a file whose values
no report could hold.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mlflow_recsys._atomic import current_umask
from mlflow_recsys.stats.comparison import (
    ALTERNATIVES,
    INTERVAL_METHODS,
    TEST_METHODS,
    ZERO_METHODS,
    ComparisonReport,
    PairwiseComparison,
)
from mlflow_recsys.stats.corrections import CORRECTIONS
from mlflow_recsys.stats.power import REPORT_POWER
from mlflow_recsys.report.text import CORRECTION_NAMES, _format_p, _hypotheses, family_phrase, visible_text

#: File of a saved report holding one row per hypothesis.
COMPARISONS_FILE = "comparisons.parquet"
#: File of a saved report holding the report-wide fields, the format and the package version.
REPORT_FILE = "report.json"
#: The ``format`` field of ``report.json``.
FORMAT = "mlflow-recsys-comparison-report"
#: The ``format_version`` this module writes and the only one it reads.
FORMAT_VERSION = 1

#: The packages the LaTeX table needs; :func:`report_latex` writes this line as a comment above it.
LATEX_PREAMBLE = r"\usepackage{booktabs,adjustbox}"

#: Significance markers: (symbol, divisor of alpha), strictest first. ``***`` when the adjusted p-value is at most
#: alpha/50, ``**`` at most alpha/5, ``*`` at most alpha (0.001, 0.01, 0.05 for alpha = 0.05).
MARKERS = (("***", 50), ("**", 5), ("*", 1))

#: Characters LaTeX reads as commands, ligatures or other glyphs, and what stands for each of them literally. The
#: text commands end in ``{}`` so that a following space or letter is kept. ``<``, ``>``, ``|`` and ``"`` print
#: other glyphs in the default (OT1) font encoding, ``'`` and a backtick print curly quotes, and ``<<``, ``>>``,
#: ``!``` and ``?``` are ligatures. ``\textquotedbl`` exists only in T1, so ``"`` is taken from T1 whatever the
#: document's encoding (``\UseTextSymbol``); every escape here compiles with and without ``\usepackage[T1]{fontenc}``.
_LATEX_ESCAPES = str.maketrans(
    {
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
)
#: A hyphen or comma that another one follows (``--`` is an en dash, ``,,`` a low quote in T1) or that ends the
#: text (the next piece of source may start with one): it gets ``{}``, which breaks the ligature.
_LIGATURE_START = re.compile(r"-(?=-|\Z)|,(?=,|\Z)")

_LABEL = re.compile(r"[A-Za-z0-9:._-]+")

_TEST_WORDS = {
    "randomization": "paired sign-flip randomization test (B = {B:,} random sign patterns)",
    "randomization-exact": "exact paired sign-flip randomization test (all sign patterns enumerated)",
    "bootstrap": "paired null-centred bootstrap test (B = {B:,} resamples)",
    "t": "paired t-test",
    "wilcoxon": "Wilcoxon signed-rank test (zero_method={zero_method}: {zero_words})",
}

_ZERO_WORDS = {
    "wilcox": "zero differences dropped before ranking",
    "pratt": "zero differences ranked, then their ranks dropped",
    "zsplit": "ranks of zero differences split between the signs",
}

_SIDES = {
    "two-sided": "two-sided",
    "greater": "one-sided, alternative: candidate better",
    "less": "one-sided, alternative: candidate worse",
}



def escape_latex(text: object) -> str:
    """``text`` as LaTeX source that typesets as exactly ``text``, on one line.

    Control characters (line breaks, tabs) are first written as visible
    escapes (:func:`~mlflow_recsys.report.text.visible_text`); then each of
    ``\\ & % $ # _ { } ~ ^ < > |`` and the quotes ``` ' "`` is replaced by
    its escape (``\\&``, ``\\textbackslash{}``, ``\\textquotesingle{}``, ...),
    and a ``-`` or ``,`` followed by another (or ending the text) gets ``{}``,
    so ``--`` stays two hyphens instead of an en dash. Every escape compiles
    with pdflatex in the default (OT1) and the T1 font encoding; ``"`` is
    ``\\UseTextSymbol{T1}{\\textquotedbl}``, the straight quote of the T1 font,
    because OT1 has none. Other characters, non-ASCII letters included, pass
    unchanged: pdflatex typesets Latin letters with accents (``é``, ``ñ``),
    but stops with "Unicode character ... not set up for use with LaTeX" at
    Greek or Cyrillic letters (they need their font encodings, e.g.
    ``\\usepackage[LGR,T2A,T1]{fontenc}``), CJK characters (``CJKutf8``) or
    emoji; xelatex or lualatex with a font that has them typesets them all.
    Non-strings are formatted with ``str`` first.

    Parameters
    ----------
    text:
        Any object; usually a model name or a metric key.

    Returns
    -------
    str
        E.g. ``escape_latex("a_b 50%")`` is ``"a\\_b 50\\%"`` and
        ``escape_latex("x--y")`` is ``"x-{}-y"``.
    """
    escaped = visible_text(text).translate(_LATEX_ESCAPES)
    return _LIGATURE_START.sub(lambda m: m.group() + "{}", escaped)


# -- LaTeX -----------------------------------------------------------------------------------------


def report_latex(report: ComparisonReport, *, label: str = "tab:comparison", title: str | None = None) -> str:
    r"""The report as a booktabs table in a floating ``table`` environment, with a caption stating the settings.

    One row per hypothesis, in the report's order, with seven columns: the
    metric, ``candidate vs baseline``, the difference (candidate minus
    baseline) with its significance marker, the interval, the adjusted
    p-value (headed ``$p$`` when the report has no correction), the mde and
    W/T/L. Numbers are in math mode, with four decimals and true minus
    signs; a one-sided interval has ``\infty`` as its open end; a p-value
    below 0.0001 is written as ``m\times 10^{e}``. The marker
    (:data:`MARKERS`) is set by the adjusted p-value: ``^{*}`` at most alpha,
    ``^{**}`` at most alpha/5, ``^{***}`` at most alpha/50. The caption
    starts with ``title`` and names, in words and numbers, the test(s), B, the
    interval's level and method, the correction and its families, alpha, the
    marker thresholds and, for a seed-averaged report, each model's number of
    training seeds.

    The table is set ``\small`` inside ``\begin{adjustbox}{max width=\linewidth}``,
    which shrinks it to the line width when it is wider and leaves it as it is
    otherwise, so the preamble needs :data:`LATEX_PREAMBLE`,
    ``\usepackage{booktabs,adjustbox}``; the source's first line is a comment
    saying so. Names, metric keys and ``title`` pass through
    :func:`escape_latex` wherever they appear, caption included; they pass
    Greek, Cyrillic and CJK characters and emoji unchanged, which pdflatex
    cannot typeset without extra packages (see there).

    Parameters
    ----------
    report:
        A report with at least one hypothesis.
    label:
        The ``\label`` of the table, default ``"tab:comparison"``: letters,
        digits and ``: . _ -`` only.
    title:
        The caption's first sentence, as plain text (it is escaped), e.g.
        ``"One trained run per model (ELSA: seed 0, the lowest)."``; ``None``
        (default) for none.

    Returns
    -------
    str
        LaTeX source: the comment line, then ``\begin{table}`` to
        ``\end{table}``, ending in a newline.

    Raises
    ------
    ValueError
        If the report holds no hypothesis or ``label`` holds other characters.
    TypeError
        If ``report`` is not a ComparisonReport or ``title`` is neither a string nor ``None``.
    """
    _nonempty_iv(report)
    if not isinstance(label, str) or not _LABEL.fullmatch(label):
        raise ValueError(f"label: expected letters, digits and ':._-' only, found {label!r}")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title: expected a string or None, found {type(title).__name__}")
    header = ["Metric", "Comparison", "Difference", f"{_percent(report.comparisons[0].confidence_level)}\\% CI",
              "$p$" if report.correction is None else "Adj.~$p$", "MDE", "W/T/L"]
    rows = [
        [
            escape_latex(c.metric),
            escape_latex(f"{c.candidate} vs {c.baseline}"),
            _latex_difference(c),
            _latex_interval(c),
            _latex_p(c.adjusted_p_value),
            f"${_tex_number(c.mde)}$",
            f"{c.wins}/{c.ties}/{c.losses}",
        ]
        for c in report.comparisons
    ]
    lines = [" & ".join(cells) + r" \\" for cells in [header, *rows]]
    return "\n".join([
        f"% Needs {LATEX_PREAMBLE} in the preamble.", r"\begin{table}", r"\centering",
        f"\\caption{{{_latex_caption(report, title)}}}", f"\\label{{{label}}}", r"\small",
        r"\begin{adjustbox}{max width=\linewidth}", r"\begin{tabular}{llrcrrr}", r"\toprule", lines[0], r"\midrule",
        *lines[1:], r"\bottomrule", r"\end{tabular}", r"\end{adjustbox}", r"\end{table}", "",
    ])


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
        ``"***"`` when ``adjusted_p <= alpha / 50``, ``"**"`` when ``<= alpha /
        5``, ``"*"`` when ``<= alpha`` (the hypothesis is significant), else
        ``""`` (also for NaN).
    """
    for symbol, divisor in MARKERS:
        if adjusted_p <= alpha / divisor:
            return symbol
    return ""


def _latex_caption(report: ComparisonReport, title: str | None) -> str:
    first = report.comparisons[0]
    plain = " ".join(
        [
            *([title] if title else []),
            f"Paired comparison on {_users(report)}: difference = candidate mean minus baseline mean.",
            f"Interval: {_percent(first.confidence_level)}% paired {_interval_words(report)} bootstrap interval "
            f"from B = {first.n_resamples:,} bootstrap replicates over users.",
            f"Test: {_test_words(report)}, {_SIDES.get(first.alternative, first.alternative)}.",
            f"Correction: {_correction_words(report)}.",
        ]
    )
    if report.seed_averaged:
        plain += (
            " The per-user values of each model were averaged over its training seeds before the differences "
            f"were formed ({_seed_counts(report)})."
        )
    plain += (
        " W/T/L: users on which the candidate scored higher/equal/lower. MDE: the smallest true difference "
        f"detected with {REPORT_POWER:.0%} power at the level its hypothesis is tested at."
    )
    p = "$p" if report.correction is None else "adjusted $p"
    thresholds = ", ".join(
        f"$^{{{symbol}}}$ {p} \\le {_tex_float(f'{first.alpha / divisor:.6g}')}$"
        for symbol, divisor in reversed(MARKERS)
    )
    return (
        escape_latex(plain)
        + f" Significance level $\\alpha = {_tex_float(f'{first.alpha:.6g}')}$ ({p} \\le \\alpha$ is significant);"
        + f" markers: {thresholds}."
    )


def _tex_number(value: float) -> str:
    """``value`` with four decimals, inside math mode (``\\infty`` for infinities, n/a for NaN)."""
    if math.isnan(value):
        return r"\mathrm{n/a}"
    if math.isinf(value):
        return r"\infty" if value > 0 else r"-\infty"
    return f"{value:.4f}"


def _tex_float(text: str) -> str:
    """A float as Python formats it, ``2e-05`` or ``1.23e-05`` included, as LaTeX math: ``2\\times 10^{-5}``."""
    mantissa, _, exponent = text.partition("e")
    return mantissa + (f"\\times 10^{{{int(exponent)}}}" if exponent else "")


def _latex_difference(c: PairwiseComparison) -> str:
    marker = significance_marker(c.adjusted_p_value, c.alpha)
    return f"${_tex_number(c.difference)}" + (f"^{{{marker}}}" if marker else "") + "$"


def _latex_interval(c: PairwiseComparison) -> str:
    low, high = _tex_number(c.ci_low), _tex_number(c.ci_high)
    return f"${'(' if c.ci_low == -math.inf else '['}{low}, {high}{')' if c.ci_high == math.inf else ']'}$"


def _latex_p(p: float) -> str:
    return f"${_tex_number(p) if not p < 1e-4 or p == 0 else _tex_float(f'{p:.2e}')}$"  # NaN: not p < 1e-4


# -- text ------------------------------------------------------------------------------------------


def report_string(report: ComparisonReport) -> str:
    """The report as a fixed-width text table under one line stating the settings.

    The columns are metric, ``candidate vs baseline``, difference, interval,
    adjusted p, direction, W/T/L and mde, one row per hypothesis. A
    seed-averaged report says so first: the settings line starts with
    ``seed-averaged over training seeds (EASE: 1 seed; ELSA: 3 seeds)`` and
    each side averaged over several seeds is named with their number,
    ``ELSA (3 seeds) vs EASE``. Names and metric keys are written with
    control characters as visible escapes
    (:func:`~mlflow_recsys.report.text.visible_text`), so every row is one
    line.

    Parameters
    ----------
    report:
        Any report; one without hypotheses gives a one-line note.

    Returns
    -------
    str
        ``2 + len(report.comparisons)`` lines (settings, header, rows), no
        trailing newline.
    """
    if not report.comparisons:
        return "ComparisonReport with no hypotheses"
    first = report.comparisons[0]
    settings = (
        f"{_hypotheses(len(report.comparisons))}: difference = candidate - baseline (mean over {_users(report)}); "
        f"{_percent(first.confidence_level)}% {_interval_words(report)} bootstrap interval; "
        f"{_test_words(report)}, {_SIDES.get(first.alternative, first.alternative)}; "
        f"{_correction_words(report)}; alpha = {first.alpha:.6g}"
    )
    if report.seed_averaged:
        settings = f"seed-averaged over training seeds ({_seed_counts(report)}); {settings}"
    settings = visible_text(settings)  # the names in it (the primary metric, seed-averaged models) stay on one line
    header = ["metric", "candidate vs baseline", "difference", "interval", "adj. p", "direction", "W/T/L", "mde"]
    rows = [
        [
            visible_text(c.metric),
            _pair_text(c),
            _signed(c.difference),
            _text_interval(c),
            _format_p(c.adjusted_p_value),
            c.direction,
            f"{c.wins}/{c.ties}/{c.losses}",
            _number(c.mde),
        ]
        for c in report.comparisons
    ]
    return settings + "\n" + "\n".join(_aligned([header, *rows], right={2, 4, 7}))


def report_summary(report: ComparisonReport) -> str:
    """One line per hypothesis: metric, pair, difference and interval, adjusted p, direction, W/T/L and mde.

    E.g. ``ndcg@100  ELSA vs EASE  -0.0059 [-0.0223, +0.0110]  adj. p 0.8550
    inconclusive  W/T/L 81/1/106  mde 0.0261``, fields aligned across lines;
    in a seed-averaged report a side averaged over several training seeds is
    named with their number, ``ELSA (3 seeds) vs EASE``. Names are written as
    in :func:`report_string`, so ``len(report_summary(r).splitlines()) ==
    len(r.comparisons)``.

    Parameters
    ----------
    report:
        Any report.

    Returns
    -------
    str
        The lines joined by ``"\\n"``, no trailing newline; ``""`` for a report without hypotheses.
    """
    rows = [
        [
            visible_text(c.metric),
            _pair_text(c),
            f"{_signed(c.difference)} {_text_interval(c)}",
            f"adj. p {_format_p(c.adjusted_p_value)}",
            c.direction,
            f"W/T/L {c.wins}/{c.ties}/{c.losses}",
            f"mde {_number(c.mde)}",
        ]
        for c in report.comparisons
    ]
    return "\n".join(_aligned(rows, right=set()))


def _pair_text(c: PairwiseComparison) -> str:
    """``ELSA (3 seeds) vs EASE``: each side's seed count when it averages several."""
    candidate, baseline = (
        visible_text(name) + (f" ({seeds} seeds)" if seeds > 1 else "")
        for name, seeds in ((c.candidate, c.candidate_seeds), (c.baseline, c.baseline_seeds))
    )
    return f"{candidate} vs {baseline}"


def _aligned(rows: list[list[str]], *, right: set[int]) -> list[str]:
    """Rows of cells padded to their column's width, two spaces apart, trailing spaces removed."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        .rstrip()
        for row in rows
    ]


def _text_interval(c: PairwiseComparison) -> str:
    low = "(-inf" if c.ci_low == -math.inf else f"[{_signed(c.ci_low)}"
    high = "inf)" if c.ci_high == math.inf else f"{_signed(c.ci_high)}]"
    return f"{low}, {high}"


# -- words shared by the caption and the settings line ------------------------------------------------


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def _signed(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.4f}"


def _percent(level: float) -> str:
    """``95`` for 0.95, ``99.9`` for 0.999: the level in percent without trailing zeros."""
    return f"{100 * level:.6g}"


def _users(report: ComparisonReport) -> str:
    counts = sorted({c.n_units for c in report.comparisons})
    users = " or ".join(f"{n:,}" for n in counts) + " users"
    if any(c.n_samples != c.n_units for c in report.comparisons):
        users += " (the rows of each user averaged first)"
    return users


def _interval_words(report: ComparisonReport) -> str:
    used = [c.interval_method for c in report.comparisons]
    if "bca" not in used:
        return "percentile"
    fell = used.count("percentile")
    if fell:
        return f"BCa (percentile for {fell} of {len(used)} hypotheses, whose BCa bias correction was infinite)"
    return "BCa"


def _test_words(report: ComparisonReport) -> str:
    methods = list(dict.fromkeys(c.test_method for c in report.comparisons))
    words = []
    for method in methods:
        c = next(c for c in report.comparisons if c.test_method == method)
        template = _TEST_WORDS.get(method, method)
        words.append(
            template.format(
                B=c.n_resamples,
                zero_method=c.zero_method,
                zero_words=_ZERO_WORDS.get(c.zero_method, "zero differences as scipy treats them"),
            )
        )
    return words[0] if len(words) == 1 else "by hypothesis, " + " or ".join(words)


def _correction_words(report: ComparisonReport) -> str:
    """The correction and its families, as raw text: it names the primary metric, so escape it as a whole."""
    if report.correction is None:
        return "p-values not adjusted for multiple comparisons"
    how = CORRECTION_NAMES[report.correction]
    return f"p-values adjusted with the {how} procedure {family_phrase(report)}"


def _seed_counts(report: ComparisonReport) -> str:
    """``EASE: 1 seed; ELSA: 5 seeds``, as raw text: it names models, so escape it as a whole."""
    counts: dict[str, list[int]] = {}
    for c in report.comparisons:
        for model, n in ((c.baseline, c.baseline_seeds), (c.candidate, c.candidate_seeds)):
            seen = counts.setdefault(model, [])
            if n not in seen:
                seen.append(n)
    return "; ".join(
        f"{model}: {' or '.join(str(n) for n in ns)} seed{'' if ns == [1] else 's'}"
        for model, ns in counts.items()
    )


def _nonempty_iv(report: ComparisonReport) -> None:
    if not isinstance(report, ComparisonReport):
        raise TypeError(f"report: expected a ComparisonReport, found {type(report).__name__}")
    if not report.comparisons:
        raise ValueError("report: expected at least one hypothesis, found none")


# -- saving and loading ----------------------------------------------------------------------------

#: The Arrow type of each annotation used by PairwiseComparison's fields. ``random_state`` (``int | None``) may
#: exceed int64, so it is stored as decimal text. A field of a new type fails here, at import, not in a user's save.
_ARROW_TYPES = {
    "str": pa.string(),
    "str | None": pa.string(),
    "int": pa.int64(),
    "int | None": pa.string(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "np.ndarray": pa.list_(pa.float64()),
    "np.ndarray | None": pa.list_(pa.float64()),
}
SCHEMA = pa.schema([(f.name, _ARROW_TYPES[f.type]) for f in dataclasses.fields(PairwiseComparison)])
_NULLABLE = {f.name for f in dataclasses.fields(PairwiseComparison) if f.type.endswith("| None")}
#: The fields of ``report.json`` besides the format, its version and the package version.
_META_FIELDS = ("correction", "reference", "primary", "n_hypotheses")
_DECIMAL = re.compile(r"-?[0-9]+")


def _one_of(*allowed):
    return (lambda v: v in allowed), f"one of {allowed}"


#: What :func:`load_report` accepts in a column, as read from the file: (test of one value, what it expects). NaN
#: fails every comparison.
_VALID = {
    "direction": _one_of("better", "worse", "inconclusive"),
    "alternative": _one_of(*ALTERNATIVES),
    "test_method": _one_of(*TEST_METHODS, "randomization-exact"),
    "interval_method": _one_of(*INTERVAL_METHODS),
    "family": _one_of("primary", "secondary", "all"),
    "zero_method": _one_of(None, *ZERO_METHODS),
    "p_value": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "adjusted_p_value": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "confidence_level": (lambda v: 0 < v < 1, "a number strictly between 0 and 1"),
    "baseline_seeds": (lambda v: v >= 1, "at least 1"),
    "candidate_seeds": (lambda v: v >= 1, "at least 1"),
    "random_state": (lambda v: v is None or _DECIMAL.fullmatch(v) is not None, "decimal integer text"),
}


def save_report(report: ComparisonReport, path: str | os.PathLike) -> Path:
    """Save ``report`` as the directory ``path``: ``comparisons.parquet`` and ``report.json``.

    ``comparisons.parquet`` holds one row per hypothesis, in order, with a
    column for every field of :class:`~mlflow_recsys.stats.PairwiseComparison`
    (:data:`SCHEMA`): text as ``string``, counts as ``int64``, the other
    numbers as ``float64`` (NaN and infinities kept), flags as ``bool``,
    ``random_state`` as decimal text (it may exceed int64), and the arrays
    ``unit_differences``, ``null_distribution`` and ``bootstrap_distribution``
    as ``list<double>``; ``None`` is null. ``report.json`` holds ``format``
    (:data:`FORMAT`), ``format_version`` (:data:`FORMAT_VERSION`),
    ``package_version``, ``correction``, ``reference``, ``primary`` and
    ``n_hypotheses``.

    Both files are written into a hidden temporary directory beside ``path``,
    which is then renamed to ``path``, so a failure leaves ``path`` as it was.
    A directory an earlier ``save_report`` wrote (only those two files, in this
    format) is replaced: it is renamed aside, the new one renamed into place,
    and the old one deleted.

    Parameters
    ----------
    report:
        The report to save.
    path:
        The directory to create or replace; its parent must be an existing directory.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        If ``report`` is not a ComparisonReport or a field holds a value Arrow
        cannot store as its column's type (naming the hypothesis and field);
        nothing is written then.
    FileNotFoundError, NotADirectoryError
        If the parent of ``path`` does not exist, or is not a directory (naming
        it); checked before anything is written.
    FileExistsError
        If ``path`` exists and is not a directory written by ``save_report``.
    """
    if not isinstance(report, ComparisonReport):
        raise TypeError(f"report: expected a ComparisonReport, found {type(report).__name__}")
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        error = NotADirectoryError if parent.exists() else FileNotFoundError
        found = "something else" if parent.exists() else "nothing"
        raise error(f"path: expected its parent {str(parent)!r} to be an existing directory, found {found} there")
    table = _comparisons_table(report)
    meta = json.dumps(_report_meta(report), indent=2, allow_nan=False)
    replace = _existing_report_iv(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    try:
        os.chmod(tmp, 0o777 & ~current_umask())  # as a plain mkdir would make it (mkdtemp gives 0o700)
        pq.write_table(table, tmp / COMPARISONS_FILE)
        (tmp / REPORT_FILE).write_text(meta, encoding="utf-8")
        if replace:
            aside = tmp.with_name(tmp.name + ".old")
            os.rename(path, aside)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(aside, path)
                raise
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def load_report(path: str | os.PathLike) -> ComparisonReport:
    """Read a report that :func:`save_report` wrote to the directory ``path``.

    Every field comes back with its declared type: ``str``, Python ``int``,
    ``float`` (bit-identical to the saved one), ``bool``, ``None`` where it
    was ``None``, and new float64 ``(n,)`` arrays. A loaded report is used as
    a computed one would be, so its values are checked too: each text column
    holds one of the values a comparison writes (``direction``,
    ``alternative``, ``test_method``, ``interval_method``, ``family``,
    ``zero_method``), p-values and adjusted p-values lie in [0, 1] (NaN is
    refused), ``confidence_level`` in (0, 1), seed counts are at least 1,
    ``random_state`` is decimal integer text, and each ``unit_differences``
    holds ``n_units`` values.

    Parameters
    ----------
    path:
        A directory holding ``comparisons.parquet`` and ``report.json``.

    Returns
    -------
    ComparisonReport
        Equal, field by field, to the report that was saved.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Naming the file: if ``path`` is not a directory, a file is missing,
        ``report.json`` is not JSON of this format, has another
        ``format_version`` (an integer, not ``true`` or ``1.0``) or lacks a
        field, ``comparisons.parquet`` is not Parquet, a column is missing or
        of another type, the number of rows disagrees with ``n_hypotheses``, or
        a value fails the checks above (naming the column and the first bad
        row).
    OSError
        If a file exists but cannot be read (e.g. :class:`PermissionError`),
        raised as the operating system reports it.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: expected a saved comparison report, found nothing at {str(path)!r}")
    if not path.is_dir():
        raise ValueError(f"path: expected a directory written by save_report, found a file at {str(path)!r}")
    meta_path, table_path = path / REPORT_FILE, path / COMPARISONS_FILE
    for file in (meta_path, table_path):
        if not file.is_file():
            raise ValueError(f"{file}: expected this file of a saved comparison report, found none")
    meta = _read_meta(meta_path)
    with open(table_path, "rb") as file:  # an unreadable file raises OSError here, as report.json's does
        try:
            table = pq.read_table(file)
        except (pa.ArrowException, OSError) as exc:
            raise ValueError(f"{table_path}: expected a Parquet file, could not read it ({exc})") from None
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise ValueError(f"{table_path}: expected columns {missing}, found {table.column_names}")
    for field in SCHEMA:
        found = table.schema.field(field.name).type
        if found != field.type:
            raise ValueError(f"{table_path}: column {field.name!r} expected type {field.type}, found {found}")
        if field.name not in _NULLABLE and table.column(field.name).null_count:
            raise ValueError(f"{table_path}: column {field.name!r} expected no nulls, "
                             f"found {table.column(field.name).null_count}")
    if table.num_rows != meta["n_hypotheses"]:
        raise ValueError(f"{table_path}: expected {meta['n_hypotheses']} rows (n_hypotheses in {REPORT_FILE}), "
                         f"found {table.num_rows}")
    columns = {}
    for field in SCHEMA:
        column = table.column(field.name)
        if pa.types.is_list(field.type):
            columns[field.name] = [None if not v.is_valid else v.values.to_numpy(zero_copy_only=False).copy()
                                   for v in column]
        else:
            columns[field.name] = column.to_pylist()
    _check_values(columns, table_path)
    columns["random_state"] = [None if v is None else int(v) for v in columns["random_state"]]
    comparisons = tuple(PairwiseComparison(**{name: values[i] for name, values in columns.items()})
                        for i in range(table.num_rows))
    return ComparisonReport(comparisons=comparisons, correction=meta["correction"], reference=meta["reference"],
                            primary=meta["primary"])


def _check_values(columns: dict[str, list], table_path: Path) -> None:
    """ValueError naming the file, the column and the first row whose value no comparison writes."""
    for name, (valid, expected) in _VALID.items():
        for row, value in enumerate(columns[name]):
            if not valid(value):
                raise ValueError(f"{table_path}: column {name!r} row {row}: expected {expected}, found {value!r}")
    for row, (d, n) in enumerate(zip(columns["unit_differences"], columns["n_units"])):
        if len(d) != n:
            raise ValueError(f"{table_path}: column 'unit_differences' row {row}: expected n_units = {n} values, "
                             f"found {len(d)}")


def _comparisons_table(report: ComparisonReport) -> pa.Table:
    """The comparisons as an Arrow table of :data:`SCHEMA`; TypeError naming the hypothesis and field."""
    columns = []
    for field in SCHEMA:
        values = [getattr(c, field.name) for c in report.comparisons]
        if field.name == "random_state":
            values = [None if v is None else str(int(v)) for v in values]
        try:
            columns.append(pa.array(values, type=field.type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            for i, value in enumerate(values):  # name the first value Arrow refuses
                try:
                    pa.array([value], type=field.type)
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    raise TypeError(f"report.comparisons[{i}].{field.name}: expected a value stored as "
                                    f"{field.type}, found {type(value).__name__}") from None
            raise
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _report_meta(report: ComparisonReport) -> dict:
    from mlflow_recsys import __version__

    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "correction": report.correction,
        "reference": report.reference,
        "primary": report.primary,
        "n_hypotheses": len(report.comparisons),
    }


def _read_meta(meta_path: Path) -> dict:
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{meta_path}: expected JSON, found invalid text ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(f"{meta_path}: expected format {FORMAT!r}, found {found!r}")
    version = meta.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # not True, not 1.0
        raise ValueError(
            f"{meta_path}: expected format_version {FORMAT_VERSION}, found {version!r} "
            f"(written by mlflow-recsys {meta.get('package_version')!r}); load it with that version"
        )
    missing = [name for name in _META_FIELDS if name not in meta]
    if missing:
        raise ValueError(f"{meta_path}: expected the fields {list(_META_FIELDS)}, found no {missing}")
    if meta["correction"] not in CORRECTIONS:
        raise ValueError(f"{meta_path}: expected correction in {CORRECTIONS}, found {meta['correction']!r}")
    for name in ("reference", "primary"):
        if meta[name] is not None and not isinstance(meta[name], str):
            raise ValueError(f"{meta_path}: expected {name} to be a string or null, found {meta[name]!r}")
    n = meta["n_hypotheses"]
    if type(n) is not int or n < 0:
        raise ValueError(f"{meta_path}: expected n_hypotheses to be a non-negative integer, found {n!r}")
    return meta


def _existing_report_iv(path: Path) -> bool:
    """True when ``path`` is a directory an earlier save_report wrote; False when absent; else FileExistsError."""
    if not os.path.lexists(path):
        return False
    if path.is_symlink() or not path.is_dir():
        kind = "a symbolic link" if path.is_symlink() else "a file"
        raise FileExistsError(
            f"path: expected a new path or a directory written by save_report, found {kind} at {str(path)!r}"
        )
    entries = sorted(os.listdir(path))
    ours = False
    if set(entries) <= {REPORT_FILE, COMPARISONS_FILE} and REPORT_FILE in entries:
        try:
            meta = json.loads((path / REPORT_FILE).read_text(encoding="utf-8"))
            ours = isinstance(meta, dict) and meta.get("format") == FORMAT
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            ours = False
    if not ours:
        shown = entries[:5] + (["..."] if len(entries) > 5 else [])
        raise FileExistsError(
            f"path: expected a new path or a directory written by save_report, found a directory holding "
            f"{shown} at {str(path)!r}; it is left as it is"
        )
    return True
