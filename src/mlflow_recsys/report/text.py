"""Text, tables and citations for comparison reports.

Functions here only format; they compute nothing a reader could not recompute
from the report's columns.

Model names and metric keys come from users and are shown literally: markdown
surfaces pass them through :func:`escape_markdown`, HTML through
:func:`html.escape`, LaTeX through
:func:`~mlflow_recsys.report.latex.escape_latex`, and CSV files written
from report frames should go through :func:`csv_safe_frame`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from mlflow_recsys.stats.power import REPORT_POWER

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats.comparison import ComparisonReport, PairwiseComparison

_TEST_WORDS = {
    "randomization": "a paired sign-flip randomization test",
    "randomization-exact": "an exact paired sign-flip randomization test (all sign patterns enumerated)",
    "bootstrap": "a paired null-centred bootstrap test",
    "t": "a paired t-test on the per-user differences",
    "wilcoxon": "a Wilcoxon signed-rank test on the per-user differences (Wilcoxon, 1945)",
}

#: How each ``zero_method`` of the Wilcoxon test is described in the methods text.
_ZERO_WORDS = {
    "wilcox": "users with a zero difference were dropped before ranking",
    "pratt": "zero differences were ranked with the others and their ranks then dropped (Pratt, 1959)",
    "zsplit": "the ranks of zero differences were split equally between the two signs",
}


Markup = Literal["markdown", "plain"]

#: Characters that change markdown when unescaped. CommonMark lets any ASCII punctuation be backslash-escaped
#: (spec 0.31, sec. 2.4); these are the ones some CommonMark or GFM construct reads (``~`` strikethrough, ``$`` math
#: on GitHub). ``&``, ``<`` and ``>`` become entities instead, so renderers that pass raw HTML still show text.
_MARKDOWN_SPECIALS = "\\`*_{}[]()#+-.!|~$"

_MARKDOWN_TABLE = str.maketrans(
    {
        **{c: "\\" + c for c in _MARKDOWN_SPECIALS},
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        # A line break would end a table row or a paragraph; as character references they stay inside.
        "\n": "&#10;",
        "\r": "&#13;",
    }
)

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV Injection").
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape_markdown(text: object) -> str:
    """``text`` as markdown source that renders as exactly ``text``.

    Backslash-escapes every character of ``\\ ` * _ { } [ ] ( ) # + - . ! | ~ $``
    (any ASCII punctuation may be escaped in CommonMark, spec 0.31 sec. 2.4) and
    writes ``&``, ``<``, ``>``, line feed and carriage return as character
    references, so a name can neither format text, break a table row, start a
    block, nor inject HTML; other control characters (tab, escape) are written
    as visible escapes (``\\t``, ``\\x1b``), then escaped as text. Non-strings
    are formatted with ``str`` first.

    Parameters
    ----------
    text:
        Any object; usually a model name or a metric key.

    Returns
    -------
    str
        E.g. ``escape_markdown("**A**|<b>")`` is ``"\\*\\*A\\*\\*\\|&lt;b&gt;"``.
    """
    # Other control characters (tab, escape sequences) would reach a terminal or a cell raw: show them as escapes.
    text = "".join(c if c.isprintable() or c in "\n\r" else visible_text(c) for c in str(text))
    return text.translate(_MARKDOWN_TABLE)


def visible_text(text: object) -> str:
    """``text`` on one line: line breaks, tabs and other control characters written as ``\\n``-style escapes.

    For terminals and figures, where a raw carriage return or newline in a model name would break a table
    row or overwrite what is already printed.
    """
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def csv_safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells a spreadsheet will not run as formulas.

    Every ``str`` cell (in object, string or categorical columns) and every
    ``str`` column label that starts with one of :data:`CSV_FORMULA_STARTS`
    (``=``, ``+``, ``-``, ``@``, tab, carriage return) gets a leading single
    quote, as OWASP's "CSV Injection" guidance recommends; spreadsheets show
    the quote-prefixed text as text. Numbers are never changed: a float such as
    ``-0.5`` is written as a number and read back as one, never as a formula;
    other cells (``None``, NaN, bytes) are left as they are. Note that pandas'
    ``to_csv`` does not quote a field holding a carriage return unless told to
    (e.g. ``quoting=csv.QUOTE_NONNUMERIC``).

    Parameters
    ----------
    frame:
        Any DataFrame, e.g. :meth:`ComparisonReport.to_frame`; not modified.

    Returns
    -------
    pandas.DataFrame
        Same shape, index and dtypes as ``frame`` except that categorical
        columns holding such text become object columns.
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


def _names(markup: Markup):
    """How a name is written in ``markup``: escaped for markdown, as is for plain text."""
    if markup == "markdown":
        return escape_markdown
    if markup == "plain":
        return str
    raise ValueError(f"markup: expected 'markdown' or 'plain', found {markup!r}")


def display_frame(report: "ComparisonReport") -> pd.DataFrame:
    """The columns a reader needs first, formatted as strings."""
    frame = report.to_frame()
    out = pd.DataFrame(
        {
            "metric": frame["metric"],
            "baseline": frame["baseline"],
            "candidate": frame["candidate"],
            "n_units": frame["n_units"],
            "n_nonzero": frame["n_nonzero"],
            "tie_rate": frame["tie_rate"].map(lambda v: f"{v:.1%}"),
            "W/T/L": [f"{w}/{t}/{l}" for w, t, l in zip(frame["wins"], frame["ties"], frame["losses"])],
            "baseline_mean": frame["baseline_mean"].map(lambda v: f"{v:.6f}"),
            "candidate_mean": frame["candidate_mean"].map(lambda v: f"{v:.6f}"),
            "difference": frame["difference"].map(lambda v: f"{v:.6f}"),
            "relative": frame["relative_difference"].map(lambda v: f"{v:.2%}" if pd.notna(v) else "n/a"),
            "ci_low": frame["ci_low"].map(lambda v: f"{v:.6f}"),
            "ci_high": frame["ci_high"].map(lambda v: f"{v:.6f}"),
            "p_value": frame["p_value"].map(_format_p),
            "adjusted_p": frame["adjusted_p_value"].map(_format_p),
            "mde": frame["mde"].map(lambda v: f"{v:.6f}"),
            "direction": frame["direction"],
        }
    )
    return out


def report_markdown(report: "ComparisonReport") -> str:
    """The display frame as a markdown table (via ``tabulate``), under a line stating the settings.

    Names and metric keys pass through :func:`escape_markdown` and are never
    read as numbers (a model called ``007`` stays ``007``).
    """
    first = report.comparisons[0]
    correction = CORRECTION_NAMES[report.correction]
    intervals = interval_names(report)
    settings = (
        f"Difference = candidate - baseline, mean over users; {first.confidence_level:.0%} paired {intervals} "
        f"bootstrap interval; {first.test_method} test ({first.alternative}), B = {first.n_resamples:,}; "
        f"{correction} adjustment {family_phrase(report, escape_markdown)}; W/T/L = users on which the candidate "
        "scored higher/equal/lower."
    )
    if report.seed_averaged:
        settings = f"{seed_averaged_phrase(report)}. " + settings
    frame = display_frame(report)
    text_columns = ["metric", "baseline", "candidate"]
    for column in text_columns:
        frame[column] = frame[column].map(escape_markdown)
    table = frame.to_markdown(index=False, disable_numparse=[frame.columns.get_loc(c) for c in text_columns])
    return settings + "\n\n" + table


def seed_averaged_phrase(report: "ComparisonReport") -> str:
    """``Seed-averaged: each model's per-user values averaged over its training seeds (1 to 3 per model)``.

    Names no model, so it is safe in every markup.
    """
    counts = sorted({n for c in report.comparisons for n in (c.baseline_seeds, c.candidate_seeds)})
    span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"Seed-averaged: each model's per-user values averaged over its training seeds ({span} per model)"


def seed_averaging_text(report: "ComparisonReport") -> str:
    """The methods sentences of a seed-averaged report; empty for single trained instances."""
    if not report.seed_averaged:
        return ""
    return (
        f"{seed_averaged_phrase(report)}, before the per-user differences were formed; a model trained under "
        "one seed only enters with that instance. Averaging removes part of the retraining noise from each "
        "user's difference, but inference remains over users for these trained instances: the intervals and "
        "p-values do not cover the spread a new training seed would bring, which the seed-spread table "
        "describes. "
    )


#: How each ``correction`` is named in a settings line.
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", None: "no"}


def interval_names(report: "ComparisonReport") -> str:
    """``percentile``, ``BCa`` or ``BCa/percentile`` (some rows fell back): the interval methods of the report."""
    named = {"percentile": "percentile", "bca": "BCa"}
    return "/".join(named[m] for m in sorted({c.interval_method for c in report.comparisons}, reverse=True))


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _format_p(p: float) -> str:
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.2e}"


def _hypotheses(J: int) -> str:
    return f"{J} hypothes{'is' if J == 1 else 'es'}"


def family_phrase(report: "ComparisonReport", name=str) -> str:
    """``over 4 hypotheses``, or the two families when the primary metric stands alone.

    ``name`` writes the primary metric's key: ``str`` (default) for plain text,
    :func:`escape_markdown` for markdown.
    """
    families = report.families
    if "primary" not in families:
        return f"over {_hypotheses(report.family_size)}"
    phrase = f"within each family: the primary metric {name(report.primary)} ({_hypotheses(families['primary'])})"
    if "secondary" in families:
        phrase += f" and the secondary metrics ({_hypotheses(families['secondary'])})"
    return phrase


def _correction_words(report: "ComparisonReport") -> str:
    families = report.families
    if report.correction is None:
        return "p-values were not adjusted for multiple comparisons"
    if "primary" in families:
        how = ("Holm's step-down procedure (Holm, 1979)" if report.correction == "holm"
               else "the Bonferroni correction")
        primary = ("the primary metric formed a family of its own "
                   f"({_hypotheses(families['primary'])}, one per model pair)")
        secondary = (f" and the other metrics a second family ({_hypotheses(families['secondary'])})"
                     if "secondary" in families else "")
        return (f"{primary}{secondary}; p-values were adjusted within each family with {how}, which controls "
                "each family's family-wise error rate under arbitrary dependence, so adding secondary metrics "
                "does not weaken the primary result")
    J = report.family_size
    if J == 1:
        return f"only one hypothesis was tested, so the {report.correction} adjustment leaves its p-value unchanged"
    if report.correction == "holm":
        return (
            f"p-values of all {J} hypotheses (every model pair and metric) were adjusted together with "
            "Holm's step-down procedure, which controls the family-wise error rate under arbitrary "
            "dependence (Holm, 1979)"
        )
    return (
        f"p-values of all {J} hypotheses (every model pair and metric) were multiplied by {J} "
        "(Bonferroni), which controls the family-wise error rate under arbitrary dependence"
    )


def methods_text(report: "ComparisonReport") -> str:
    """A Methods paragraph naming the test, B, the interval, its level, the correction and the family.

    It names no model and no metric, so it is the same text for any names and
    safe in markdown and HTML alike.
    """
    first = report.comparisons[0]
    methods = sorted({c.test_method for c in report.comparisons})
    B = first.n_resamples
    level = first.confidence_level
    alpha = first.alpha
    side = {"two-sided": "two-sided", "greater": "one-sided (candidate better)", "less": "one-sided (candidate worse)"}[
        first.alternative
    ]
    tests = " and ".join(_TEST_WORDS[m] for m in methods)
    if "wilcoxon" in methods:
        tests += f" ({_ZERO_WORDS[first.zero_method]}; p-values from scipy.stats.wilcoxon, exact for small samples without ties or zeros)"
    units = (
        "Each user's rows were first averaged, so every user counts once. "
        if any(c.n_units != c.n_samples for c in report.comparisons)
        else ""
    )
    mc = ""
    if any(m in ("randomization", "bootstrap") for m in methods):
        mc = (
            f" With B = {B:,} resamples the Monte Carlo p-value is (1 + number of resamples at least as "
            f"extreme as observed) / (B + 1), so it is never below {1 / (B + 1):.2g} "
            "(Davison & Hinkley, 1997; Phipson & Smyth, 2010)."
        )
    return (
        "For every user we computed each ranking metric and compared models through paired per-user "
        f"differences (candidate minus baseline), reporting their mean as the effect. {units}"
        f"{seed_averaging_text(report)}"
        f"Significance was assessed with {tests}, {side} (Smucker, Allan & Carterette, 2007).{mc} "
        f"The uncertainty of each effect is a {level:.0%} {_interval_words(report)} from a paired bootstrap "
        f"over users with B = {B:,} replicates. {_sentence_case(_correction_words(report))}; "
        f"a hypothesis is called significant when its adjusted p-value is at most {alpha:.2g}. Intervals "
        "are not adjusted: each describes one comparison on its own. They describe variation across "
        "evaluation users for the trained model instances compared; variation across training seeds is "
        "reported separately. "
        f"{_mde_words(report)}"
    )


def _mde_words(report: "ComparisonReport") -> str:
    """How the ``mde`` column was computed, at the level each hypothesis is tested at."""
    J = max(report.families.values())
    alpha = report.comparisons[0].alpha
    side = "two-sided" if report.comparisons[0].alternative == "two-sided" else "one-sided"
    if report.correction is not None and len(report.families) > 1:
        level, note = f"alpha/J = {alpha:.2g}/J (J the number of hypotheses in its family)", ""
        if report.correction == "holm":
            note = (" That is the level of the first step of Holm's procedure, the strictest any hypothesis meets, "
                    "so the figure is conservative.")
    elif report.correction is None or J == 1:
        level, note = f"alpha = {alpha:.2g}", ""
    elif report.correction == "bonferroni":
        level, note = f"the Bonferroni level alpha/J = {alpha:.2g}/{J}", ""
    else:
        level = f"alpha/J = {alpha:.2g}/{J}"
        note = (" That is the level of the first step of Holm's procedure, the strictest any hypothesis meets, "
                "so the figure is conservative.")
    return (
        "The minimum detectable effect (mde) of each hypothesis is the smallest true mean difference that a "
        f"{side} test at {level} would detect with {REPORT_POWER:.0%} power, given the standard deviation "
        "of its per-user differences and the number of users, by the normal approximation "
        f"(Cohen, 1988), which is slightly optimistic for few users.{note}"
    )


def _interval_words(report: "ComparisonReport") -> str:
    """The interval method(s) of the report, with sources; says which rows fell back from BCa."""
    used = {c.interval_method for c in report.comparisons}
    if used == {"percentile"}:
        return "percentile interval (Efron, 1979)"
    words = "bias-corrected and accelerated (BCa) interval (Efron, 1987; acceleration from the jackknife of the mean)"
    if "percentile" in used:
        fell = sum(c.interval_method == "percentile" for c in report.comparisons)
        words += (
            f"; for {fell} of {report.family_size} hypotheses every replicate fell on one side of the "
            "estimate, so the bias correction was infinite and the percentile interval (Efron, 1979) was "
            "reported instead"
        )
    return words


def _relative_words(relative: float) -> str:
    if pd.isna(relative):
        return "a relative change that is undefined (the baseline's mean is 0)"
    return f"a relative change of {relative:+.1%}"


def results_text(report: "ComparisonReport", c: "PairwiseComparison", *, markup: Markup = "plain") -> str:
    """One sentence: effect, interval, relative gain, test and B, adjusted p and its floor, n.

    Parameters
    ----------
    report, c:
        The report and one of its comparisons.
    markup:
        ``"plain"`` (default: names as they are, for a terminal, a paper, or
        HTML escaping afterwards) or ``"markdown"`` (names and the metric key
        through :func:`escape_markdown`, for run notes and ``.md`` files).

    Raises
    ------
    ValueError
        If ``markup`` is neither.
    """
    name = _names(markup)
    cand, base, metric = name(c.candidate), name(c.baseline), name(c.metric)
    if c.difference > 0 and c.significant:
        effect = f"{cand} improved {metric} over {base} by {c.difference:.4f}"
    elif c.difference > 0:  # "improved" only for a significant result
        effect = f"{cand} scored {c.difference:.4f} higher than {base} on {metric}"
    elif c.difference < 0:
        effect = f"{cand} scored {-c.difference:.4f} lower than {base} on {metric}"
    else:
        effect = f"{cand} and {base} scored the same mean {metric}"
    J = c.family_size
    B = c.n_resamples
    p = c.adjusted_p_value
    if c.test_method == "randomization" or c.test_method == "bootstrap":
        floor = J / (B + 1) if report.correction is not None else 1 / (B + 1)
        test = f"paired {c.test_method} test with {B:,} resamples"
        at_floor = abs(p - min(1.0, floor)) <= 1e-12
        p_words = f"{_p_label(report, c)} = {_format_p(p)}" + (
            f", the smallest attainable with {B:,} resamples and {J} hypotheses" if at_floor and J > 1 else
            f", the smallest attainable with {B:,} resamples" if at_floor else ""
        )
    elif c.test_method == "randomization-exact":
        test = "exact paired randomization test over all sign patterns"
        p_words = f"{_p_label(report, c)} = {_format_p(p)}"
    elif c.test_method == "wilcoxon":
        test = "Wilcoxon signed-rank test"
        p_words = f"{_p_label(report, c)} = {_format_p(p)}"
    else:
        test = "paired t-test"
        p_words = f"{_p_label(report, c)} = {_format_p(p)}"
    level = f"{c.confidence_level:.0%}"
    interval = (
        f"[{c.ci_low:.4f}, {c.ci_high:.4f}]" if c.alternative == "two-sided"
        else f"[{c.ci_low:.4f}, inf)" if c.alternative == "greater" else f"(-inf, {c.ci_high:.4f}]"
    )
    verdict = {
        "better": "significant, in the candidate's favour",
        "worse": "significant, in the baseline's favour",
        "inconclusive": "not significant",
    }[c.direction]
    if c.baseline_seeds > 1 or c.candidate_seeds > 1:
        effect = (f"Averaged over training seeds ({cand}: {c.candidate_seeds}, {base}: {c.baseline_seeds}), "
                  + effect)
    if c.direction == "inconclusive" and not pd.isna(c.mde):
        verdict += (
            f"; with {c.n_units:,} users this comparison would detect a true difference of {c.mde:.4f} "
            f"with {REPORT_POWER:.0%} power"
        )
    return (
        f"{effect} ({level} {'BCa ' if c.interval_method == 'bca' else ''}paired-bootstrap interval {interval}, "
        f"{_relative_words(c.relative_difference)}; {test}, {p_words}; {verdict}; n = {c.n_units:,} users, of whom "
        f"{c.n_nonzero:,} scored differently)."
    )


def _p_label(report: "ComparisonReport", c: "PairwiseComparison") -> str:
    if c.family_size == 1:
        return "p"
    return {"holm": "Holm-adjusted p", "bonferroni": "Bonferroni-adjusted p", None: "p"}[report.correction]


_BIBTEX = r"""@article{efron1979bootstrap,
  author  = {Efron, Bradley},
  title   = {Bootstrap Methods: Another Look at the Jackknife},
  journal = {The Annals of Statistics},
  volume  = {7},
  number  = {1},
  pages   = {1--26},
  year    = {1979},
  doi     = {10.1214/aos/1176344552}
}

@inproceedings{liang2018vae,
  author    = {Liang, Dawen and Krishnan, Rahul G. and Hoffman, Matthew D. and Jebara, Tony},
  title     = {Variational Autoencoders for Collaborative Filtering},
  booktitle = {Proceedings of the 2018 World Wide Web Conference},
  pages     = {689--698},
  year      = {2018},
  doi       = {10.1145/3178876.3186150}
}

@inproceedings{smucker2007comparison,
  author    = {Smucker, Mark D. and Allan, James and Carterette, Ben},
  title     = {A Comparison of Statistical Significance Tests for Information Retrieval Evaluation},
  booktitle = {Proceedings of the Sixteenth ACM Conference on Information and Knowledge Management},
  pages     = {623--632},
  year      = {2007},
  doi       = {10.1145/1321440.1321528}
}

@article{phipson2010permutation,
  author  = {Phipson, Belinda and Smyth, Gordon K.},
  title   = {Permutation P-values Should Never Be Zero: Calculating Exact P-values When Permutations Are Randomly Drawn},
  journal = {Statistical Applications in Genetics and Molecular Biology},
  volume  = {9},
  number  = {1},
  year    = {2010},
  doi     = {10.2202/1544-6115.1585}
}

@article{holm1979simple,
  author  = {Holm, Sture},
  title   = {A Simple Sequentially Rejective Multiple Test Procedure},
  journal = {Scandinavian Journal of Statistics},
  volume  = {6},
  number  = {2},
  pages   = {65--70},
  year    = {1979}
}

@book{davison1997bootstrap,
  author    = {Davison, A. C. and Hinkley, D. V.},
  title     = {Bootstrap Methods and their Application},
  publisher = {Cambridge University Press},
  year      = {1997},
  doi       = {10.1017/CBO9780511802843}
}

@inproceedings{steck2019ease,
  author    = {Steck, Harald},
  title     = {Embarrassingly Shallow Autoencoders for Sparse Data},
  booktitle = {The World Wide Web Conference},
  pages     = {3251--3257},
  year      = {2019},
  doi       = {10.1145/3308558.3313710}
}

@inproceedings{vancura2022elsa,
  author    = {Van\v{c}ura, Vojt\v{e}ch and Alves, Rodrigo and Kasalick\'{y}, Petr and Kord\'{i}k, Pavel},
  title     = {Scalable Linear Shallow Autoencoder for Collaborative Filtering},
  booktitle = {Proceedings of the 16th ACM Conference on Recommender Systems},
  pages     = {604--609},
  year      = {2022},
  doi       = {10.1145/3523227.3551482}
}

@book{cohen1988power,
  author    = {Cohen, Jacob},
  title     = {Statistical Power Analysis for the Behavioral Sciences},
  edition   = {2},
  publisher = {Lawrence Erlbaum Associates},
  year      = {1988},
  doi       = {10.4324/9780203771587}
}
"""


def references_bibtex() -> str:
    """BibTeX entries for the methods and models the reports rely on."""
    return _BIBTEX
