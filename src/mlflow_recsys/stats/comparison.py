"""Paired comparison of recommenders evaluated on the same users.

Every hypothesis works on per-unit differences ``d_u = mean(candidate rows of u)
- mean(baseline rows of u)``: the effect is their mean, the interval is a paired
percentile bootstrap over units (Efron 1979) that always contains the effect, and
the default test is a paired sign-flip randomization test (Fisher 1935; Smucker,
Allan & Carterette 2007) with the Monte Carlo p-value ``(1 + #extreme) /
(B + 1)`` (Davison & Hinkley 1997; Phipson & Smyth 2010). p-values of one call
are adjusted together (Holm 1979 by default). On request the interval is the
bias-corrected and accelerated (BCa) bootstrap interval (Efron 1987) and the
test the Wilcoxon signed-rank test (Wilcoxon 1945).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
import scipy.stats

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats.corrections import Correction, adjust_p_values
from mlflow_recsys.stats.power import REPORT_POWER, minimum_detectable_effect
from mlflow_recsys.stats.resampling import (
    MAX_EXACT_UNITS,
    bootstrap_means,
    centred_means,
    column_centres,
    exact_sign_flip_means,
    sign_flip_means,
)
from mlflow_recsys.stats.settings import (
    Alternative,
    ComparisonSettings,
    Family,
    IntervalMethod,
    TestMethod,
    ZeroMethod,
)
from mlflow_recsys.stats.units import Units
from mlflow_recsys.stats.warnings import (
    FewNonzeroUnitsWarning,
    IntervalFallbackWarning,
    LowResamplesWarning,
    UnverifiedPairingWarning,
    warn,
)
from mlflow_recsys.validation import metric_keys

#: How names are written in a sentence of text: escaped for markdown, or as they are.
Markup = Literal["markdown", "plain"]

#: Bytes of replicates a report may keep: every hypothesis holds its B null and B bootstrap means (float64).
MAX_REPLICATE_BYTES = 4 * 1024**3


def check_replicate_memory(n_resamples: int, n_hypotheses: int) -> None:
    """Refuse a call whose kept replicates would exceed :data:`MAX_REPLICATE_BYTES` (16 bytes x B x J).

    Raises
    ------
    ValueError
        Naming both numbers and the memory they would take.
    """
    needed = 16 * n_resamples * n_hypotheses
    if needed > MAX_REPLICATE_BYTES:
        raise ValueError(
            f"n_resamples: {n_resamples:,} resamples for each of {n_hypotheses:,} hypotheses would keep "
            f"{needed / 1024**3:.1f} GiB of replicates (16 bytes each), expected at most "
            f"{MAX_REPLICATE_BYTES / 1024**3:.0f} GiB; lower n_resamples, or compare fewer metrics or models"
        )


def significance_level(confidence_level: float) -> float:
    """``alpha = 1 - confidence_level``, rounded to 12 decimals.

    In binary floating point ``1 - 0.9`` is ``0.09999999999999998``, so a
    p-value of exactly 0.1 would fail ``p <= alpha`` although every text
    states alpha = 0.1; the rounding gives the level the texts state.
    """
    return round(1.0 - confidence_level, 12)


#: Below this many non-zero units the null distribution is too coarse to trust quietly.
MIN_NONZERO_UNITS = 30

#: The columns of :meth:`PairwiseComparison.to_frame`, in order.
COLUMNS = (
    "metric",
    "baseline",
    "candidate",
    "baseline_seeds",
    "candidate_seeds",
    "n_samples",
    "n_units",
    "n_nonzero",
    "tie_rate",
    "wins",
    "ties",
    "losses",
    "baseline_mean",
    "candidate_mean",
    "difference",
    "relative_difference",
    "ci_low",
    "ci_high",
    "confidence_level",
    "bootstrap_standard_error",
    "p_value",
    "adjusted_p_value",
    "mde",
    "family",
    "family_size",
    "significant",
    "direction",
    "alternative",
    "test_method",
    "interval_method",
    "n_resamples",
    "random_state",
)


@dataclass(frozen=True, eq=False)
class PairwiseComparison:
    """One hypothesis: ``candidate`` against ``baseline`` on one metric.

    ``difference`` is candidate minus baseline (positive favours the candidate).
    The frame columns are :data:`COLUMNS`; the raw material of the resampling is
    kept so a user can recompute with another convention (the attributes below
    are those beyond the columns).

    Attributes
    ----------
    unit_differences:
        float64 ``(n_units,)``: the per-unit differences every procedure used.
    null_distribution:
        float64: the test's null replicates of the mean difference (all ``2**n_nonzero``
        of them for an exact test), or ``None`` for the t-test and the Wilcoxon test.
    bootstrap_distribution:
        float64 ``(n_resamples,)``: bootstrap replicates of the mean difference.
    zero_method:
        How the Wilcoxon test treated zero differences (one of :data:`ZERO_METHODS`),
        or ``None`` for the other tests. The methods text names it.
    family, family_size:
        The family the p-value was adjusted in (``"primary"``, ``"secondary"``
        or ``"all"``) and its number of hypotheses J.

    ``baseline_seeds`` and ``candidate_seeds`` (int) count the trained
    instances whose per-user values each side averages: 1 for a single trained
    model (:func:`compare_models`), the number of training seeds in a
    seed-averaged comparison (:func:`~mlflow_recsys.stats.compare_seed_averaged`).

    ``wins``, ``ties`` and ``losses`` (int) count the units (users, after
    averaging each user's rows) on which the candidate scored higher than, equal
    to, and lower than the baseline: they add up to ``n_units``, and ``ties ==
    n_units - n_nonzero``. ``interval_method`` is ``"bca"`` or ``"percentile"``;
    a row asked for BCa reports ``"percentile"`` when its bias correction is
    infinite (every replicate on one side of the estimate) and the percentile
    interval was used instead.

    The column ``mde`` is the minimum detectable effect: the smallest true mean
    difference this design detects with 80% power,
    :func:`~mlflow_recsys.stats.power.minimum_detectable_effect` of the SD (ddof=1) of
    ``unit_differences``, ``n_units`` and the alternative, at the level the
    hypothesis is tested at after adjustment (:func:`mde_alpha`). NaN on a
    single unit and when the unit differences have no spread (SD 0, e.g. a
    model compared with itself): then no minimum detectable effect can be
    estimated, and the reports say so in words.
    """

    metric: str
    baseline: str
    candidate: str
    baseline_seeds: int
    candidate_seeds: int
    n_samples: int
    n_units: int
    n_nonzero: int
    tie_rate: float
    wins: int
    ties: int
    losses: int
    baseline_mean: float
    candidate_mean: float
    difference: float
    relative_difference: float
    ci_low: float
    ci_high: float
    confidence_level: float
    bootstrap_standard_error: float
    p_value: float
    adjusted_p_value: float
    family: str
    family_size: int
    mde: float
    significant: bool
    direction: str
    alternative: str
    test_method: str
    interval_method: str
    n_resamples: int
    random_state: int | None
    unit_differences: np.ndarray = field(repr=False)
    null_distribution: np.ndarray | None = field(repr=False)
    bootstrap_distribution: np.ndarray = field(repr=False)
    zero_method: str | None = None

    @property
    def alpha(self) -> float:
        """The significance level, :func:`significance_level` of ``confidence_level``."""
        return significance_level(self.confidence_level)

    @property
    def averages_seeds(self) -> bool:
        """Whether a side averages two or more trained instances (``baseline_seeds`` or ``candidate_seeds`` > 1)."""
        return self.baseline_seeds > 1 or self.candidate_seeds > 1

    def to_frame(self) -> pd.DataFrame:
        """One row holding :data:`COLUMNS`."""
        return pd.DataFrame([{c: getattr(self, c) for c in COLUMNS}], columns=list(COLUMNS))


@dataclass(frozen=True, eq=False)
class ComparisonReport:
    """Every hypothesis of one :func:`compare_models` call, adjusted within its family.

    With a ``primary`` metric and ``family="primary"`` (the default), the primary
    metric's hypotheses form one family and the other metrics' another; otherwise
    every hypothesis is in one family, ``"all"``.
    """

    comparisons: tuple[PairwiseComparison, ...]
    correction: str | None
    reference: str | None
    primary: str | None = None

    @property
    def family_size(self) -> int:
        """Number of hypotheses in the report (all families together)."""
        return len(self.comparisons)

    @property
    def seed_averaged(self) -> bool:
        """Whether a side of some hypothesis averages several trained instances (training seeds) per user."""
        return any(c.averages_seeds for c in self.comparisons)

    @property
    def families(self) -> dict[str, int]:
        """Family name (``"primary"``, ``"secondary"`` or ``"all"``) -> number of hypotheses adjusted together."""
        out: dict[str, int] = {}
        for c in self.comparisons:
            out[c.family] = c.family_size
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per (pair, metric), columns :data:`COLUMNS`."""
        return pd.DataFrame([{c: getattr(cmp, c) for c in COLUMNS} for cmp in self.comparisons], columns=list(COLUMNS))

    def get(self, metric: str, candidate: str, baseline: str | None = None) -> PairwiseComparison:
        """The hypothesis for ``metric`` and ``candidate`` (and ``baseline`` when ambiguous).

        Raises
        ------
        KeyError
            If no such hypothesis is in the report, listing those that are.
        """
        found = [
            c
            for c in self.comparisons
            if c.metric == metric and c.candidate == candidate and (baseline is None or c.baseline == baseline)
        ]
        if len(found) != 1:
            have = [(c.baseline, c.candidate, c.metric) for c in self.comparisons]
            raise KeyError(
                f"expected one comparison for metric={metric!r}, candidate={candidate!r}, "
                f"baseline={baseline!r}; found {len(found)} among (baseline, candidate, metric) {have}"
            )
        return found[0]

    def to_markdown(self) -> str:
        """The report as a GitHub-flavoured markdown table, names escaped to show literally.

        See :func:`~mlflow_recsys.report.text.report_markdown`.
        """
        from mlflow_recsys.report.text import report_markdown

        return report_markdown(self)

    def to_latex(self, *, label: str = "tab:comparison", title: str | None = None) -> str:
        """The report as a booktabs ``table`` whose caption states the settings and significance markers.

        See :func:`~mlflow_recsys.report.latex.report_latex` (``label`` is its ``\\label``, ``title`` the
        caption's first sentence; the preamble needs ``\\usepackage{booktabs,adjustbox}``).
        """
        from mlflow_recsys.report.latex import report_latex

        return report_latex(self, label=label, title=title)

    def __str__(self) -> str:
        """The key columns as a fixed-width table under one settings line.

        See :func:`~mlflow_recsys.report.text.report_string`.
        """
        from mlflow_recsys.report.text import report_string

        return report_string(self)

    def __repr__(self) -> str:
        families = " ".join(f"{name}={size}" for name, size in self.families.items())
        averaged = " (seed-averaged)" if self.seed_averaged else ""
        J = len(self.comparisons)
        return (
            f"<ComparisonReport{averaged}: {J} hypothes{'is' if J == 1 else 'es'}, "
            f"{self.correction or 'no correction'}, families {families or 'none'}>"
        )

    def summary(self) -> str:
        """One line per hypothesis (:func:`~mlflow_recsys.report.text.report_summary`)."""
        from mlflow_recsys.report.text import report_summary

        return report_summary(self)

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Save the report as the directory ``path``, atomically; return ``path``.

        See :func:`~mlflow_recsys.stats.storage.save_report` for the files and the errors raised.
        """
        from mlflow_recsys.stats.storage import save_report  # it imports this module

        return save_report(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ComparisonReport:
        """Read a report saved by :meth:`save` (:func:`~mlflow_recsys.stats.storage.load_report`)."""
        from mlflow_recsys.stats.storage import load_report

        return load_report(path)

    def methods_text(self) -> str:
        """A Methods paragraph stating exactly the settings used (:func:`~mlflow_recsys.report.text.methods_text`)."""
        from mlflow_recsys.report.text import methods_text

        return methods_text(self)

    def results_text(
        self, metric: str, candidate: str, baseline: str | None = None, *, markup: Markup = "plain"
    ) -> str:
        """One sentence reporting the hypothesis for ``metric`` and ``candidate``.

        ``markup="plain"`` (default) leaves names and the metric key as they are;
        ``"markdown"`` escapes them with
        :func:`~mlflow_recsys.report.escaping.escape_markdown`. Raises KeyError as :meth:`get`, ValueError for
        another ``markup``.
        See :func:`~mlflow_recsys.report.text.results_text`.
        """
        from mlflow_recsys.report.text import results_text

        return results_text(self, self.get(metric, candidate, baseline), markup=markup)


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
) -> PairwiseComparison:
    """Compare two models on one metric: a single hypothesis, not adjusted.

    Parameters are those of :func:`compare_models`; ``baseline_name`` and
    ``candidate_name`` label the rows and seed the random stream, so the numbers
    equal those of the same pair inside a :func:`compare_models` call with the
    same settings (before adjustment).

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
    report = compare_models(
        {baseline_name: baseline, candidate_name: candidate},
        metrics=[metric],
        reference=baseline_name,
        correction=None,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        alternative=alternative,
        test_method=test_method,
        random_state=random_state,
        interval_method=interval_method,
        zero_method=zero_method,
    )
    return report.comparisons[0]


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
) -> ComparisonReport:
    """Compare several models pairwise on several metrics, adjusting p-values within their family.

    Parameters
    ----------
    results:
        Model name -> :class:`~mlflow_recsys.evaluation.EvaluationResult`, at least two,
        all evaluated on the same sample ids in the same order, with per-user values.
    metrics:
        One metric key or a list of keys (e.g. ``["ndcg@100", "recall@20"]``).
    reference:
        Name of the baseline every other model is compared against. ``None``
        compares every pair, the earlier model in ``results`` as baseline.
    correction:
        ``"holm"`` (default), ``"bonferroni"`` or ``None``. The family is every
        (pair, metric) hypothesis of this call.
    confidence_level:
        Level of the bootstrap interval, default 0.95; ``alpha = 1 -
        confidence_level`` is also the significance level.
    n_resamples:
        Sign assignments and bootstrap replicates B, default 9999. The smallest
        attainable Monte Carlo p-value is ``1 / (B + 1)``.
    alternative:
        ``"two-sided"`` (default), ``"greater"`` (candidate better) or
        ``"less"``; the interval is one-sided to match.
    test_method:
        ``"randomization"`` (default; sign flips of unit differences, enumerated
        exactly when ``2**n_nonzero <= n_resamples`` and then reported as
        ``"randomization-exact"``), ``"bootstrap"`` (null-centred, reusing the
        interval's replicates), ``"t"`` (one-sample t-test of the unit
        differences, ``scipy.stats.ttest_1samp``; Student 1908) or
        ``"wilcoxon"`` (Wilcoxon signed-rank test of the unit differences,
        ``scipy.stats.wilcoxon`` with the method this package chooses,
        :func:`wilcoxon_method`: the exact null for at most 50 differences
        without zeros or tied magnitudes, reported as ``"wilcoxon-exact"``, and
        the tie-corrected normal approximation otherwise, reported as
        ``"wilcoxon"``; Wilcoxon 1945). The Wilcoxon test asks whether the differences are symmetric
        about 0 (a median-like location), not whether their mean is 0, so it
        can disagree with the others on skewed differences.
    random_state:
        Non-negative int (default 0) or ``None`` for fresh entropy. Each model
        pair draws from its own stream derived from this seed and the two
        names, so a hypothesis' numbers do not depend on the other models or
        metrics in the call.
    interval_method:
        ``"percentile"`` (default; Efron 1979) or ``"bca"``, the bias-corrected
        and accelerated interval (Efron 1987) from the same bootstrap
        replicates, with the acceleration from the jackknife of the mean. A row
        whose bias correction is infinite falls back to the percentile interval
        and reports ``interval_method="percentile"``.
    zero_method:
        Only for ``test_method="wilcoxon"``: ``"wilcox"`` (default, scipy's;
        drop zero differences before ranking), ``"pratt"`` (rank them, then
        drop their ranks; Pratt 1959) or ``"zsplit"`` (split their ranks
        between the signs).
    primary:
        The metric the conclusion rests on, one of ``metrics``, or ``None``.
    family:
        ``"primary"`` (default): with a ``primary`` metric, its hypotheses (one
        per model pair) are adjusted as one family and the other metrics' as
        another, so the primary result does not weaken as secondary metrics are
        added; ``"all"``: one family over every hypothesis. Without a
        ``primary`` metric there is one family either way. Each family controls
        its own family-wise error rate (Holm 1979; Bonferroni).

    Returns
    -------
    ComparisonReport
        Every row has ``ci_low <= difference <= ci_high``. Degenerate
        differences are results, not errors: when the models tie on every unit
        the difference and the interval are 0 and every test and alternative
        gives p = 1 (each sign flip and each resample ties the observed 0); a
        constant non-zero difference gives the interval ``[difference,
        difference]``. A per-user difference no larger than :data:`TIE_RTOL`
        (1e-12) times the larger of its two values is rounding, not a
        difference, and counts as 0 (a tie).

    Raises
    ------
    TypeError
        If ``results`` is not a mapping of EvaluationResult.
    ValueError
        If fewer than two results; a result lacks per-user values; sample ids
        differ in length, content or order; targets fingerprints differ; a
        metric was not evaluated; per-user values are not finite; fewer than
        two units; a one-sided alternative without ``reference``; a setting
        is out of range (``n_resamples`` at most :data:`MAX_RESAMPLES`); or the
        replicates kept would exceed :data:`MAX_REPLICATE_BYTES`.

    Warns
    -----
    UnverifiedPairingWarning
        When a result has no targets fingerprint.
    LowResamplesWarning
        When ``n_resamples < 999`` with a resampling test.
    FewNonzeroUnitsWarning
        When fewer than 30 units differ for a hypothesis.
    IntervalFallbackWarning
        When ``interval_method="bca"`` and a hypothesis' bias correction is
        infinite, so its row reports the percentile interval.
    """
    metrics = metric_keys(metrics)
    settings = ComparisonSettings(  # every setting checked, in one place
        reference=reference,
        metrics=tuple(metrics),
        primary=primary,
        family=family,
        correction=correction,
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        alternative=alternative,
        test_method=test_method,
        zero_method=zero_method,
        interval_method=interval_method,
        random_state=random_state,
    )
    names = _results_iv(results, metrics)
    pairs = _pairs(names, reference, alternative)
    check_replicate_memory(n_resamples, len(pairs) * len(metrics))
    if n_resamples < 999 and test_method not in ("t", "wilcoxon"):
        # The largest family sets the floor on the smallest adjusted p-value.
        J = _largest_family_size(len(pairs), len(metrics), primary, family)
        _warn_low_resamples(n_resamples, J, confidence_level)
    units = _units_iv(results[names[0]])
    comparisons = _compare_pairs(results, pairs, metrics, units, settings)
    labels = _family_labels(comparisons, primary, family)
    return ComparisonReport(
        comparisons=_adjusted(comparisons, labels, correction, confidence_level, alternative),
        correction=correction,
        reference=reference,
        primary=primary,
    )


def _compare_pairs(
    results: Mapping[str, EvaluationResult],
    pairs: list[tuple[str, str]],
    metrics: list[str],
    units: Units,
    settings: ComparisonSettings,
) -> list[PairwiseComparison]:
    """Every hypothesis, pair by pair and metric by metric, unadjusted."""
    comparisons: list[PairwiseComparison] = []
    for base_name, cand_name in pairs:
        d, base_means, cand_means = _pair_differences(results[base_name], results[cand_name], metrics, units)
        comparisons.extend(_compare_one_pair(base_name, cand_name, metrics, d, base_means, cand_means, units, settings))
    return comparisons


def _largest_family_size(n_pairs: int, n_metrics: int, primary: str | None, family: Family) -> int:
    """Hypotheses in the largest family: the secondary metrics' when the primary one stands alone."""
    split = primary is not None and family == "primary" and n_metrics > 1
    return n_pairs * (n_metrics - 1 if split else n_metrics)


def _family_labels(comparisons: list[PairwiseComparison], primary: str | None, family: Family) -> list[str]:
    """Each comparison's family: ``"primary"`` or ``"secondary"`` when the primary metric is its own family."""
    if primary is None or family != "primary":
        return ["all"] * len(comparisons)
    return ["primary" if c.metric == primary else "secondary" for c in comparisons]


def _warn_low_resamples(n_resamples: int, J: int, confidence_level: float) -> None:
    """LowResamplesWarning: with B below 999 the smallest (adjusted) p-value may not reach alpha."""
    warn(
        f"n_resamples={n_resamples} is below 999: the smallest Monte Carlo p-value is "
        f"1/(B+1) = {1 / (n_resamples + 1):.4g}, and with {J} hypothes{'is' if J == 1 else 'es'} "
        "adjusted together "
        f"the smallest adjusted p-value is J/(B+1) = {J / (n_resamples + 1):.4g} "
        f"(alpha = {significance_level(confidence_level):.4g})",
        LowResamplesWarning,
    )


def _units_iv(first: EvaluationResult) -> Units:
    """The units (users) of the results' sample ids; ValueError when fewer than two."""
    units = Units.from_sample_ids(first.sample_ids)
    if units.n_units < 2:
        raise ValueError(
            f"results: expected at least 2 distinct users (units) to estimate variation across users, "
            f"found {units.n_units} (from {units.n_samples} rows)"
        )
    return units


def _pair_differences(
    base: EvaluationResult, cand: EvaluationResult, metrics: list[str], units: Units
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-unit differences ``(n_units, n_metrics)``, rounding ties snapped to 0, and each side's mean per metric."""
    # Column-major, one metric at a time: each column is contiguous and reduces exactly as it would
    # alone, and no (rows x metrics) copy of the inputs is ever made.
    d = np.empty((units.n_units, len(metrics)), dtype=np.float64, order="F")
    base_means = np.empty(len(metrics))
    cand_means = np.empty(len(metrics))
    # _results_iv has checked that every result has per-user values
    assert base.per_user is not None and cand.per_user is not None
    for j, metric in enumerate(metrics):
        base_col = units.means(base.per_user[metric])
        cand_col = units.means(cand.per_user[metric])
        base_means[j], cand_means[j] = base_col.mean(), cand_col.mean()
        np.subtract(cand_col, base_col, out=d[:, j])
        _snap_rounding_ties(d[:, j], base_col, cand_col)
    return d, base_means, cand_means


def _adjusted(
    comparisons: list[PairwiseComparison],
    labels: list[str],
    correction: Correction,
    confidence_level: float,
    alternative: Alternative,
) -> tuple[PairwiseComparison, ...]:
    """The comparisons with p-values adjusted within each family (``labels``), and the columns that follow."""
    alpha = significance_level(confidence_level)
    final = list(comparisons)  # every entry is replaced: each comparison belongs to exactly one family
    for label in dict.fromkeys(labels):
        members = [i for i, lab in enumerate(labels) if lab == label]
        adjusted = adjust_p_values(np.array([comparisons[i].p_value for i in members]), correction)
        level = mde_alpha(alpha, correction, len(members))
        for i, p in zip(members, adjusted, strict=True):
            c = comparisons[i]
            final[i] = dataclasses.replace(
                c,
                adjusted_p_value=float(p),
                family=label,
                family_size=len(members),
                mde=_mde(c.unit_differences, level, alternative),
                significant=bool(p <= alpha),
                direction=_direction(c.difference, p <= alpha),
            )
    return tuple(final)


def mde_alpha(alpha: float, correction: Correction, family_size: int) -> float:
    """The per-hypothesis level the ``mde`` column is computed at.

    ``alpha / J`` under ``"bonferroni"`` and under ``"holm"``, ``alpha`` with no
    correction (or J = 1). For Holm this is the level of the first step of the
    step-down sequence (Holm 1979), the strictest a hypothesis can meet: the step
    it is really tested at depends on the other hypotheses' p-values, so it is
    unknown before the data are in. Holm rejects whatever Bonferroni rejects, so an
    effect of the size given is detected with at least the stated power under
    either; for Holm the figure is conservative.

    Parameters
    ----------
    alpha:
        float in (0, 1): the family-wise level, ``1 - confidence_level``.
    correction:
        ``"holm"``, ``"bonferroni"`` or ``None``.
    family_size:
        int >= 1: the number of hypotheses J adjusted together.
    """
    return alpha / family_size if correction is not None else alpha


# -- the algorithm, on clean input -------------------------------------------------


#: Differences within this fraction of the larger value are rounding, not a difference: see :func:`_snap_rounding_ties`.
TIE_RTOL = 1e-12


def _snap_rounding_ties(d: np.ndarray, base: np.ndarray, cand: np.ndarray) -> None:
    """Set to 0, in place, every difference no larger than :data:`TIE_RTOL` times the larger of its two values.

    Two models that score a user equally can differ by a few ulps when a score
    is an average computed in another order, e.g. a seed average (0.4 + 0.4 +
    0.4) / 3 against a single 0.4. Counted as a difference, such noise would
    turn ties into wins, and a model compared with copies of itself would come
    out significant. Ranking metrics are ratios of small integers, so no real
    difference is within 1e-12 of the values.
    """
    d[np.abs(d) <= TIE_RTOL * np.maximum(np.abs(base), np.abs(cand))] = 0.0


def _mde(d: np.ndarray, alpha: float, alternative: Alternative) -> float:
    """Minimum detectable effect at 80% power for the unit differences ``d`` (NaN for one unit or no spread)."""
    if d.shape[0] < 2:
        return float("nan")
    return minimum_detectable_effect(float(np.std(d, ddof=1)), d.shape[0], alpha, REPORT_POWER, alternative)


def _compare_one_pair(
    base_name: str,
    cand_name: str,
    metrics: list[str],
    d: np.ndarray,
    base_means: np.ndarray,
    cand_means: np.ndarray,
    units: Units,
    settings: ComparisonSettings,
) -> list[PairwiseComparison]:
    confidence_level, n_resamples, alternative = settings.confidence_level, settings.n_resamples, settings.alternative
    test_method, zero_method, random_state = settings.test_method, settings.zero_method, settings.random_state
    alpha = significance_level(confidence_level)
    n_nonzero = (d != 0).sum(axis=0)
    boot, flips = _pair_replicates(d, n_nonzero, test_method, n_resamples, random_state, base_name, cand_name)
    # Summed like the replicates, so a constant column's estimate equals each replicate exactly.
    estimates = centred_means(d)

    out = []
    for j, metric in enumerate(metrics):
        dj, observed, nz = d[:, j], float(estimates[j]), int(n_nonzero[j])
        boot_j, flips_j = boot[:, j], None if flips is None else flips[:, j]
        label = f"{cand_name} vs {base_name} on {metric}"
        if nz < MIN_NONZERO_UNITS:
            _warn_few_nonzero(label, nz, units)
        null, p, method = _test(
            dj, observed, nz, test_method, alternative, n_resamples, zero_method, flips=flips_j, boot=boot_j
        )
        low, high, interval = _interval(boot_j, dj, observed, alpha, alternative, settings.interval_method, label)
        row = PairwiseComparison(
            metric=metric,
            baseline=base_name,
            candidate=cand_name,
            baseline_seeds=1,
            candidate_seeds=1,
            **_unit_counts(dj, units),
            baseline_mean=float(base_means[j]),
            candidate_mean=float(cand_means[j]),
            ci_low=low,
            ci_high=high,
            **_effect_and_test(observed, float(base_means[j]), p, alpha),
            confidence_level=float(confidence_level),
            bootstrap_standard_error=_standard_error(boot_j, observed),
            alternative=alternative,
            test_method=method,
            interval_method=interval,
            n_resamples=int(n_resamples),
            random_state=random_state,
            unit_differences=dj.copy(),
            null_distribution=null,
            bootstrap_distribution=boot_j.copy(),
            zero_method=zero_method if test_method == "wilcoxon" else None,
        )
        out.append(row)
    return out


def _pair_replicates(
    d: np.ndarray,
    n_nonzero: np.ndarray,
    test_method: str,
    n_resamples: int,
    random_state: int | None,
    base_name: str,
    cand_name: str,
) -> tuple[np.ndarray, np.ndarray | None]:
    """One pair's bootstrap means and, when some metric needs a Monte Carlo randomization test, sign-flip means.

    Both are drawn for every metric at once, from the pair's own seed sequences.
    """
    sign_seeds, boot_seeds = _pair_seed_sequences(random_state, base_name, cand_name)
    boot = bootstrap_means(d, n_resamples, boot_seeds)
    needs_monte_carlo = test_method == "randomization" and not all(_exact(nz, n_resamples) for nz in n_nonzero)
    return boot, sign_flip_means(d, n_resamples, sign_seeds) if needs_monte_carlo else None


def _warn_few_nonzero(label: str, nz: int, units: Units) -> None:
    """FewNonzeroUnitsWarning: with few users that differ, the resampled differences are coarse."""
    warn(
        f"{label}: only {nz} of {units.n_units} users differ; "
        "the resampled differences take few distinct values, so the interval and the p-value "
        "are coarse (the estimate still uses every user)",
        FewNonzeroUnitsWarning,
    )


def _effect_and_test(observed: float, base_mean: float, p: float, alpha: float) -> dict:
    """A row's difference, relative difference and test columns, before the family adjustment.

    The adjusted p-value starts as the raw one, in a family of one with no MDE: :func:`_adjusted` fills them in.
    """
    return {
        "difference": observed,
        "relative_difference": observed / base_mean if base_mean != 0 else float("nan"),
        "p_value": p,
        "adjusted_p_value": p,
        "family": "all",
        "family_size": 1,
        "mde": float("nan"),
        "significant": bool(p <= alpha),
        "direction": _direction(observed, p <= alpha),
    }


def _test(
    d: np.ndarray,
    observed: float,
    n_nonzero: int,
    test_method: str,
    alternative: str,
    n_resamples: int,
    zero_method: str,
    *,
    flips: np.ndarray | None,
    boot: np.ndarray,
) -> tuple[np.ndarray | None, float, str]:
    """One metric's test -> (null replicates, or None for the t and Wilcoxon tests; p-value; method as reported).

    ``flips`` are the Monte Carlo sign-flip means (None when every metric is enumerated exactly), ``boot`` the
    bootstrap means; a randomization test with few enough non-zero units enumerates every sign pattern instead
    and is reported as ``"randomization-exact"``.
    """
    scale = float(np.abs(d).mean())
    if test_method == "randomization" and _exact(n_nonzero, n_resamples):
        null = exact_sign_flip_means(d)
        return null, _p_value(null, observed, alternative, scale, monte_carlo=False), "randomization-exact"
    if test_method == "randomization":
        assert flips is not None  # computed whenever a metric is not enumerated exactly
        null = flips.copy()
        return null, _p_value(null, observed, alternative, scale, monte_carlo=True), test_method
    if test_method == "bootstrap":
        # Shifting the replicates to mean zero imposes the null (Efron & Tibshirani 1993, sec. 16.4).
        null = boot - observed
        return null, _p_value(null, observed, alternative, scale, monte_carlo=True), test_method
    if test_method == "wilcoxon":
        p, reported = _wilcoxon_p_value(d, alternative, zero_method)
        return None, p, reported
    return None, _t_test_p_value(d, alternative), test_method


def _interval(
    boot: np.ndarray, d: np.ndarray, observed: float, alpha: float, alternative: str, interval_method: str, label: str
) -> tuple[float, float, str]:
    """The interval -> (low, high, method as reported): BCa when asked and possible, else the percentile one."""
    if interval_method == "bca":
        bounds = _bca_interval(boot, d, observed, alpha, alternative)
        if bounds is not None:
            return (*bounds, "bca")
        warn(
            f"{label}: every bootstrap replicate lies on one side of the "
            "estimate, so the BCa bias correction is infinite; the percentile interval is reported "
            "(interval_method 'percentile' in this row)",
            IntervalFallbackWarning,
        )
    return (*_percentile_interval(boot, observed, alpha, alternative), "percentile")


def _unit_counts(d: np.ndarray, units: Units) -> dict:
    """Rows and units, and on how many units the candidate scored higher, equal and lower (wins, ties, losses)."""
    nonzero = int((d != 0).sum())
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    return {
        "n_samples": units.n_samples,
        "n_units": units.n_units,
        "n_nonzero": nonzero,
        "tie_rate": 1.0 - nonzero / units.n_units,
        "wins": wins,
        "ties": units.n_units - wins - losses,
        "losses": losses,
    }


def _standard_error(replicates: np.ndarray, estimate: float) -> float:
    """SD (ddof=1) of the bootstrap replicates; NaN for a single replicate.

    Taken around ``estimate`` rather than the replicates' own rounded mean (the
    SD does not depend on the shift), so replicates that all equal the estimate
    give exactly 0.
    """
    if replicates.shape[0] < 2:
        return float("nan")
    return float(np.std(replicates - estimate, ddof=1))


def _exact(n_nonzero: int, n_resamples: int) -> bool:
    """Enumerate every sign pattern when there are no more of them than resamples."""
    return n_nonzero <= MAX_EXACT_UNITS and 2 ** int(n_nonzero) <= n_resamples


def _pair_seed_sequences(random_state: int | None, base_name: str, cand_name: str):
    """Two independent seed sequences (signs, bootstrap) for one ordered model pair."""
    digest = hashlib.sha256(f"{base_name}\x00{cand_name}".encode()).digest()
    words = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    entropy = random_state if random_state is not None else np.random.SeedSequence().entropy
    return tuple(np.random.SeedSequence(entropy, spawn_key=words + (stream,)) for stream in (0, 1))


def _p_value(null: np.ndarray, observed: float, alternative: str, scale: float, *, monte_carlo: bool) -> float:
    """Share of null replicates at least as extreme as ``observed``.

    Monte Carlo: ``(1 + #extreme) / (B + 1)``, which counts the observed data
    among the possibilities and so is never zero (Phipson & Smyth 2010). Exact
    enumeration already contains the observed arrangement: ``#extreme / 2**k``.
    A tolerance of 100 ulps of the data's scale keeps the observed arrangement,
    recomputed in another order, from missing its own tie.
    """
    gamma = 100 * np.finfo(np.float64).eps * max(abs(observed), scale)
    if alternative == "two-sided":
        extreme = np.abs(null) >= abs(observed) - gamma
    elif alternative == "greater":
        extreme = null >= observed - gamma
    else:
        extreme = null <= observed + gamma
    count = int(extreme.sum())
    if monte_carlo:
        return (1 + count) / (null.shape[0] + 1)
    return count / null.shape[0]


def _t_test_p_value(d: np.ndarray, alternative: str) -> float:
    """Paired t-test as a one-sample t-test of the unit differences (Student 1908)."""
    if np.all(d == d[0]):
        # No spread: the t statistic is 0/0 or +-inf; take its limit instead of NaN.
        if d[0] == 0:
            return 1.0
        return 0.0 if (alternative == "two-sided" or (alternative == "greater") == (d[0] > 0)) else 1.0
    # Testing mean(d) = 0 is testing mean(d - centre) = -centre; deviations from a value of d keep the variance
    # free of cancellation when the differences are nearly constant (e.g. one shift plus rounding).
    centre = float(column_centres(d[:, None])[0])
    return float(scipy.stats.ttest_1samp(d - centre, -centre, alternative=alternative).pvalue)


#: Most non-zero differences for which the Wilcoxon test uses the exact null distribution of its rank sum.
WILCOXON_EXACT_MAX = 50


def wilcoxon_method(d: np.ndarray) -> Literal["exact", "approx"]:
    """How the Wilcoxon signed-rank test of the differences ``d`` is computed: this package's rule, not scipy's.

    ``"exact"`` (the exact null distribution of the signed-rank sum, Wilcoxon 1945) when ``d`` has no zero,
    no two equal magnitudes ``|d_i|`` and at most :data:`WILCOXON_EXACT_MAX` values; else ``"approx"``: the
    normal approximation of the rank sum with the variance corrected for tied ranks and without continuity
    correction (Lehmann, 1975, *Nonparametrics*, sec. 3.2). The rule is passed to ``scipy.stats.wilcoxon``
    as ``method=``, so the p-value does not depend on the SciPy version: the ``"auto"`` choice changed
    between versions (SciPy 1.11 used the normal approximation whenever there were zeros or ties, newer
    versions compute an exact permutation distribution for small samples with them), while ``"exact"``
    without zeros or ties and ``"approx"`` compute the same in every version from 1.11 on.

    Parameters
    ----------
    d:
        1-D float array of the unit differences.

    Returns
    -------
    ``"exact"`` or ``"approx"``.
    """
    magnitudes = np.abs(d)
    no_zeros_or_ties = bool(np.all(magnitudes > 0)) and np.unique(magnitudes).shape[0] == d.shape[0]
    return "exact" if no_zeros_or_ties and d.shape[0] <= WILCOXON_EXACT_MAX else "approx"


def _wilcoxon_p_value(d: np.ndarray, alternative: str, zero_method: str) -> tuple[float, str]:
    """Wilcoxon signed-rank test of the unit differences (Wilcoxon 1945) -> (p-value, method as reported).

    ``scipy.stats.wilcoxon`` with ``method=`` from :func:`wilcoxon_method`; reported as ``"wilcoxon-exact"``
    or ``"wilcoxon"`` (the normal approximation). When every difference is 0 there is nothing to rank: the
    models tie everywhere, and p = 1 as for the other tests (scipy returns NaN or warns there). A NaN from
    scipy in any other case is also read as p = 1.
    """
    method = wilcoxon_method(d)
    reported = "wilcoxon-exact" if method == "exact" else "wilcoxon"
    if not np.any(d):
        return 1.0, reported
    with warnings.catch_warnings():
        # scipy warns when few differences remain for the normal approximation; the rule is documented above.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy.stats.wilcoxon(
            d, zero_method=zero_method, alternative=alternative, method=method, correction=False
        )
    p = float(result.pvalue)
    return (1.0 if np.isnan(p) else p), reported


def _bca_interval(
    replicates: np.ndarray, d: np.ndarray, estimate: float, alpha: float, alternative: str
) -> tuple[float, float] | None:
    """Bias-corrected and accelerated bootstrap interval of the mean (Efron 1987), or ``None``.

    Parameters
    ----------
    replicates:
        float64 ``(B,)``: bootstrap means of ``d``.
    d:
        float64 ``(n,)``: the unit differences, ``n >= 2``.
    estimate:
        Their mean.
    alpha, alternative:
        Two-sided: the ``alpha/2`` and ``1 - alpha/2`` ends; ``"greater"``: the
        lower bound at level ``1 - alpha`` (upper end ``inf``); ``"less"``: the
        upper bound (lower end ``-inf``).

    The bias correction is ``z0 = Phi^-1(share of replicates below the
    estimate)``, replicates equal to the estimate counting one half. The
    acceleration comes from the jackknife of the mean (Efron & Tibshirani 1993,
    sec. 14.3): the leave-one-out means are ``(n * mean - d_i) / (n - 1)``, so
    their mean is ``mean`` and their deviations from it are ``(d_i - mean) /
    (n - 1)``; in ``a = sum(dev**3) / (6 * sum(dev**2) ** 1.5)`` the powers of
    ``n - 1`` cancel, leaving ``a = sum((d_i - mean)**3) / (6 * sum((d_i -
    mean)**2) ** 1.5)``. The end at nominal level ``q`` is the replicates'
    quantile (linear interpolation) at ``Phi(z0 + (z0 + z_q) / (1 - a * (z0 +
    z_q)))``.

    Returns
    -------
    ``(low, high)`` holding ``estimate`` (an end past it is moved onto it, as in
    :func:`_percentile_interval`); for constant differences the point
    ``(estimate, estimate)``, open on the far side when one-sided; ``None`` when ``z0`` or an adjusted level is
    not finite (every replicate on one side of the estimate), for the caller to fall back to the
    percentile interval.
    """
    if np.all(d == d[0]):
        return (
            estimate if alternative != "less" else float("-inf"),
            estimate if alternative != "greater" else float("inf"),
        )
    below = np.count_nonzero(replicates < estimate) + 0.5 * np.count_nonzero(replicates == estimate)
    z0 = float(scipy.stats.norm.ppf(below / replicates.shape[0]))
    deviations = d - d.mean()
    a = float(np.sum(deviations**3) / (6.0 * np.sum(deviations**2) ** 1.5))
    if not (np.isfinite(z0) and np.isfinite(a)):
        return None

    def end(q: float) -> float | None:
        z = z0 + float(scipy.stats.norm.ppf(q))
        if 1.0 - a * z <= 0:  # the adjusted level would run past 1 (or 0): no BCa end exists
            return None
        return float(np.quantile(replicates, scipy.stats.norm.cdf(z0 + z / (1.0 - a * z))))

    if alternative == "two-sided":
        low, high = end(alpha / 2), end(1 - alpha / 2)
    elif alternative == "greater":
        low, high = end(alpha), float("inf")
    else:
        low, high = float("-inf"), end(1 - alpha)
    if low is None or high is None:
        return None
    return min(low, estimate), max(high, estimate)


def _percentile_interval(
    replicates: np.ndarray, estimate: float, alpha: float, alternative: str
) -> tuple[float, float]:
    """Percentile bootstrap interval (Efron 1979), one-sided when the test is, always holding ``estimate``.

    An end on the wrong side of the estimate is moved onto it. A replicate that
    equals the estimate mathematically can land an ulp past it (its sum runs in
    another order), and with few users or a low confidence level a percentile
    can fall on such a replicate; readers, tables and error bars all assume
    ``ci_low <= difference <= ci_high``. Constant columns need no move: their
    replicates equal the estimate exactly (see :mod:`~mlflow_recsys.stats.resampling`).
    """
    if alternative == "two-sided":
        low, high = (float(q) for q in np.quantile(replicates, [alpha / 2, 1 - alpha / 2]))
    elif alternative == "greater":
        low, high = float(np.quantile(replicates, alpha)), float("inf")
    else:
        low, high = float("-inf"), float(np.quantile(replicates, 1 - alpha))
    return min(low, estimate), max(high, estimate)


def _direction(difference: float, significant: bool) -> str:
    if significant and difference > 0:
        return "better"
    if significant and difference < 0:
        return "worse"
    return "inconclusive"


# -- input validation --------------------------------------------------------------


def _results_iv(results, metrics: list[str]) -> list[str]:
    if not isinstance(results, Mapping):
        raise TypeError(
            f"results: expected a mapping of model name -> EvaluationResult, found {type(results).__name__}"
        )
    names = list(results)
    if len(names) < 2:
        raise ValueError(f"results: expected at least two models to compare, found {len(names)}: {names}")
    for name in names:
        res = results[name]
        if not isinstance(res, EvaluationResult):
            raise TypeError(f"results[{name!r}]: expected an EvaluationResult, found {type(res).__name__}")
        if res.per_user is None:
            raise ValueError(
                f"results[{name!r}]: holds no per-user values (evaluated with collect_per_user=False); "
                "re-evaluate with collect_per_user=True to compare it"
            )
        missing = [m for m in metrics if m not in res.per_user]
        if missing:
            raise ValueError(f"metrics: {missing} not evaluated for {name!r}; available: {sorted(res.per_user)}")
        for m in metrics:
            values = np.asarray(res.per_user[m], dtype=np.float64)
            bad = ~np.isfinite(values)
            if bad.any():
                first = np.asarray(res.sample_ids)[np.argmax(bad)].item()
                raise ValueError(
                    f"results[{name!r}]: expected finite per-user values of {m!r}, found {int(bad.sum())} "
                    f"non-finite (first at sample id {first!r})"
                )
    _same_users_iv(results, names)
    _fingerprints_iv(results, names)
    return names


def _same_users_iv(results, names) -> None:
    ref_name = names[0]
    ref = np.asarray(results[ref_name].sample_ids)
    for name in names[1:]:
        ids = np.asarray(results[name].sample_ids)
        if ids.shape != ref.shape:
            raise ValueError(
                f"sample ids differ: {ref_name!r} has {ref.shape[0]} rows, {name!r} has {ids.shape[0]}; "
                "paired comparison needs the same users in the same order"
            )
        if np.array_equal(ids, ref):
            continue
        if set(ids.tolist()) != set(ref.tolist()):
            only_ref = sorted(set(ref.tolist()) - set(ids.tolist()), key=str)[:5]
            only_new = sorted(set(ids.tolist()) - set(ref.tolist()), key=str)[:5]
            raise ValueError(
                f"sample ids differ in content between {ref_name!r} and {name!r}: only in {ref_name!r} "
                f"(first 5) {only_ref}, only in {name!r} {only_new}"
            )
        pos = int(np.argmax(ids != ref))
        raise ValueError(
            f"sample ids of {ref_name!r} and {name!r} hold the same users in a different order "
            f"(first at row {pos}: {ref[pos].item()!r} vs {ids[pos].item()!r}); evaluate both with the same "
            "sample_ids in the same order"
        )


def _fingerprints_iv(results, names) -> None:
    prints = {name: results[name].targets_fingerprint for name in names}
    unknown = [n for n, fp in prints.items() if fp is None]
    if unknown:
        warn(
            f"results {unknown} carry no targets fingerprint, so it cannot be verified that every "
            "model was scored on the same fold-in items and targets",
            UnverifiedPairingWarning,
        )
    known = {n: fp for n, fp in prints.items() if fp is not None}
    if len(set(known.values())) > 1:
        listing = ", ".join(f"{n}: {fp[:12]}" for n, fp in known.items())
        raise ValueError(
            f"targets fingerprints differ, so the models were not scored on the same users and targets ({listing})"
        )


def _pairs(names: list[str], reference: str | None, alternative: str) -> list[tuple[str, str]]:
    if reference is None:
        if alternative != "two-sided":
            raise ValueError(
                f"reference: a one-sided alternative ({alternative!r}) needs a reference model "
                "to say which side is the candidate, found None"
            )
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if reference not in names:
        raise ValueError(f"reference: expected one of the compared models {names}, found {reference!r}")
    return [(reference, n) for n in names if n != reference]
