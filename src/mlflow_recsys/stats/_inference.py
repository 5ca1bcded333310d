"""P-values and intervals of one model pair: the sign-flip randomization test (exact or Monte Carlo), the null-centred
bootstrap test, the t-test and the Wilcoxon signed-rank test; the percentile and BCa bootstrap intervals; and the rows
of a pair that :func:`~mlflow_recsys.stats.compare_models` adjusts within families.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import scipy.stats

from mlflow_recsys.stats import _margins as margins
from mlflow_recsys.stats._effects import effect_columns, p_value_mcse
from mlflow_recsys.stats._pairing import PairedDifferences
from mlflow_recsys.stats._resampling import (
    MAX_EXACT_UNITS,
    centred_means,
    column_centres,
    exact_sign_flip_means,
    quantiles,
    sign_flip_means,
    sliced_bootstrap_means,
)
from mlflow_recsys.stats._results import PairwiseComparison, significance_level
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.stats._units import Units
from mlflow_recsys.stats._warnings import FewNonzeroUnitsWarning, IntervalFallbackWarning, warn

#: Below this many non-zero units the null distribution is too coarse to trust quietly.
MIN_NONZERO_UNITS = 30


@dataclass(frozen=True, eq=False)
class _Column:
    """One metric of a pair: each side's mean, the unit differences ``d``, their estimate, and the replicates drawn for
    them (``flips``, the Monte Carlo sign-flip means, ``None`` when not drawn); the pair's seed sequences (signs,
    bootstrap), each side's unit means ``(2, n_units)``, and, for a row's effect sizes, the bootstrap means of ``d **
    2`` and of the baseline's values over the same resampled users (``None`` when not drawn)."""

    metric: str
    label: str
    baseline: str
    baseline_mean: float
    candidate_mean: float
    d: np.ndarray
    observed: float
    n_nonzero: int
    boot: np.ndarray
    flips: np.ndarray | None
    seeds: tuple[np.random.SeedSequence, np.random.SeedSequence]
    sides: np.ndarray
    boot_squares: np.ndarray | None = None
    boot_baseline: np.ndarray | None = None


def pair_rows(
    pair: PairedDifferences, settings: ComparisonSettings, slices: Sequence[Sequence[np.ndarray]] = ()
) -> tuple[list[PairwiseComparison], list[np.ndarray]]:
    """The pair's hypotheses, one per metric, unadjusted (a family ``"all"`` of one, no MDE) for the comparison to
    adjust; and, from the same bootstrap draw, the stratified bootstrap means of the differences within each slice's
    strata (``slices``: per slice, its strata's unit indices): float64 ``(B, S_k, n_metrics)`` per slice."""
    alpha = significance_level(settings.confidence_level)
    rows = []
    columns, stratum_means = _columns(pair, settings, tests=True, slices=slices)
    for col in columns:
        if col.n_nonzero < MIN_NONZERO_UNITS:
            warn(
                f"{col.label}: only {col.n_nonzero} of {pair.units.n_units} users differ; "
                "the resampled differences take few distinct values, so the interval and the p-value "
                "are coarse (the estimate still uses every user)",
                FewNonzeroUnitsWarning,
            )
        if settings.hypothesis == "superiority":
            null, p, method = _test(col, settings)
            estimate = bootstrap_estimate(col, alpha, settings) | {"alternative": settings.alternative}
        else:
            null, p, method, estimate = margins.margin_test(col, alpha, settings)
        assert col.boot_squares is not None and col.boot_baseline is not None  # drawn with tests=True
        effects = effect_columns(
            col.d, col.observed, col.sides[0], col.boot, col.boot_squares, col.boot_baseline,
            float(settings.confidence_level),
        )  # fmt: skip
        sign_side = settings.alternative if settings.hypothesis == "superiority" else "two-sided"
        mcse = p_value_mcse(p, method, int(settings.n_resamples))
        rows.append(
            PairwiseComparison(
                baseline=pair.baseline,
                candidate=pair.candidate,
                baseline_seeds=1,
                candidate_seeds=1,
                **_unit_counts(col, pair.units),
                **estimate,
                confidence_level=float(settings.confidence_level),
                p_value=p,
                adjusted_p_value=p,
                family="all",
                family_size=1,
                mde=float("nan"),
                significant=bool(p <= alpha),
                direction="inconclusive",  # decided once adjusted
                test_method=method,
                n_resamples=int(settings.n_resamples),
                random_state=settings.random_state,
                unit_differences=col.d.copy(),
                null_distribution=null,
                bootstrap_distribution=col.boot.copy(),
                zero_method=settings.zero_method if settings.test_method == "wilcoxon" else None,
                p_value_mcse=mcse,
                adjusted_p_value_mcse=mcse,  # adjusted with the p-values
                sign_test_p_value=sign_test_p_value(col.d, sign_side),
                **effects,
            )
        )
    return rows, stratum_means


def bootstrap_rows(pair: PairedDifferences, settings: ComparisonSettings) -> list[dict]:
    """Per metric, the columns of :func:`pair_rows` that come from the bootstrap alone (no test drawn)."""
    alpha = significance_level(settings.confidence_level)
    return [bootstrap_estimate(col, alpha, settings) for col in _columns(pair, settings, tests=False)[0]]


def bootstrap_estimate(col: _Column, alpha: float, settings: ComparisonSettings) -> dict:
    low, high, interval = _interval(col, alpha, settings)
    return {
        "metric": col.metric,
        "baseline_mean": col.baseline_mean,
        "candidate_mean": col.candidate_mean,
        "difference": col.observed,
        "ci_low": low,
        "ci_high": high,
        "interval_method": interval,
        # Around the estimate, not the replicates' rounded mean, so replicates equal to it give exactly 0.
        "bootstrap_standard_error": float(np.std(col.boot - col.observed, ddof=1)) if len(col.boot) > 1 else math.nan,
    }


def _columns(
    pair: PairedDifferences, settings: ComparisonSettings, *, tests: bool, slices: Sequence[Sequence[np.ndarray]] = ()
) -> tuple[list[_Column], list[np.ndarray]]:
    """The pair's metrics with their bootstrap means and, with ``tests`` when some metric needs them, their Monte Carlo
    sign-flip means; each drawn for every metric at once from the pair's own seed sequences. Second, the stratified
    bootstrap means of the differences within the strata of each of ``slices``, from the same draw."""
    d, B = pair.differences, settings.n_resamples
    n_nonzero = (d != 0).sum(axis=0)
    sign_seeds, boot_seeds = stream_seed_sequences(settings.random_state, pair.baseline, pair.candidate)
    m = d.shape[1]
    # With the tests, one draw of the users also bootstraps d ** 2 and the baseline (the effect sizes' replicates);
    # each column's replicates depend on that column alone, so those of d are the same either way.
    drawn, stratum_means = sliced_bootstrap_means(
        np.column_stack([d, d * d, pair.sides[0]]) if tests else d, B, boot_seeds, d, slices
    )
    boot = drawn[:, :m]
    monte_carlo = (
        tests
        and settings.test_method == "randomization"
        and settings.hypothesis == "superiority"  # a margin's test flips shifted differences (_margins)
        and not all(exact_enumeration(nz, B) for nz in n_nonzero)
    )
    flips = sign_flip_means(d, B, sign_seeds) if monte_carlo else None
    estimates = centred_means(d)  # summed like the replicates: a constant column equals each replicate exactly
    columns = [
        _Column(
            metric=metric,
            label=f"{pair.candidate} vs {pair.baseline} on {metric}",
            baseline=pair.baseline,
            baseline_mean=float(pair.baseline_means[j]),
            candidate_mean=float(pair.candidate_means[j]),
            d=d[:, j],
            observed=float(estimates[j]),
            n_nonzero=int(n_nonzero[j]),
            boot=boot[:, j],
            flips=None if flips is None else flips[:, j],
            seeds=(sign_seeds, boot_seeds),
            sides=pair.sides[:, :, j],
            boot_squares=drawn[:, m + j] if tests else None,
            boot_baseline=drawn[:, 2 * m + j] if tests else None,
        )
        for j, metric in enumerate(pair.metrics)
    ]
    return columns, stratum_means


def _test(col: _Column, settings: ComparisonSettings) -> tuple[np.ndarray | None, float, str]:
    """One metric's test -> (null replicates or None, p-value, the method as reported)."""
    d, observed, test_method, alternative = col.d, col.observed, settings.test_method, settings.alternative
    scale = float(np.abs(d).mean())
    if test_method == "randomization" and exact_enumeration(col.n_nonzero, settings.n_resamples):
        null = exact_sign_flip_means(d)
        return null, null_p_value(null, observed, alternative, scale, monte_carlo=False), "randomization-exact"
    if test_method == "randomization":
        null = cast(np.ndarray, col.flips).copy()
        return null, null_p_value(null, observed, alternative, scale, monte_carlo=True), test_method
    if test_method == "bootstrap":
        # Shifting the replicates to mean zero imposes the null (Efron & Tibshirani 1993, sec. 16.4).
        null = col.boot - observed
        return null, null_p_value(null, observed, alternative, scale, monte_carlo=True), test_method
    if test_method == "wilcoxon":
        p, reported = wilcoxon_p_value(d, alternative, settings.zero_method)
        return None, p, reported
    if test_method == "sign":
        return None, sign_test_p_value(d, alternative), test_method
    return None, t_test_p_value(d, alternative), test_method


def _interval(col: _Column, alpha: float, settings: ComparisonSettings) -> tuple[float, float, str]:
    """-> (low, high, the method as reported): BCa when asked and possible, else the percentile interval."""
    if settings.interval_method == "bca":
        bounds = _bca_interval(col.boot, col.d, col.observed, alpha, settings.alternative)
        if bounds is not None:
            return (*bounds, "bca")
        warn(
            f"{col.label}: every bootstrap replicate lies on one side of the "
            "estimate, so the BCa bias correction is infinite; the percentile interval is reported "
            "(interval_method 'percentile' in this row)",
            IntervalFallbackWarning,
        )
    return (*_percentile_interval(col.boot, col.observed, alpha, settings.alternative), "percentile")


def _unit_counts(col: _Column, units: Units) -> dict:
    """The row and unit counts, and the units the candidate won, tied and lost."""
    wins, losses = int((col.d > 0).sum()), int((col.d < 0).sum())
    return {
        "n_samples": units.n_samples,
        "n_units": units.n_units,
        "n_nonzero": col.n_nonzero,
        "tie_rate": 1.0 - col.n_nonzero / units.n_units,
        "wins": wins,
        "ties": units.n_units - wins - losses,
        "losses": losses,
    }


def exact_enumeration(n_nonzero: int, n_resamples: int) -> bool:
    """Whether every sign pattern is enumerated: there are no more of them than resamples."""
    return n_nonzero <= MAX_EXACT_UNITS and 2 ** int(n_nonzero) <= n_resamples


def stream_seed_sequences(random_state: int | None, *labels: str):
    """Two independent seed sequences (signs, bootstrap) for the stream named by ``labels``: a model pair's
    (baseline, candidate), or a max-T family's; the same labels and seed give the same streams."""
    digest = hashlib.sha256("\x00".join(labels).encode()).digest()
    words = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    entropy = random_state if random_state is not None else np.random.SeedSequence().entropy
    return tuple(np.random.SeedSequence(entropy, spawn_key=words + (stream,)) for stream in (0, 1))


def null_p_value(null: np.ndarray, observed: float, alternative: str, scale: float, *, monte_carlo: bool) -> float:
    """Share of null replicates at least as extreme as ``observed``: ``(1 + #extreme) / (B + 1)`` for Monte Carlo, never
    zero (Phipson & Smyth 2010), ``#extreme / 2**k`` for an enumeration, which holds the observed arrangement. 100 ulps
    of the data's scale keep that arrangement, summed in another order, tied to itself."""
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


def t_test_p_value(d: np.ndarray, alternative: str) -> float:
    """Paired t-test as a one-sample t-test of the unit differences (Student 1908)."""
    if np.all(d == d[0]):
        # No spread: the t statistic is 0/0 or +-inf; take its limit instead of NaN.
        if d[0] == 0:
            return 1.0
        return 0.0 if (alternative == "two-sided" or (alternative == "greater") == (d[0] > 0)) else 1.0
    # Testing mean(d) = 0 is testing mean(d - centre) = -centre; deviations from a value of d keep the variance free of
    # cancellation when the differences are nearly constant (e.g. one shift plus rounding).
    centre = float(column_centres(d[:, None])[0])
    return float(scipy.stats.ttest_1samp(d - centre, -centre, alternative=alternative).pvalue)


def sign_test_p_value(d: np.ndarray, alternative: str) -> float:
    """The sign test of the unit differences ``d`` (float ``(n_units,)``): the exact binomial test of the positive ones
    among the non-zero ones against 1/2 (Dixon & Mood 1946, JASA 41); zeros are dropped, and p = 1 when every
    difference is 0.

    Read from the binomial distribution's tails (``scipy.stats.binom``, the functions ``scipy.stats.binomtest`` sums)
    at a cost of microseconds instead of binomtest's milliseconds: with p = 1/2 the distribution is symmetric, so the
    outcomes at most as likely as ``wins`` are the two tails beyond it and the two-sided p is twice the smaller tail,
    capped at 1 (tested equal to binomtest's p to 1e-9 relative up to 3e7 non-zero differences). The distribution
    function itself is not taken from ``scipy.special.bdtr``, whose incomplete beta drifts near the centre of large
    samples (0.4986 for 0.5 at n = 10^7).
    """
    wins, nonzero = int(np.count_nonzero(d > 0)), int(np.count_nonzero(d))
    if nonzero == 0:
        return 1.0
    at_most = float(scipy.stats.binom.cdf(wins, nonzero, 0.5))  # P(X <= wins)
    at_least = float(scipy.stats.binom.sf(wins - 1, nonzero, 0.5))  # P(X >= wins)
    if alternative == "less":
        return at_most
    if alternative == "greater":
        return at_least
    return min(1.0, 2.0 * min(at_most, at_least))


#: Most non-zero differences for which the Wilcoxon test uses the exact null distribution of its rank sum.
WILCOXON_EXACT_MAX = 50


def wilcoxon_method(d: np.ndarray) -> Literal["exact", "approx"]:
    """How the Wilcoxon signed-rank test of the differences ``d`` is computed: this package's rule, not scipy's.

    ``"exact"`` (the exact null distribution of the signed-rank sum, Wilcoxon 1945) when ``d`` has no zero, no two equal
    magnitudes ``|d_i|`` and at most :data:`WILCOXON_EXACT_MAX` values; else ``"approx"``: the normal approximation of
    the rank sum with the variance corrected for tied ranks and without continuity correction (Lehmann, 1975,
    *Nonparametrics*, sec. 3.2). The rule is passed to ``scipy.stats.wilcoxon`` as ``method=``, so the p-value does not
    depend on the SciPy version: the ``"auto"`` choice changed between versions (SciPy 1.11 used the normal
    approximation whenever there were zeros or ties, newer versions compute an exact permutation distribution for small
    samples with them), while ``"exact"`` without zeros or ties and ``"approx"`` compute the same in every version from
    1.11 on.

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


def wilcoxon_p_value(d: np.ndarray, alternative: str, zero_method: str) -> tuple[float, str]:
    """Wilcoxon signed-rank test (Wilcoxon 1945) -> (p-value, ``"wilcoxon-exact"`` or ``"wilcoxon"``).

    With every difference 0 (nothing to rank) and wherever scipy gives NaN, p = 1 as for the other tests.
    """
    method = wilcoxon_method(d)
    reported = "wilcoxon-exact" if method == "exact" else "wilcoxon"
    if not np.any(d):
        return 1.0, reported
    with warnings.catch_warnings():
        # scipy warns when few differences remain for the normal approximation; wilcoxon_method states the rule.
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
    """Bias-corrected and accelerated bootstrap interval of the mean (Efron 1987) holding ``estimate``, or ``None``
    (every replicate on one side of it) for the caller to fall back to the percentile interval.

    ``z0 = Phi^-1(share of replicates below the estimate)``, ties counting one half. The acceleration is the jackknife's
    (Efron & Tibshirani 1993, sec. 14.3): the leave-one-out means deviate by ``(d_i - mean) / (n - 1)``, whose powers of
    ``n - 1`` cancel in ``a = sum(dev**3) / (6 * sum(dev**2) ** 1.5)``. The end at level ``q`` is the replicates'
    quantile at ``Phi(z0 + (z0 + z_q) / (1 - a * (z0 + z_q)))``.
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
        return float(quantiles(replicates, [scipy.stats.norm.cdf(z0 + z / (1.0 - a * z))])[0])

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
    """Percentile bootstrap interval (Efron 1979), one-sided when the test is, holding ``estimate``: a replicate equal
    to it mathematically can land an ulp past it (summed in another order), and every reader assumes ``ci_low <=
    difference <= ci_high``."""
    if alternative == "two-sided":
        low, high = (float(q) for q in quantiles(replicates, [alpha / 2, 1 - alpha / 2]))
    elif alternative == "greater":
        low, high = float(quantiles(replicates, [alpha])[0]), float("inf")
    else:
        low, high = float("-inf"), float(quantiles(replicates, [1 - alpha])[0])
    return min(low, estimate), max(high, estimate)


def direction(difference: float, significant: bool, judged: bool = True) -> str:
    """``"better"`` or ``"worse"`` for a significant difference of that sign, else ``"inconclusive"``; ``"higher"`` or
    ``"lower"`` instead when the metric is not ``judged`` (neither side of it is the better one)."""
    if significant and difference > 0:
        return "better" if judged else "higher"
    if significant and difference < 0:
        return "worse" if judged else "lower"
    return "inconclusive"
