"""Paired comparison of recommenders evaluated on the same users.

Every hypothesis works on per-unit differences ``d_u = mean(candidate rows of u) - mean(baseline rows of u)``: the
effect is their mean, the interval is a paired percentile bootstrap over units (Efron 1979) that always contains the
effect, and the default test is a paired sign-flip randomization test (Fisher 1935; Smucker, Allan & Carterette 2007)
with the Monte Carlo p-value ``(1 + #extreme) / (B + 1)`` (Davison & Hinkley 1997; Phipson & Smyth 2010). p-values of
one call are adjusted together (Holm 1979 by default). On request the interval is the bias-corrected and accelerated
(BCa) bootstrap interval (Efron 1987) and the test the Wilcoxon signed-rank test (Wilcoxon 1945).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mlflow_recsys._validation import metric_keys
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._corrections import Correction, adjust_p_values
from mlflow_recsys.stats._effects import adjusted_mcse
from mlflow_recsys.stats._exposure import ExposureAnalysis, compare_exposure
from mlflow_recsys.stats._inference import WILCOXON_EXACT_MAX, pair_rows, wilcoxon_method
from mlflow_recsys.stats._margins import decision, detectable_effect
from mlflow_recsys.stats._maxt import maxt_family
from mlflow_recsys.stats._pairing import check_results, paired_differences, units_of
from mlflow_recsys.stats._resampling import padded_width
from mlflow_recsys.stats._results import COLUMNS, ComparisonReport, Markup, PairwiseComparison, significance_level
from mlflow_recsys.stats._settings import (
    Alternative,
    ComparisonSettings,
    Family,
    Hypothesis,
    IntervalMethod,
    TestMethod,
    ZeroMethod,
)
from mlflow_recsys.stats._slices import check_slices, slice_analysis, slice_members
from mlflow_recsys.stats._strata import Slice
from mlflow_recsys.stats._warnings import LowResamplesWarning, warn

__all__ = [
    "COLUMNS",
    "MAX_REPLICATE_BYTES",
    "WILCOXON_EXACT_MAX",
    "ComparisonReport",
    "Markup",
    "PairwiseComparison",
    "check_replicate_memory",
    "compare_models",
    "compare_pair",
    "mde_alpha",
    "stratum_columns",
    "wilcoxon_method",
]

#: Bytes of replicates a report may keep: every hypothesis holds its B null and B bootstrap means (float64), and so
#: does every stratum column of its slices.
MAX_REPLICATE_BYTES = 4 * 1024**3


def stratum_columns(n_pairs: int, n_strata: int, n_metrics: int) -> int:
    """Replicate columns a comparison's slices hold: per model pair and stratum (of every slice), the stratified
    bootstrap and sign-flip means of each metric, the metrics padded to the kernels' lane width."""
    return n_pairs * n_strata * padded_width(n_metrics)


def check_replicate_memory(n_resamples: int, n_hypotheses: int, n_stratum_columns: int = 0) -> None:
    """ValueError, naming the numbers and the memory, when the replicates a call holds (16 bytes x B for each hypothesis
    and each stratum column, :func:`stratum_columns`) would exceed :data:`MAX_REPLICATE_BYTES`."""
    needed = 16 * n_resamples * (n_hypotheses + n_stratum_columns)
    if needed > MAX_REPLICATE_BYTES:
        strata = f" and {n_stratum_columns:,} stratum columns of its slices" if n_stratum_columns else ""
        fewer = "metrics, models or strata" if n_stratum_columns else "metrics or models"
        raise ValueError(
            f"n_resamples: {n_resamples:,} resamples for each of {n_hypotheses:,} hypotheses{strata} would keep "
            f"{needed / 1024**3:.1f} GiB of replicates (16 bytes each), expected at most "
            f"{MAX_REPLICATE_BYTES / 1024**3:.0f} GiB; lower n_resamples, or compare fewer {fewer}"
        )


def compare_pair(
    baseline: EvaluationResult,
    candidate: EvaluationResult,
    *,
    metric: str,
    baseline_name: str = "baseline",
    candidate_name: str = "candidate",
    confidence_level: float = 0.95,
    n_resamples: int = 9999,
    alternative: Alternative = "two-sided",
    test_method: TestMethod = "randomization",
    random_state: int | None = 0,
    interval_method: IntervalMethod = "percentile",
    zero_method: ZeroMethod = "wilcox",
    hypothesis: Hypothesis = "superiority",
    margin: float | None = None,
    relative_margin: bool = False,
) -> PairwiseComparison:
    """Compare two models on one metric: a single hypothesis, not adjusted.

    Parameters are those of :func:`compare_models`; ``baseline_name`` and ``candidate_name`` label the rows and seed the
    random stream, so the numbers equal those of the same pair inside a :func:`compare_models` call with the same
    settings (before adjustment).

    Returns
    -------
    PairwiseComparison
        With ``adjusted_p_value == p_value``.

    Raises
    ------
    ValueError, TypeError
        As :func:`compare_models`.
    """
    if baseline_name == candidate_name:
        raise ValueError(
            f"candidate_name: expected a name different from baseline_name, found {candidate_name!r} for both"
        )
    if not isinstance(metric, str):
        raise TypeError(f"metric: expected one metric key (str), found {type(metric).__name__}")
    settings = ComparisonSettings(
        reference=baseline_name,
        metrics=(metric,),
        correction=None,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        alternative=alternative,
        test_method=test_method,
        random_state=random_state,
        interval_method=interval_method,
        zero_method=zero_method,
        hypothesis=hypothesis,
        margin=margin,
        relative_margin=relative_margin,
    )
    return _compare({baseline_name: baseline, candidate_name: candidate}, settings).comparisons[0]


def compare_models(
    results: Mapping[str, EvaluationResult],
    *,
    metrics: str | Sequence[str],
    reference: str | None = None,
    correction: Correction = "holm",
    confidence_level: float = 0.95,
    n_resamples: int = 9999,
    alternative: Alternative = "two-sided",
    test_method: TestMethod = "randomization",
    random_state: int | None = 0,
    interval_method: IntervalMethod = "percentile",
    zero_method: ZeroMethod = "wilcox",
    primary: str | None = None,
    family: Family = "primary",
    hypothesis: Hypothesis = "superiority",
    margin: float | None = None,
    relative_margin: bool = False,
    slices: Slice | Sequence[Slice] | None = None,
    global_metrics: str | Sequence[str] | None = None,
) -> ComparisonReport:
    """Compare several models pairwise on several metrics, adjusting p-values within their family.

    Parameters
    ----------
    results:
        Model name -> :class:`~mlflow_recsys.evaluation.EvaluationResult`, at least two, all evaluated on the same
        sample ids in the same order, with per-user values.
    metrics:
        One metric key or a list of keys (e.g. ``["ndcg@100", "recall@20"]``).
    reference:
        Name of the baseline every other model is compared against. ``None`` compares every pair, the earlier model in
        ``results`` as baseline.
    correction:
        ``"holm"`` (default), ``"bonferroni"``, ``"maxt"`` or ``None``. The family is every (pair, metric)
        hypothesis of this call. ``"maxt"`` is the Westfall-Young max-T step-down procedure (Westfall & Young 1993) on
        the family's joint sign flips, with simultaneous max-T bootstrap intervals in place of each row's own
        (:mod:`~mlflow_recsys.stats._maxt`); it needs ``test_method="randomization"``, superiority and
        ``interval_method="percentile"``.
    confidence_level:
        Level of the bootstrap interval, default 0.95; ``alpha = 1 - confidence_level`` is also the significance level.
    n_resamples:
        Sign assignments and bootstrap replicates B, default 9999. The smallest attainable Monte Carlo p-value is ``1 /
        (B + 1)``.
    alternative:
        ``"two-sided"`` (default), ``"greater"`` (the candidate's metric higher: better only where higher is
        better, not e.g. for the Gini index) or ``"less"``; the interval is one-sided to match.
    test_method:
        ``"randomization"`` (default; sign flips of unit differences, enumerated exactly when ``2**n_nonzero <=
        n_resamples`` and then reported as ``"randomization-exact"``), ``"bootstrap"`` (null-centred, reusing the
        interval's replicates), ``"t"`` (one-sample t-test of the unit differences, ``scipy.stats.ttest_1samp``; Student
        1908) or ``"wilcoxon"`` (Wilcoxon signed-rank test of the unit differences, ``scipy.stats.wilcoxon`` with the
        method this package chooses, :func:`wilcoxon_method`: the exact null for at most 50 differences without zeros or
        tied magnitudes, reported as ``"wilcoxon-exact"``, and the tie-corrected normal approximation otherwise,
        reported as ``"wilcoxon"``; Wilcoxon 1945) or ``"sign"`` (the exact binomial test of wins against losses, zero
        differences dropped; Dixon & Mood 1946). The Wilcoxon test asks whether the differences are symmetric about 0 (a
        median-like location) and the sign test whether a user is more likely to gain than to lose, not whether the mean
        difference is 0, so either can disagree with the others on skewed differences.
    random_state:
        Non-negative int (default 0) or ``None`` for fresh entropy. Each model pair draws from its own stream derived
        from this seed and the two names, so a hypothesis' numbers do not depend on the other models or metrics in the
        call.
    interval_method:
        ``"percentile"`` (default; Efron 1979) or ``"bca"``, the bias-corrected and accelerated interval (Efron 1987)
        from the same bootstrap replicates, with the acceleration from the jackknife of the mean. A row whose bias
        correction is infinite falls back to the percentile interval and reports ``interval_method="percentile"``.
    zero_method:
        Only for ``test_method="wilcoxon"``: ``"wilcox"`` (default, scipy's; drop zero differences before ranking),
        ``"pratt"`` (rank them, then drop their ranks; Pratt 1959) or ``"zsplit"`` (split their ranks between the
        signs).
    primary:
        The metric the conclusion rests on, one of ``metrics``, or ``None``.
    family:
        ``"primary"`` (default): with a ``primary`` metric, its hypotheses (one per model pair) are adjusted as one
        family and the other metrics' as another, so the primary result does not weaken as secondary metrics are added;
        ``"all"``: one family over every hypothesis. Without a ``primary`` metric there is one family either way. Each
        family controls its own family-wise error rate (Holm 1979; Bonferroni).
    hypothesis:
        ``"superiority"`` (default: is the candidate better or worse?), ``"non-inferiority"`` (H0: difference <=
        -margin against H1: difference > -margin, one-sided at alpha; Blackwelder 1982) or ``"equivalence"`` (two
        one-sided tests at alpha, TOST; Schuirmann 1987). Either of the last two needs ``margin``, a ``reference`` and
        ``alternative="two-sided"`` (they set their own sides); its interval is the two-sided ``1 - 2 alpha`` one.
        Every ``test_method`` applies: see :mod:`~mlflow_recsys.stats._margins` for how each is shifted.
    margin:
        float > 0, with non-inferiority or equivalence only: the margin delta in metric units, or, with
        ``relative_margin``, a fraction in (0, 1) of the reference's mean.
    relative_margin:
        bool, default False: read ``margin`` as a fraction of the reference's mean and test the ratio of means
        (bootstrap percentile interval of the ratio; the delta method for ``test_method="t"``). A reference mean that
        is not positive is refused. Not with ``interval_method="bca"``.
    slices:
        Pre-declared strata of the users, :class:`~mlflow_recsys.stats.Slice` objects (e.g.
        :func:`~mlflow_recsys.stats.history_slice`), superiority only. Each stratum of each slice is compared like the
        whole (the same test, interval and B; a stratified bootstrap from the random numbers of the pair's own, which it
        leaves unchanged), the strata rows of a slice are Holm-adjusted as a family of their own, and Cochran's Q tests
        their heterogeneity; the report's ``slices`` (:class:`~mlflow_recsys.stats.SliceAnalysis`) holds them, labelled
        exploratory, and they never enter the families of the hypotheses above (:mod:`~mlflow_recsys.stats._slices`).
    global_metrics:
        Keys ``"coverage@k"`` and ``"gini@k"``: metrics of all users' lists together, compared for each model against
        ``reference`` (default: the first model) by :func:`~mlflow_recsys.stats.compare_exposure` with this call's B,
        level, alternative and seed: a paired bootstrap interval over users and a randomization test that swaps each
        user's two lists, Holm-adjusted as a family of their own (the report's ``global_metrics``). Every result must
        keep its scored lists (``EvaluationResult.rankings``), one row per user.

    Returns
    -------
    ComparisonReport
        Every row has ``ci_low <= difference <= ci_high``. Degenerate differences are results, not errors: when the
        models tie on every unit the difference and the interval are 0 and every test and alternative gives p = 1 (each
        sign flip and each resample ties the observed 0); a constant non-zero difference gives the interval
        ``[difference, difference]``. A per-user difference no larger than
        :data:`~mlflow_recsys.stats._pairing.TIE_RTOL` (1e-12) times the larger of its two values is rounding, not a
        difference, and counts as 0 (a tie).

    Raises
    ------
    TypeError
        If ``results`` is not a mapping of EvaluationResult.
    ValueError
        If fewer than two results; a result lacks per-user values; ``global_metrics`` with a result that kept no lists
        or has several rows per user; slices with a margin hypothesis, a slice repeated,
        a compared user without a stratum, the compared users all in one stratum, or a stratum of fewer than two users;
        sample ids differ in length, content or
        order; targets fingerprints differ; a metric was not evaluated; per-user values are not finite or above
        1e100 in magnitude; fewer than two units; a one-sided alternative without ``reference``; a setting is out of
        range (``n_resamples`` at most :data:`MAX_RESAMPLES`); or the replicates kept would exceed
        :data:`MAX_REPLICATE_BYTES` (the strata of the slices counted too, :func:`stratum_columns`).

    Warns
    -----
    UnverifiedPairingWarning
        When a result has no targets fingerprint.
    LowResamplesWarning
        When ``n_resamples < 999`` with a resampling test.
    FewNonzeroUnitsWarning
        When fewer than 30 units differ for a hypothesis.
    IntervalFallbackWarning
        When ``interval_method="bca"`` and a hypothesis' bias correction is infinite, so its row reports the percentile
        interval.
    """
    settings = ComparisonSettings(  # every setting checked, in one place
        reference=reference,
        metrics=tuple(metric_keys(metrics)),
        primary=primary,
        family=family,
        hypothesis=hypothesis,
        margin=margin,
        relative_margin=relative_margin,
        correction=correction,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        alternative=alternative,
        test_method=test_method,
        zero_method=zero_method,
        interval_method=interval_method,
        random_state=random_state,
        global_metrics=None if global_metrics is None else tuple(metric_keys(global_metrics, "global_metrics")),
    )
    return _compare(results, settings, slices)


def _compare(
    results: Mapping[str, EvaluationResult],
    settings: ComparisonSettings,
    slices: Slice | Sequence[Slice] | None = None,
) -> ComparisonReport:
    """The one path of :func:`compare_models`, :func:`compare_pair` and :meth:`ComparisonSettings.compare`."""
    metrics = list(settings.metrics or ())
    chosen = () if slices is None else check_slices(slices)
    if chosen and settings.hypothesis != "superiority":
        raise ValueError(
            f"slices: expected them with hypothesis 'superiority' (strata are explored, not gated), "
            f"found hypothesis {settings.hypothesis!r}"
        )
    names = check_results(results, metrics)
    pairs = _pairs(names, settings.reference)
    units = units_of(results[names[0]])
    members = slice_members(chosen, units.ids)  # every user labelled, every stratum large enough, before resampling
    n_strata = sum(len(strata) for strata in members)
    check_replicate_memory(
        settings.n_resamples, len(pairs) * len(metrics), stratum_columns(len(pairs), n_strata, len(metrics))
    )
    if settings.n_resamples < 999 and settings.test_method in ("randomization", "bootstrap"):
        _warn_low_resamples(settings, len(pairs))
    paired = [paired_differences(results, pair, metrics, units) for pair in pairs]
    drawn = [pair_rows(pair, settings, [list(strata.values()) for strata in members]) for pair in paired]
    comparisons = [row for rows, _ in drawn for row in rows]
    stratum_means = [means for _, means in drawn]
    analysis = slice_analysis(paired, chosen, members, stratum_means, settings) if chosen else None
    exposure = _global_metrics(results, names, settings) if settings.global_metrics else None
    adjusted = _adjusted(comparisons, settings)
    return ComparisonReport(adjusted, settings.correction, settings.reference, settings.primary, analysis, exposure)


def _global_metrics(
    results: Mapping[str, EvaluationResult], names: list[str], settings: ComparisonSettings
) -> ExposureAnalysis:
    """:func:`compare_exposure` of the results' scored lists (their rows already checked to be the same users, in
    the same order) under the comparison's settings."""
    lists = {}
    for name in names:
        result = results[name]
        if result.rankings is None or result.n_items is None:
            raise ValueError(
                f"global_metrics: expected results that kept their scored lists (EvaluationResult.rankings), found "
                f"none in results[{name!r}]"
            )
        lists[name] = result.rankings
    catalogues = sorted({int(results[name].n_items or 0) for name in names})
    if len(catalogues) > 1:
        raise ValueError(f"global_metrics: expected lists over one catalogue, found n_items {catalogues}")
    ids = np.asarray(results[names[0]].sample_ids)
    if len(pd.unique(ids)) != len(ids):
        raise ValueError(
            "global_metrics: expected one row per user (a list each), found users with several rows (evaluation "
            "draws); compare the global metrics of one draw"
        )
    return compare_exposure(
        lists,
        n_items=catalogues[0],
        metrics=settings.global_metrics or (),
        reference=settings.reference,
        n_resamples=settings.n_resamples,
        confidence_level=settings.confidence_level,
        alternative=settings.alternative,
        random_state=settings.random_state,
    )


def _warn_low_resamples(settings: ComparisonSettings, n_pairs: int) -> None:
    """LowResamplesWarning: with B below 999 the smallest (adjusted) p-value may not reach alpha."""
    B, n_metrics = settings.n_resamples, len(settings.metrics or ())
    # The largest family sets the floor: the secondary metrics' when the primary one stands alone.
    split = settings.primary is not None and settings.family == "primary" and n_metrics > 1
    J = n_pairs * (n_metrics - 1 if split else n_metrics)
    floor = (
        f"the smallest adjusted p-value is J/(B+1) = {J / (B + 1):.4g}"
        if settings.correction != "maxt"
        else "the smallest max-T-adjusted p-value is 1/(B+1) too"
    )
    warn(
        f"n_resamples={B} is below 999: the smallest Monte Carlo p-value is "
        f"1/(B+1) = {1 / (B + 1):.4g}, and with {J} hypothes{'is' if J == 1 else 'es'} "
        f"adjusted together {floor} (alpha = {significance_level(settings.confidence_level):.4g})",
        LowResamplesWarning,
    )


def _adjusted(comparisons: list[PairwiseComparison], settings: ComparisonSettings) -> tuple[PairwiseComparison, ...]:
    """The comparisons with p-values adjusted within each family (``"primary"`` and ``"secondary"``, or ``"all"``), and
    the columns that follow from them; with max-T, the family's simultaneous intervals too."""
    if settings.primary is None or settings.family != "primary":
        labels = ["all"] * len(comparisons)
    else:
        labels = ["primary" if c.metric == settings.primary else "secondary" for c in comparisons]
    alpha = significance_level(settings.confidence_level)
    final = list(comparisons)
    for label in dict.fromkeys(labels):
        members = [i for i, lab in enumerate(labels) if lab == label]
        if settings.correction == "maxt":
            adjusted, errors, lows, highs = maxt_family([comparisons[i] for i in members], settings, label, alpha)
            for i, low, high in zip(members, lows, highs, strict=True):
                final[i] = dataclasses.replace(
                    final[i], ci_low=float(low), ci_high=float(high), interval_method="max-T"
                )
        else:
            p_values = np.array([comparisons[i].p_value for i in members])
            adjusted = adjust_p_values(p_values, settings.correction)
            unadjusted_errors = np.array([comparisons[i].p_value_mcse for i in members])
            errors = adjusted_mcse(p_values, unadjusted_errors, adjusted, settings.correction)
        level = mde_alpha(alpha, settings.correction, len(members))
        for i, p, error in zip(members, adjusted, errors, strict=True):
            c = final[i]
            sd = float(np.std(c.unit_differences, ddof=1))  # units_of has ensured at least two users
            final[i] = dataclasses.replace(
                c,
                adjusted_p_value=float(p),
                adjusted_p_value_mcse=float(error),
                family=label,
                family_size=len(members),
                mde=detectable_effect(c, sd, level),
                significant=bool(p <= alpha),
                direction=decision(c, bool(p <= alpha)),
            )
    return tuple(final)


def mde_alpha(alpha: float, correction: Correction, family_size: int) -> float:
    """The level the ``mde`` column is computed at: ``alpha / J`` (the family's size) with a correction, else ``alpha``.
    For Holm (1979) that is its first step, the strictest a hypothesis can meet (the step it is tested at depends on the
    other p-values); Holm rejects whatever Bonferroni does, so the figure is conservative."""
    return alpha / family_size if correction is not None else alpha


def _pairs(names: list[str], reference: str | None) -> list[tuple[str, str]]:
    if reference is None:  # two-sided: ComparisonSettings refuses a one-sided alternative without a reference
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if reference not in names:
        raise ValueError(f"reference: expected one of the compared models {names}, found {reference!r}")
    return [(reference, n) for n in names if n != reference]
