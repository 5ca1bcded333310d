"""The results of a paired comparison: one hypothesis (:class:`PairwiseComparison`) and the report of a call
(:class:`ComparisonReport`), each with ``to_frame()``; what people read of them is :mod:`mlflow_recsys.report`.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from mlflow_recsys.stats._exposure import ExposureAnalysis
    from mlflow_recsys.stats._slices import SliceAnalysis

#: How names are written in a sentence of text: escaped for markdown, or as they are.
Markup = Literal["markdown", "plain"]


def significance_level(confidence_level: float) -> float:
    """``alpha = 1 - confidence_level`` rounded to 12 decimals: ``1 - 0.9`` is ``0.09999999999999998``, which a
    p-value of exactly 0.1 would fail although every text states alpha = 0.1."""
    return round(1.0 - confidence_level, 12)


@dataclass(frozen=True, eq=False)
class PairwiseComparison:
    """One hypothesis: ``candidate`` against ``baseline`` on one metric.

    ``difference`` is candidate minus baseline (positive favours the candidate). The frame columns are :data:`COLUMNS`;
    the raw material of the resampling is kept so a user can recompute with another convention (the attributes below are
    those beyond the columns).

    Attributes
    ----------
    unit_differences:
        float64 ``(n_units,)``: the per-unit differences every procedure used.
    null_distribution:
        float64: the test's null replicates of the mean difference (all ``2**n_nonzero`` of them for an exact test), or
        ``None`` for the t-test and the Wilcoxon test.
    bootstrap_distribution:
        float64 ``(n_resamples,)``: bootstrap replicates of the mean difference.
    zero_method:
        How the Wilcoxon test treated zero differences (one of :data:`ZERO_METHODS`), or ``None`` for the other tests.
        The methods text names it.
    family, family_size:
        The family the p-value was adjusted in (``"primary"``, ``"secondary"`` or ``"all"``) and its number of
        hypotheses J.

    ``baseline_seeds`` and ``candidate_seeds`` (int) count the trained instances whose per-user values each side
    averages: 1 for a single trained model (:func:`~mlflow_recsys.stats.compare_models`), the number of training seeds
    in a seed-averaged comparison (:func:`~mlflow_recsys.stats.compare_seed_averaged`).

    ``hypothesis`` is ``"superiority"`` (the default: is the candidate better or worse? ``direction`` reads
    ``"better"``, ``"worse"`` or ``"inconclusive"``, and ``"higher"`` or ``"lower"`` for a metric with no better side,
    :func:`~mlflow_recsys.metrics.higher_is_better`), ``"non-inferiority"`` or
    ``"equivalence"``; ``margin`` is the margin delta in metric units (0 for superiority) and ``relative_margin`` the
    same margin as a fraction of ``baseline_mean``; ``margin_scale`` says which of the two was given (``"absolute"``
    or ``"relative"``, tested on the ratio of means; ``"none"`` for superiority). With a margin, ``ci_low`` and
    ``ci_high`` bound the two-sided ``1 - 2 * alpha`` interval (each end a one-sided ``1 - alpha`` bound), and
    ``direction`` reads ``"non-inferior"``, ``"inferior"`` (the interval lies below ``-margin``) or
    ``"inconclusive"``; ``"equivalent"``, ``"not equivalent"`` (the interval lies outside ``(-margin, margin)``) or
    ``"inconclusive"`` (:mod:`~mlflow_recsys.stats._margins`).

    ``p_value_mcse`` and ``adjusted_p_value_mcse`` are the Monte Carlo standard errors of the two p-values (0 for an
    exact or analytic test); the reports print a p-value to the digits its error supports. ``sign_test_p_value`` is
    the sign test of ``wins`` against ``losses`` (Dixon & Mood 1946), reported whatever ``test_method`` is.
    ``relative_ci_low`` and ``relative_ci_high`` bound ``relative_difference``, and ``dz_ci_low`` and ``dz_ci_high``
    the standardized effect ``effect_size_dz`` (mean over SD of the per-user differences; Cohen 1988): percentile
    bootstrap intervals, two-sided at ``confidence_level``, from the pair's bootstrap draw; NaN where undefined
    (:mod:`~mlflow_recsys.stats._effects`).

    ``wins``, ``ties`` and ``losses`` (int) count the units (users, after averaging each user's rows) on which the
    candidate scored higher than, equal to, and lower than the baseline: they add up to ``n_units``, and ``ties ==
    n_units - n_nonzero``. ``interval_method`` is ``"bca"`` or ``"percentile"``; a row asked for BCa reports
    ``"percentile"`` when its bias correction is infinite (every replicate on one side of the estimate) and the
    percentile interval was used instead. Under ``correction="maxt"`` it is ``"max-T"``: the interval is the family's
    simultaneous one (:mod:`~mlflow_recsys.stats._maxt`).

    The column ``mde`` is the minimum detectable effect: the smallest true mean difference this design detects with 80%
    power, :func:`~mlflow_recsys.stats.minimum_detectable_effect` of the SD (ddof=1) of ``unit_differences``,
    ``n_units`` and the alternative, at the level the hypothesis is tested at after adjustment
    (:func:`~mlflow_recsys.stats._comparison.mde_alpha`). NaN on a single unit and when the unit differences have no
    spread (SD 0, e.g. a model compared with itself): then no minimum detectable effect can be estimated, and the
    reports say so in words.
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
    mde: float
    family: str
    family_size: int
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
    hypothesis: str = "superiority"
    margin: float = 0.0
    relative_margin: float = 0.0
    margin_scale: str = "none"
    p_value_mcse: float = 0.0
    adjusted_p_value_mcse: float = 0.0
    sign_test_p_value: float = float("nan")
    relative_ci_low: float = float("nan")
    relative_ci_high: float = float("nan")
    effect_size_dz: float = float("nan")
    dz_ci_low: float = float("nan")
    dz_ci_high: float = float("nan")

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
        return _frame((self,))


#: The columns of :meth:`PairwiseComparison.to_frame`, in order: every field but the arrays and ``zero_method``.
COLUMNS = tuple(
    f.name
    for f in fields(PairwiseComparison)
    if f.name not in ("unit_differences", "null_distribution", "bootstrap_distribution", "zero_method")
)


@dataclass(frozen=True, eq=False)
class ComparisonReport:
    """Every hypothesis of one :func:`~mlflow_recsys.stats.compare_models` call, adjusted within its family.

    With a ``primary`` metric and ``family="primary"`` (the default), the primary metric's hypotheses form one family
    and the other metrics' another; otherwise every hypothesis is in one family, ``"all"``. ``slices`` holds the
    exploratory strata rows when the call declared slices (:class:`~mlflow_recsys.stats.SliceAnalysis`), else ``None``;
    ``global_metrics`` the coverage and Gini rows (:class:`~mlflow_recsys.stats.ExposureAnalysis`) when it asked for
    them, else ``None``.
    """

    comparisons: tuple[PairwiseComparison, ...]
    correction: str | None
    reference: str | None
    primary: str | None = None
    slices: SliceAnalysis | None = None
    global_metrics: ExposureAnalysis | None = None

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
        return _frame(self.comparisons)

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
        """The report as a markdown table, names escaped (:func:`~mlflow_recsys.report.report_markdown`)."""
        from mlflow_recsys.report._text import report_markdown

        return report_markdown(self)

    def to_latex(self, *, label: str = "tab:comparison", title: str | None = None) -> str:
        """The report as a booktabs ``table`` whose caption states the settings and significance markers:
        :func:`~mlflow_recsys.report.report_latex` (``label`` its ``\\label``, ``title`` the caption's first
        sentence; the preamble needs ``\\usepackage{booktabs,adjustbox}``)."""
        from mlflow_recsys.report._latex import report_latex

        return report_latex(self, label=label, title=title)

    def __str__(self) -> str:
        """The key columns under a settings line, fixed-width (:func:`~mlflow_recsys.report.report_string`)."""
        from mlflow_recsys.report._text import report_string

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
        """One line per hypothesis (:func:`~mlflow_recsys.report.report_summary`)."""
        from mlflow_recsys.report._text import report_summary

        return report_summary(self)

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Save the report as the directory ``path``, atomically; return ``path`` (files and errors:
        :func:`~mlflow_recsys.stats._storage.save_report`)."""
        from mlflow_recsys.stats._storage import save_report  # it imports these classes

        return save_report(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ComparisonReport:
        """Read a report saved by :meth:`save` (:func:`~mlflow_recsys.stats._storage.load_report`)."""
        from mlflow_recsys.stats._storage import load_report

        return load_report(path)

    def methods_text(self) -> str:
        """A Methods paragraph stating exactly the settings used (:func:`~mlflow_recsys.report.methods_text`)."""
        from mlflow_recsys.report._text import methods_text

        return methods_text(self)

    def results_text(
        self, metric: str, candidate: str, baseline: str | None = None, *, markup: Markup = "plain"
    ) -> str:
        """One sentence reporting the hypothesis for ``metric`` and ``candidate``.

        ``markup="plain"`` (default) leaves names and the metric key as they are; ``"markdown"`` escapes them with
        :func:`~mlflow_recsys.report.escape_markdown`. Raises KeyError as :meth:`get`, ValueError for another
        ``markup``. See :func:`~mlflow_recsys.report.results_text`.
        """
        from mlflow_recsys.report._text import results_text

        return results_text(self, self.get(metric, candidate, baseline), markup=markup)


def _frame(comparisons: tuple[PairwiseComparison, ...]) -> pd.DataFrame:
    return pd.DataFrame([{c: getattr(cmp, c) for c in COLUMNS} for cmp in comparisons], columns=list(COLUMNS))
