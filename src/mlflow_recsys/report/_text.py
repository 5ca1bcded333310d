"""Comparison reports as sentences and tables of text: methods and results, markdown, fixed-width text; names written
literally through :mod:`mlflow_recsys.report._escaping`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mlflow_recsys.metrics import has_better_side
from mlflow_recsys.report._analyses import seed_averaging_text
from mlflow_recsys.report._effect_words import (
    dz_words,
    effect_interval,
    effects_methods,
    interval_adjustment_words,
    sign_test_words,
)
from mlflow_recsys.report._escaping import Writer, escape_markdown, name_writer, visible_text
from mlflow_recsys.report._global_metrics import global_markdown, global_string
from mlflow_recsys.report._rows import (
    NO_MDE,
    aligned,
    decision_words,
    disagreement_words,
    format_level,
    format_margin,
    format_p,
    interval_disagrees,
    interval_level,
    row_cells,
)
from mlflow_recsys.report._slices import slices_markdown, slices_string
from mlflow_recsys.report._vocabulary import words
from mlflow_recsys.stats._comparison import WILCOXON_EXACT_MAX
from mlflow_recsys.stats._power import REPORT_POWER

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport, PairwiseComparison
    from mlflow_recsys.stats._seeds import SeedSpread


def display_frame(report: ComparisonReport) -> pd.DataFrame:
    """The columns a reader needs first, formatted as strings (six decimals)."""
    rows = []
    for c in report.comparisons:
        r = row_cells(c, digits=6, signed=False)
        rows.append(
            {"metric": c.metric, "baseline": c.baseline, "candidate": c.candidate, "n_units": c.n_units}
            | {"n_nonzero": c.n_nonzero, "tie_rate": r.tie_rate, "W/T/L": r.wtl, "baseline_mean": r.baseline_mean}
            | {"candidate_mean": r.candidate_mean, "difference": r.difference, "relative": r.relative}
            | {"ci_low": r.ci_low, "ci_high": r.ci_high, "p_value": r.p_value, "adjusted_p": r.adjusted_p}
            | {"mde": r.mde, "direction": r.direction}
        )
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)


def _no_mde_why(c: PairwiseComparison) -> str:
    if c.n_units < 2:
        return "fewer than two users"
    if c.hypothesis == "equivalence" and np.std(c.unit_differences) > 0:
        return (
            "the margin is narrower than the smallest shift this design detects, so even equal models would rarely be "
            "shown equivalent"
        )
    return "the per-user differences have no spread"


def no_mde_note(report: ComparisonReport) -> str:
    """A sentence for under a table whose ``mde`` column reads :data:`NO_MDE` somewhere; ``""`` when none does."""
    missing = [c for c in report.comparisons if math.isnan(c.mde)]
    if not missing:
        return ""
    return (
        f"mde {NO_MDE} ({len(missing)} of {len(report.comparisons)} hypotheses): {_no_mde_why(missing[0])}, so no "
        "minimum detectable effect can be estimated."
    )


def settings_text(report: ComparisonReport) -> str:
    """The settings every table of ``report`` is read with, as raw clauses joined by ``; `` (no final full stop).

    It names the primary metric and, in a seed-averaged report, the models, so each renderer escapes it as a whole.
    """
    first, comparisons = report.comparisons[0], report.comparisons
    users = " or ".join(f"{n:,}" for n in sorted({c.n_units for c in comparisons})) + " users"
    if any(c.n_samples != c.n_units for c in comparisons):
        users += " (the rows of each user averaged first)"
    fell = sum(c.interval_method == "percentile" for c in comparisons)
    interval = "percentile" if fell == len(comparisons) else "BCa"
    if 0 < fell < len(comparisons):
        interval += f" (percentile for {fell} of {len(comparisons)} hypotheses, whose BCa bias correction was infinite)"
    if first.interval_method == "max-T":  # every row's, under correction="maxt"
        interval = words("interval_method", "max-T")
    tests = [
        _test_label(next(c for c in comparisons if c.test_method == m)) for m in {c.test_method: 0 for c in comparisons}
    ]
    correction = "p-values not adjusted for multiple comparisons"
    if report.correction is not None:
        correction = f"{words('correction', report.correction)} adjustment {family_phrase(report)}"
    # A seed-averaged report says so first, and its counts of seeds read on into the comparison clause.
    lead = f"Seed-averaged over training seeds ({_seed_counts(report)}); paired" if report.seed_averaged else "Paired"
    clauses = [
        f"{lead} comparison on {users} ({_hypotheses(len(comparisons))}): difference = candidate - baseline, mean "
        "over users",
        f"{interval_level_words(first)} paired {interval} bootstrap interval{_ratio_words(first)} from B = "
        f"{first.n_resamples:,} replicates",
        f"{tests[0] if len(tests) == 1 else 'by hypothesis, ' + ' or '.join(tests)}, "
        f"{margin_text(report) or words('alternative', first.alternative)}",
        correction,
        "W/T/L = users on which the candidate scored higher/equal/lower",
        _mde_clause(first),
    ]
    return "; ".join(clauses)


def interval_level_words(c: PairwiseComparison) -> str:
    """``95%``: the level of ``c``'s interval; against a margin ``90% (each end a one-sided 95% bound)``, the two-sided
    ``1 - 2 alpha`` interval whose ends the one-sided tests read."""
    if c.hypothesis == "superiority":
        return format_level(interval_level(c))
    return f"{format_level(interval_level(c))} (each end a one-sided {format_level(c.confidence_level)} bound)"


def margin_text(report: ComparisonReport) -> str:
    """The hypothesis and its margin in metric units and relative to the reference's mean, as raw text naming the
    metrics (``non-inferiority (H1: difference > -delta), delta = 0.005 on ndcg@100 (2.1% of the reference's
    mean)``); ``""`` for superiority."""
    first = report.comparisons[0]
    if first.hypothesis == "superiority":
        return ""
    margins = {c.metric: (c.margin, c.relative_margin) for c in report.comparisons}
    if first.margin_scale == "relative":
        each = ", ".join(
            f"{r:.2%} of the reference's mean on {m} ({format_margin(d)})" for m, (d, r) in margins.items()
        )
    else:
        each = ", ".join(
            f"{format_margin(d)} on {m} "
            + ("(the reference's mean is 0)" if math.isnan(r) else f"({r:.2%} of the reference's mean)")
            for m, (d, r) in margins.items()
        )
    return f"{words('hypothesis', first.hypothesis)}, delta = {each}"


def _ratio_words(c: PairwiseComparison) -> str:
    """`` of the ratio of means, written as ...``: what the interval of a row with a relative margin bounds."""
    if c.margin_scale != "relative":
        return ""
    return (
        " of the ratio of means (candidate / reference), written in metric units as (ratio - 1) x the reference's mean"
    )


def _mde_clause(c: PairwiseComparison) -> str:
    """What the ``mde`` column holds, for the settings line (see
    :func:`~mlflow_recsys.stats._margins.detectable_effect`)."""
    power = f"{REPORT_POWER:.0%} power at the level its hypothesis is tested at"
    if c.hypothesis == "non-inferiority":
        return f"mde = the smallest true difference shown non-inferior with {power}"
    if c.hypothesis == "equivalence":
        return f"mde = the largest true absolute difference shown equivalent with about {power}"
    return f"mde = the smallest true difference detected with {power}"


def report_markdown(report: ComparisonReport) -> str:
    """The display frame as a markdown table (via ``tabulate``), under :func:`settings_text`.

    Names and metric keys pass through :func:`escape_markdown` and are never read as numbers (a model called ``007``
    stays ``007``).
    """
    frame = display_frame(report)
    text_columns = ["metric", "baseline", "candidate"]
    for column in text_columns:
        frame[column] = frame[column].map(escape_markdown)
    # p-values keep the digits their Monte Carlo error supports (0.50, not 0.5): written as they are, like names.
    as_written = [*text_columns, "p_value", "adjusted_p"]
    table = frame.to_markdown(index=False, disable_numparse=[frame.columns.get_loc(c) for c in as_written])
    note = no_mde_note(report)
    text = escape_markdown(settings_text(report)) + ".\n\n" + table + (f"\n\n{note}" if note else "")
    return text + "".join(f"\n\n{part}" for part in later_sections(report, markdown=True))


def later_sections(report: ComparisonReport, *, markdown: bool) -> list[str]:
    """The global metrics and the exploratory slices, those the report has, in that order."""
    parts = []
    if report.global_metrics is not None:
        parts.append((global_markdown if markdown else global_string)(report.global_metrics))
    if report.slices is not None:
        parts.append((slices_markdown if markdown else slices_string)(report.slices))
    return parts


def _hypotheses(J: int) -> str:
    return f"{J} hypothes{'is' if J == 1 else 'es'}"


def family_phrase(report: ComparisonReport) -> str:
    """``over 4 hypotheses``, or the two families when the primary metric stands alone (naming it raw)."""
    families = report.families
    if "primary" not in families:
        return f"over {_hypotheses(report.family_size)}"
    phrase = f"within each family: the primary metric {report.primary} ({_hypotheses(families['primary'])})"
    if "secondary" in families:
        phrase += f" and the secondary metrics ({_hypotheses(families['secondary'])})"
    return phrase


def _correction_words(report: ComparisonReport) -> str:
    families, how = report.families, words("correction", report.correction, "methods")
    if report.correction is None:
        return how
    rate = words("correction", report.correction, "rate")
    if "primary" in families:
        primary = (
            f"the primary metric formed a family of its own ({_hypotheses(families['primary'])}, one per model pair)"
        )
        if "secondary" in families:
            primary += f" and the other metrics a second family ({_hypotheses(families['secondary'])})"
        return (
            f"{primary}; p-values were adjusted within each family with {how}, which controls each family's {rate}, "
            "so adding secondary metrics does not weaken the primary result"
        )
    if report.family_size == 1:
        return f"only one hypothesis was tested, so the {report.correction} adjustment leaves its p-value unchanged"
    return (
        f"p-values of all {report.family_size} hypotheses (every model pair and metric) were adjusted together "
        f"with {how}, which controls the {rate}"
    )


def methods_text(report: ComparisonReport) -> str:
    """A Methods paragraph naming the test, B, the interval, its level, the correction and the family; it names no model
    and no metric, so it is safe in markdown and HTML alike."""
    first = report.comparisons[0]
    methods = sorted({c.test_method for c in report.comparisons})
    B, alpha = first.n_resamples, first.alpha
    side = (
        "one-sided against the margin, as below"
        if first.hypothesis != "superiority"
        else words("alternative", first.alternative, "methods")
    )
    tests = " and ".join(words("test_method", m, "methods") for m in methods)
    if any(m.startswith("wilcoxon") for m in methods):
        tests += f" ({_wilcoxon_rule_words(report)})"
    units = (
        "Each user's rows were first averaged, so every user counts once. "
        if any(c.n_units != c.n_samples for c in report.comparisons)
        else ""
    )
    mc, correction = "", _correction_words(report)
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
        f"{_margin_methods(report)}"
        f"The uncertainty of each effect is a {interval_level_words(first)} {_interval_words(report)} from a paired "
        "bootstrap "
        f"over users with B = {B:,} replicates. {correction[:1].upper() + correction[1:]}; "
        f"a hypothesis is called significant when its adjusted p-value is at most {alpha:.2g}. "
        f"{interval_adjustment_words(report)} Intervals describe variation across "
        "evaluation users for the trained model instances compared; variation across training seeds is "
        f"reported separately. {effects_methods(report)}"
        f"{_mde_words(report)}"
    )


def _margin_methods(report: ComparisonReport) -> str:
    """The sentences of the Methods paragraph on a hypothesis tested against a margin; ``""`` for superiority."""
    first = report.comparisons[0]
    if first.hypothesis == "superiority":
        return ""
    relative = (
        "The margin was a fraction of the reference model's mean, so the ratio of the means was tested: the bootstrap "
        "interval of the ratio, the delta method for the t-test, and the per-user values candidate - (1 -/+ fraction) "
        "x reference for the other tests (Fieller, 1954). "
        if first.margin_scale == "relative"
        else ""
    )
    return (
        f"The hypothesis was {words('hypothesis', first.hypothesis, 'methods')}, where delta is the margin; each "
        "one-sided test was run on the per-user differences shifted by the margin, the bootstrap test by reading "
        f"its one-sided interval. {relative}"
    )


def _wilcoxon_rule_words(report: ComparisonReport) -> str:
    c = next(c for c in report.comparisons if c.test_method.startswith("wilcoxon"))
    zeros = f"; {words('zero_method', c.zero_method, 'methods')}" if c.zero_method is not None else ""
    return (
        f"computed with scipy.stats.wilcoxon: the exact null distribution when a hypothesis had at most "
        f"{WILCOXON_EXACT_MAX} differences, none zero and no two of equal size, the normal approximation "
        f"otherwise{zeros}"
    )


def _mde_words(report: ComparisonReport) -> str:
    """How the ``mde`` column was computed, at the level each hypothesis is tested at."""
    J = max(report.families.values())
    alpha = report.comparisons[0].alpha
    side = "two-sided" if report.comparisons[0].alternative == "two-sided" else "one-sided"
    if report.correction is not None and len(report.families) > 1:
        level = f"alpha/J = {alpha:.2g}/J (J the number of hypotheses in its family)"
    elif report.correction is None or J == 1:
        level = f"alpha = {alpha:.2g}"
    else:
        level = ("the Bonferroni level " if report.correction == "bonferroni" else "") + f"alpha/J = {alpha:.2g}/{J}"
    note = ""
    if report.correction == "holm" and "/J" in level:
        note = (
            " That is the level of the first step of Holm's procedure, the strictest any hypothesis meets, so the "
            "figure is conservative."
        )
    elif report.correction == "maxt" and "/J" in level:
        note = (
            " Max-T's critical value is no stricter than that when the hypotheses move together, so the figure is "
            "conservative."
        )
    if report.comparisons[0].hypothesis != "superiority":
        return (
            f"The mde column holds, by the normal approximation (Cohen, 1988) at {level}: "
            f"{_mde_clause(report.comparisons[0]).removeprefix('mde = ')}."
        )
    return (
        "The minimum detectable effect (mde) of each hypothesis is the smallest true mean difference that a "
        f"{side} test at {level} would detect with {REPORT_POWER:.0%} power, given the standard deviation "
        "of its per-user differences and the number of users, by the normal approximation "
        f"(Cohen, 1988), which is slightly optimistic for few users.{note}"
        + (f" {missing}" if (missing := no_mde_note(report)) else "")
    )


def _interval_words(report: ComparisonReport) -> str:
    """The interval method(s) of the report, with sources; says which rows fell back from BCa."""
    if report.comparisons[0].interval_method == "max-T":
        return words("interval_method", "max-T", "methods")
    fell = sum(c.interval_method == "percentile" for c in report.comparisons)
    if fell == report.family_size:
        return "percentile interval (Efron, 1979)"
    return (
        "bias-corrected and accelerated (BCa) interval (Efron, 1987; acceleration from the jackknife of the mean)"
        + (
            f"; for {fell} of {report.family_size} hypotheses every replicate fell on one side of the estimate, so the "
            "bias correction was infinite and the percentile interval (Efron, 1979) was reported instead"
            if fell
            else ""
        )
    )


#: How every :func:`results_text` sentence ends, in every markup: what tells a result sentence of the run notes from the
#: paragraphs around it (:func:`~mlflow_recsys.server._listing.note_sentences`).
RESULT_SENTENCE_END = "scored differently)."


def results_text(report: ComparisonReport, c: PairwiseComparison, *, markup: Writer = "plain") -> str:
    """One sentence: effect, interval, relative gain, test and B, adjusted p and its floor, n; it ends with
    :data:`RESULT_SENTENCE_END`.

    Parameters
    ----------
    report, c:
        The report and one of its comparisons.
    markup:
        ``"plain"`` (default: names as they are, for a terminal, a paper, or HTML escaping afterwards) or ``"markdown"``
        (names and the metric key through :func:`escape_markdown`, for run notes and ``.md`` files).

    Raises
    ------
    ValueError
        If ``markup`` is neither.
    """
    name = name_writer(markup)
    cand, base, metric = name(c.candidate), name(c.baseline), name(c.metric)
    if c.difference > 0 and c.significant and has_better_side(c.metric):
        effect = f"{cand} improved {metric} over {base} by {c.difference:.4f}"
    elif c.difference > 0:  # "improved" only for a significant result on a metric with a better side
        effect = f"{cand} scored {c.difference:.4f} higher than {base} on {metric}"
    elif c.difference < 0:
        effect = f"{cand} scored {-c.difference:.4f} lower than {base} on {metric}"
    else:
        effect = f"{cand} and {base} scored the same mean {metric}"
    test, p_words = _test_and_p_words(report, c)
    level = interval_level_words(c)
    interval = row_cells(c, signed=False).interval
    relative = (
        "a relative change that is undefined (the baseline's mean is 0)"
        if math.isnan(c.relative_difference)
        else f"a relative change of {c.relative_difference:+.1%}"
        + effect_interval(c.relative_ci_low, c.relative_ci_high, "+.1%", c)
    ) + dz_words(c)
    if c.hypothesis == "superiority":
        verdict = {
            "better": "significant, in the candidate's favour",
            "worse": "significant, in the baseline's favour",
            "higher": "significant: higher for the candidate (this metric has no better side)",
            "lower": "significant: lower for the candidate (this metric has no better side)",
            "inconclusive": "not significant",
        }[c.direction]
    else:
        verdict = decision_words(c)
    if c.baseline_seeds > 1 or c.candidate_seeds > 1:
        effect = f"Averaged over training seeds ({cand}: {c.candidate_seeds}, {base}: {c.baseline_seeds}), " + effect
    if interval_disagrees(c):
        verdict += f" ({disagreement_words(c, report.correction)})"
    if c.direction == "inconclusive" and not pd.isna(c.mde):
        verdict += _power_words(c)
    elif c.direction == "inconclusive":
        verdict += f"; no minimum detectable effect: {_no_mde_why(c)}"
    return (
        f"{effect} ({level} {words('interval_method', c.interval_method, 'result')}paired-bootstrap interval "
        f"{interval}, "
        f"{relative}; {test}, {p_words}; {verdict}{sign_test_words(c)}; n = {c.n_units:,} users, of whom "
        f"{c.n_nonzero:,} {RESULT_SENTENCE_END}"
    )


def _power_words(c: PairwiseComparison) -> str:
    """What the design of an inconclusive row could have shown with :data:`REPORT_POWER`, from its ``mde``."""
    users, power = f"{c.n_units:,} users", f"{REPORT_POWER:.0%} power"
    if c.hypothesis == "non-inferiority":
        return f"; with {users} a true difference of {c.mde:+.4f} or more would be shown non-inferior with {power}"
    if c.hypothesis == "equivalence":
        return f"; with {users} a true difference within \u00b1{c.mde:.4f} would be shown equivalent with about {power}"
    return f"; with {users} this comparison would detect a true difference of {c.mde:.4f} with {power}"


def _test_and_p_words(report: ComparisonReport, c: PairwiseComparison) -> tuple[str, str]:
    """The test of ``c`` as the result sentence names it, and its adjusted p-value with its floor when reached."""
    J, B, p = c.family_size, c.n_resamples, c.adjusted_p_value
    label = "p" if J == 1 else words("correction", report.correction, "p")
    p_words = f"{label} = {format_p(p, c.adjusted_p_value_mcse, c.alpha)}"
    if c.test_method in ("randomization", "bootstrap"):
        # Holm's and Bonferroni's smallest adjusted p is J times the smallest p; max-T's is the smallest p itself.
        floor = J / (B + 1) if report.correction in ("holm", "bonferroni") else 1 / (B + 1)
        if abs(p - min(1.0, floor)) <= 1e-12:
            p_words += f", the smallest attainable with {B:,} resamples" + (f" and {J} hypotheses" if J > 1 else "")
    return words("test_method", c.test_method, "result", B=B), p_words


def seed_spread_text(spread: SeedSpread, metric: str, *, markup: Writer = "plain") -> str:
    """One sentence on the seed spread of ``metric``; parameters and errors as :meth:`SeedSpread.results_text
    <mlflow_recsys.stats.SeedSpread.results_text>`, which calls it."""
    name, r = name_writer(markup), _seed_row(spread, metric)
    reversals = (
        "no seed reversed the sign"
        if r.sign_reversals == 0
        else f"{r.sign_reversals} of {r.n_seeds} seeds reversed the sign"
    )
    if pd.isna(r.ratio):  # the models tie on every user: no spread across users to set beside it
        spreads = (
            f"its SD across retraining is {r.sd_retraining:.4f}, and with no spread across users "
            "(bootstrap standard error 0) the two cannot be compared"
        )
    else:
        spreads = (
            f"its SD across retraining, {r.sd_retraining:.4f}, is {r.ratio:.2f} times its bootstrap "
            f"standard error over users, {r.sd_users:.4f}, so allowing for retraining widens the "
            f"interval by {r.widens_by:.1%}"
        )
    text = (
        f"{seed_protocol_text(spread, metric, markup=markup)}. "
        f"Over {r.n_seeds} seeds, {name(r.candidate)} minus {name(r.baseline)} on {name(metric)} "
        f"averaged {r.mean_difference:+.4f} (from {r.min_difference:+.4f} to {r.max_difference:+.4f}); "
        f"{spreads}, and {reversals}."
    )
    if r.notes:
        text += f" Note: {r.notes}."
    return text


def seed_protocol_text(spread: SeedSpread, metric: str, *, markup: Writer = "plain") -> str:
    """How the seeds of ``metric``'s seed-spread row were used (``ELSA trained under 3 seeds, EASE once: ...``), no
    final full stop; KeyError when ``metric`` is not in the table."""
    r = _seed_row(spread, metric)
    base, cand = name_writer(markup)(r.baseline), name_writer(markup)(r.candidate)
    if r.protocol == "paired-seeds":
        return f"{cand} and {base} trained under the same {r.n_seeds} seeds, paired by seed (shared randomness)"
    if r.protocol == "independent-seeds":
        return (
            f"{cand} and {base} each trained under their own seeds, treated as independent: the spread adds "
            "each model's own spread across its seeds"
        )
    per_seed = spread.per_seed[spread.per_seed["metric"] == metric]
    seeded, once = (base, cand) if per_seed["candidate_seed"].isna().all() else (cand, base)
    return f"{seeded} trained under {r.n_seeds} seeds, {once} once: the spread is {seeded}'s retraining alone"


def _seed_row(spread: SeedSpread, metric: str) -> pd.Series:
    rows = spread.summary[spread.summary["metric"] == metric]
    if rows.empty:
        raise KeyError(f"metric: expected one of {spread.summary['metric'].tolist()}, found {metric!r}")
    return rows.iloc[0]


def report_string(report: ComparisonReport) -> str:
    """The report as a fixed-width text table under one line stating the settings (:func:`settings_text` and alpha).

    The columns are metric, ``candidate vs baseline``, difference, interval, adjusted p, direction, W/T/L and mde, one
    row per hypothesis. A seed-averaged report says so first: the settings line starts with ``Seed-averaged over
    training seeds (EASE: 1 seed; ELSA: 3 seeds)`` and each side averaged over several seeds is named with their number,
    ``ELSA (3 seeds) vs EASE``. Names and metric keys are written with control characters as visible escapes
    (:func:`~mlflow_recsys.report.visible_text`), so every row is one line.

    Parameters
    ----------
    report:
        Any report; one without hypotheses gives a one-line note.

    Returns
    -------
    str
        ``2 + len(report.comparisons)`` lines (settings, header, rows), no trailing newline; one more,
        :func:`no_mde_note`, when some row has no minimum detectable effect (its mde reads ``n/a``).
    """
    if not report.comparisons:
        return "ComparisonReport with no hypotheses"
    # The names in it (the primary metric, seed-averaged models) stay on one line.
    settings = visible_text(settings_text(report)) + f"; alpha = {report.comparisons[0].alpha:.6g}"
    header = ["metric", "candidate vs baseline", "difference", "interval", "adj. p", "direction", "W/T/L", "mde"]
    cells = [row_cells(c) for c in report.comparisons]
    rows = [
        [visible_text(r.metric), r.pair(), r.difference, r.interval, r.adjusted_p, r.direction, r.wtl, r.mde]
        for r in cells
    ]
    note = no_mde_note(report)
    text = settings + "\n" + "\n".join(aligned([header, *rows], right={2, 4, 7})) + (f"\n{note}" if note else "")
    return text + "".join(f"\n\n{part}" for part in later_sections(report, markdown=False))


def report_summary(report: ComparisonReport) -> str:
    """One line per hypothesis: metric, pair, difference and interval, adjusted p, direction, W/T/L and mde.

    E.g. ``ndcg@100  ELSA vs EASE  -0.0059 [-0.0223, +0.0110]  adj. p 0.8550 inconclusive  W/T/L 81/1/106  mde 0.0261``,
    fields aligned across lines; in a seed-averaged report a side averaged over several training seeds is named with
    their number, ``ELSA (3 seeds) vs EASE``. Names are written as in :func:`report_string`, so
    ``len(report_summary(r).splitlines()) == len(r.comparisons)``.

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
            visible_text(r.metric),
            r.pair(),
            f"{r.difference} {r.interval}",
            f"adj. p {r.adjusted_p}",
            r.direction,
            f"W/T/L {r.wtl}",
            f"mde {r.mde}",
        ]
        for r in map(row_cells, report.comparisons)
    ]
    return "\n".join(aligned(rows, right=set()))


def _test_label(c: PairwiseComparison) -> str:
    """``paired sign-flip randomization test (B = 9,999 random sign patterns)``: the test of ``c`` in words."""
    zeros = words("zero_method", c.zero_method) if c.zero_method else "zero differences as scipy treats them"
    return words("test_method", c.test_method, B=c.n_resamples, zeros=zeros)


def _seed_counts(report: ComparisonReport) -> str:
    """``EASE: 1 seed; ELSA: 5 seeds``, as raw text: it names models, so escape it as a whole."""
    counts: dict[str, dict[int, None]] = {}  # the counts of each model, in the order first seen
    for c in report.comparisons:
        for model, n in ((c.baseline, c.baseline_seeds), (c.candidate, c.candidate_seeds)):
            counts.setdefault(model, {})[n] = None
    return "; ".join(
        f"{model}: {' or '.join(map(str, ns))} seed{'' if list(ns) == [1] else 's'}" for model, ns in counts.items()
    )
