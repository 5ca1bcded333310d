"""Names written literally in every format a report is read in.

Model names and metric keys come from users and are shown as they are: markdown surfaces (run notes, ``report.md``) pass
them through :func:`escape_markdown`, LaTeX through :func:`escape_latex`, terminals and figures through
:func:`visible_text`, HTML through :func:`html.escape`, and CSV files written from report frames go through
:func:`csv_safe_frame`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from mlflow_recsys._digests import shorten
from mlflow_recsys.stats._comparison import Markup

#: Characters that format inline text wherever they stand, and what stands for each literally: emphasis (``*``, ``_``),
#: code spans, links (``[`` ``]``), GFM strikethrough (``~``) and table cells (``|``), GitHub math (``$``), raw HTML
#: (``<``) and the backslash itself. Other ASCII punctuation (``( ) . - + # ! { } >``) only acts at the start of a line
#: or right after one of these, and stays as it is. Line breaks become character references, so a name stays inside its
#: table row or paragraph.
_MARKDOWN_INLINE = str.maketrans(
    {
        **{c: "\\" + c for c in "\\`*_[]|~$"},
        "<": "&lt;",
        "\n": "&#10;",
        "\r": "&#13;",
    }
)
#: An ``&`` that a renderer would read as the start of a character reference (``&amp;``, ``&#10;``, ``&#x41;``).
_ENTITY_START = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
#: A start that would open a block when the text begins a line: a heading, a list item (``-``, ``+``, ``1.``, ``1)``), a
#: block quote, a setext underline or a thematic break (``=``). The text keeps it with its last character escaped.
_BLOCK_START = re.compile(r"\A(?:[#+\-=]|>|\d{1,9}[.)])")
#: A web address: it is written as an autolink (``<https://...>``), never escaped inside. It ends at white space or at a
#: character a table or an autolink cannot hold; trailing punctuation belongs to the sentence.
_URL = re.compile(r"https?://[^\s<>|\\`\"]+")
_URL_TRAILING = ".,;:!?*_~'"

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV Injection").
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape_markdown(text: object) -> str:
    """``text`` as markdown source that renders as exactly ``text``, escaped no more than markdown needs.

    The one place that decides what a name, a metric key or a provenance line looks like in markdown (run notes,
    ``report.md``, ``methods.md``); terminals get :func:`visible_text`, HTML :func:`html.escape` and LaTeX
    :func:`escape_latex` instead. The rules, for CommonMark 0.31 with GFM tables and strikethrough:

    - ``\\ ` * _ [ ] | ~ $`` are backslash-escaped everywhere (they format inline text or split a table cell); ``<``
      becomes ``&lt;`` (raw HTML) and an ``&`` only where it would start a character reference (a name holding ``&amp;``
      is written ``&amp;amp;``, so it still reads ``&amp;``); a lone ``&`` and ``>`` stay as they are, so ``>= 4`` reads
      ``>= 4`` in the source too;
    - a start that would open a block if the text began a line (``#``, ``-``, ``+``, ``=``, ``>``, ``1.``) is escaped
      there only; a hyphen or a parenthesis inside the text is left alone (``movielens-100k (ml-100k)`` is unchanged);
    - a web address (``http://`` or ``https://`` up to white space, trailing punctuation excluded) is written as an
      autolink ``<https://...>`` and never escaped inside, so it can be clicked and copied;
    - line feed and carriage return become ``&#10;`` and ``&#13;``, so a name stays on its table row; other control
      characters (tab, escape) are written as visible escapes (``\\t``, ``\\x1b``).

    Non-strings are formatted with ``str`` first.

    Parameters
    ----------
    text:
        Any object; usually a model name, a metric key or a sentence holding them.

    Returns
    -------
    str
        E.g. ``escape_markdown("**A**|<b>")`` is ``"\\*\\*A\\*\\*\\|&lt;b>"`` and ``escape_markdown("ml-100k
        (https://x.org/a_b.zip)")`` is ``"ml-100k (<https://x.org/a_b.zip>)"``.
    """
    # Other control characters (tab, escape sequences) would reach a terminal or a cell raw: show them as escapes.
    text = "".join(c if c.isprintable() or c in "\n\r" else visible_text(c) for c in str(text))
    parts, position = [], 0
    for match in _URL.finditer(text):
        url = _url_end(match.group())
        if len(url) <= len("https://"):
            continue
        parts += [_escape_inline(text[position : match.start()], starts_line=position == 0), f"<{url}>"]
        position = match.start() + len(url)
    parts.append(_escape_inline(text[position:], starts_line=position == 0))
    return "".join(parts)


def _url_end(url: str) -> str:
    """``url`` without the punctuation that ends the sentence around it, and without an unbalanced ``)``."""
    while url and (url[-1] in _URL_TRAILING or (url[-1] == ")" and url.count("(") < url.count(")"))):
        url = url[:-1]
    return url


def _escape_inline(text: str, *, starts_line: bool) -> str:
    """``text`` (no web address in it) with the characters that format it escaped; see :func:`escape_markdown`."""
    text = _ENTITY_START.sub("&amp;", text).translate(_MARKDOWN_INLINE)
    block = _BLOCK_START.match(text) if starts_line else None
    if block is None:
        return text
    opener = block.group()
    last = "&gt;" if opener == ">" else "\\" + opener[-1]
    return opener[:-1] + last + text[block.end() :]


def visible_text(text: object) -> str:
    """``text`` on one line: line breaks, tabs and other control characters written as ``\\n``-style escapes.

    For terminals and figures, where a raw carriage return or newline in a model name would break a table row or
    overwrite what is already printed.
    """
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def csv_safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells a spreadsheet will not run as formulas.

    Every ``str`` cell (in object, string or categorical columns) and every ``str`` column label that starts with one of
    :data:`CSV_FORMULA_STARTS` (``=``, ``+``, ``-``, ``@``, tab, carriage return) gets a leading single quote, as
    OWASP's "CSV Injection" guidance recommends; spreadsheets show the quote-prefixed text as text. Numbers are never
    changed: a float such as ``-0.5`` is written as a number and read back as one, never as a formula; other cells
    (``None``, NaN, bytes) are left as they are. Note that pandas' ``to_csv`` does not quote a field holding a carriage
    return unless told to (e.g. ``quoting=csv.QUOTE_NONNUMERIC``).

    Parameters
    ----------
    frame:
        Any DataFrame, e.g. :meth:`ComparisonReport.to_frame`; not modified.

    Returns
    -------
    pandas.DataFrame
        Same shape, index and dtypes as ``frame`` except that categorical columns holding such text become object
        columns.
    """

    def formula(value) -> bool:
        return isinstance(value, str) and value.startswith(CSV_FORMULA_STARTS)

    out = frame.copy()
    # By position, so duplicate column labels are handled, and element by element, so None stays None.
    for position in range(out.shape[1]):
        values = out.iloc[:, position]
        if not (values.dtype == object or isinstance(values.dtype, (pd.StringDtype, pd.CategoricalDtype))):
            continue
        cells = values.to_numpy(dtype=object, copy=True)
        hits = np.fromiter((formula(v) for v in cells), dtype=bool, count=cells.shape[0])
        if hits.any():
            cells[hits] = ["'" + v for v in cells[hits]]
            keep = values.dtype if isinstance(values.dtype, pd.StringDtype) else object
            out.isetitem(position, pd.Series(cells, index=values.index, dtype=keep))
    out.columns = ["'" + c if formula(c) else c for c in out.columns]
    return out


#: A markup name, or a function that writes names itself.
Writer = Markup | Callable[[str], str]


def name_writer(markup: Writer):
    """How a name is written in ``markup``: escaped for markdown, as is for plain text; a function (e.g. the run notes'
    cutting writer) is its own writer."""
    if callable(markup):
        return markup
    if markup == "markdown":
        return escape_markdown
    if markup == "plain":
        return str
    raise ValueError(f"markup: expected 'markdown' or 'plain', found {markup!r}")


#: Characters LaTeX reads as commands, ligatures or other glyphs, and what stands for each of them literally. The text
#: commands end in ``{}`` so that a following space or letter is kept. ``<``, ``>``, ``|`` and ``"`` print other glyphs
#: in the default (OT1) font encoding, ``'`` and a backtick print curly quotes, and ``<<``, ``>>``, ``!``` and ``?```
#: are ligatures. ``\textquotedbl`` exists only in T1, so ``"`` is taken from T1 whatever the document's encoding
#: (``\UseTextSymbol``); every escape here compiles with and without ``\usepackage[T1]{fontenc}``.
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
#: A hyphen or comma that another one follows (``--`` is an en dash, ``,,`` a low quote in T1) or that ends the text
#: (the next piece of source may start with one): it gets ``{}``, which breaks the ligature.
_LIGATURE_START = re.compile(r"-(?=-|\Z)|,(?=,|\Z)")
#: A ``[`` or ``*`` opening the text gets ``{}`` before it: after a table row's ``\\`` it would be read as the row
#: end's optional spacing (``\\[...]``, "Missing number") or its star, and lost.
_ROW_END_ARGUMENT = re.compile(r"\A(?=[\[*])")


#: Longest word of a LaTeX text, and longest name a LaTeX table cell holds: TeX cannot set a box wider than 16,383pt,
#: about 2,000 characters of text, so longer ones are cut (with an ellipsis and a hash, as the run notes cut names).
LATEX_NAME_WIDTH = 200
#: Longest text of a caption's own words (its title and settings; the thresholds are added after): LaTeX sets a caption
#: on one line first, to measure it, so it too must stay under 16,383pt.
LATEX_CAPTION_WIDTH = 1500
_LONG_WORD = re.compile(rf"\S{{{LATEX_NAME_WIDTH + 1},}}")


def escape_latex(text: object, *, width: int | None = None) -> str:
    """``text`` as LaTeX source that typesets as exactly ``text``, on one line, save for names too long for TeX.

    Control characters (line breaks, tabs) are first written as visible escapes (:func:`visible_text`); then each of
    ``\\ & % $ # _ { } ~ ^ < > |`` and the quotes ``` ' "`` is replaced by its escape (``\\&``, ``\\textbackslash{}``,
    ``\\textquotesingle{}``, ...), and a ``-`` or ``,`` followed by another (or ending the text) gets ``{}``, so ``--``
    stays two hyphens instead of an en dash; so does a ``[`` or ``*`` that opens the text, which a table row's ``\\\\``
    before it would take for its argument. Every escape compiles with pdflatex in the default (OT1) and the T1 font
    encoding; ``"`` is ``\\UseTextSymbol{T1}{\\textquotedbl}``, the straight quote of the T1 font, because OT1 has none.
    Other characters, non-ASCII letters included, pass unchanged: pdflatex typesets Latin letters with accents (``é``,
    ``ñ``), but stops with "Unicode character ... not set up for use with LaTeX" at Greek or Cyrillic letters (they need
    their font encodings, e.g. ``\\usepackage[LGR,T2A,T1]{fontenc}``), CJK characters (``CJKutf8``) or emoji; xelatex or
    lualatex with a font that has them typesets them all. ``text`` may be any object (usually a model name or a metric
    key); non-strings are formatted with ``str`` first. For example ``escape_latex("a_b 50%")`` is ``"a\\_b 50\\%"`` and
    ``escape_latex("x--y")`` is ``"x-{}-y"``.

    A word (a run without white space) of more than :data:`LATEX_NAME_WIDTH` characters is cut to that many with an
    ellipsis and a hash (:func:`~mlflow_recsys._digests.shorten`), and with ``width`` (int) the whole text is first cut
    to ``width`` characters: a table cell, which cannot break a line, passes ``width=LATEX_NAME_WIDTH``.
    """
    shown = visible_text(text) if width is None else shorten(visible_text(text), width)
    shown = _LONG_WORD.sub(lambda word: shorten(word.group(), LATEX_NAME_WIDTH), shown)
    escaped = shown.translate(_LATEX_ESCAPES)
    return _ROW_END_ARGUMENT.sub("{}", _LIGATURE_START.sub(lambda m: m.group() + "{}", escaped))


def latex_cell(name: object) -> str:
    """A name in a LaTeX table cell: :func:`escape_latex` with ``width=LATEX_NAME_WIDTH`` (a cell cannot break)."""
    return escape_latex(name, width=LATEX_NAME_WIDTH)
