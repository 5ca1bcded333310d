"""Spread of a comparison across training seeds, beside its spread across users.

The bootstrap interval of :func:`~mlflow_recsys.stats.compare_pair` resamples users for fixed trained models. Retraining
a stochastic model under another seed moves the difference too; this module measures that second source and puts it on
the same scale: both are standard deviations of the same estimated difference. Independent sources add in quadrature
(variances add).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from mlflow_recsys._validation import metric_keys
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._comparison import check_replicate_memory, compare_models
from mlflow_recsys.stats._inference import bootstrap_rows
from mlflow_recsys.stats._pairing import check_results, paired_differences, units_of
from mlflow_recsys.stats._results import ComparisonReport, Markup
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.stats._units import Units
from mlflow_recsys.stats._warnings import ComparisonWarning, FewSeedsWarning, warn

Side = EvaluationResult | Mapping[object, EvaluationResult]

#: Columns of :meth:`SeedSpread.to_frame`, in order.
SEED_COLUMNS = (
    *("metric", "baseline", "candidate", "n_seeds", "protocol", "mean_difference", "min_difference"),
    *("max_difference", "sd_users", "sd_retraining", "ratio", "widens_by", "sign_reversals", "notes"),
)

#: Columns of :meth:`SeedSpread.per_seed_frame`, in order.
PER_SEED_COLUMNS = (
    *("metric", "baseline_seed", "candidate_seed", "baseline_mean", "candidate_mean", "difference", "ci_low"),
    *("ci_high", "bootstrap_standard_error"),
)

#: Seeds needed before a ratio near 1 can be read as one source or the other.
MIN_SEEDS_TO_SEPARATE = 10


@dataclass(frozen=True, eq=False)
class SeedSpread:
    """Retraining spread beside user spread, per metric.

    Both spreads are standard deviations of the same quantity, the estimated difference (candidate minus baseline): one
    under resampling users for fixed trained models, the other under retraining with another seed. Because they measure
    one number, their ratio is meaningful; because the two sources are roughly independent, they add in quadrature.

    Columns of :meth:`to_frame`:

    ``metric``, ``baseline``, ``candidate``
        The hypothesis.
    ``n_seeds``
        Seed pairs measured (the seeded side's runs; with independent seeds, the smaller side's count).
    ``protocol``
        ``one-side-seeded``, ``paired-seeds`` or ``independent-seeds`` (see :func:`seed_spread`).
    ``mean_difference``
        Mean over seeds of the difference.
    ``min_difference``, ``max_difference``
        Extremes of the per-seed differences.
    ``sd_users``
        Mean over seeds of the bootstrap standard error of the difference: the spread a different sample of users would
        cause.
    ``sd_retraining``
        Standard deviation (ddof=1) of the difference across retraining: the spread one more training run would cause.
    ``ratio``
        ``sd_retraining / sd_users``. Well below 1: users are the larger unknown and the interval carries most of the
        uncertainty. Near or above 1: the interval describes the trained model more than the method.
    ``widens_by``
        ``hypot(sd_users, sd_retraining) / sd_users - 1``: how much an interval allowing for retraining would be wider.
    ``sign_reversals``
        Seed pairs whose difference has the opposite sign to the mean: a check that needs no distributional assumption.
    ``notes``
        Caveats, e.g. that a ratio near 1 cannot be told from 1 with few seeds (the SD of ``k`` runs has about
        ``1/sqrt(2(k-1))`` relative error).
    """

    summary: pd.DataFrame
    per_seed: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        """One row per metric with :data:`SEED_COLUMNS`."""
        return self.summary.copy()

    def per_seed_frame(self) -> pd.DataFrame:
        """One row per (metric, seed pair) with :data:`PER_SEED_COLUMNS`."""
        return self.per_seed.copy()

    def results_text(self, metric: str, *, markup: Markup = "plain") -> str:
        """One sentence on the seed spread of ``metric``.

        Parameters
        ----------
        metric:
            A metric key of the table.
        markup:
            ``"plain"`` (default: names as they are, for a terminal or HTML escaping) or ``"markdown"`` (names and the
            metric key through :func:`~mlflow_recsys.report.escape_markdown`, for run notes).

        Raises
        ------
        KeyError
            If ``metric`` is not in the table, listing those that are.
        ValueError
            If ``markup`` is neither ``"markdown"`` nor ``"plain"``.
        """
        from mlflow_recsys.report._text import seed_spread_text

        return seed_spread_text(self, metric, markup=markup)


def seed_spread(
    baseline: Side,
    candidate: Side,
    *,
    metrics: str | Sequence[str],
    baseline_name: str = "baseline",
    candidate_name: str = "candidate",
    paired_seeds: bool = False,
    confidence_level: float = 0.95,
    n_resamples: int = 9999,
    random_state: int | None = 0,
) -> SeedSpread:
    """Measure how much retraining moves the difference, beside how much users do.

    Three protocols, recorded in the ``protocol`` column:

    - ``one-side-seeded``: one side deterministic; ``sd_retraining`` is the SD (ddof=1) of the per-seed differences.
    - ``paired-seeds``: both seeded and paired by seed; SD (ddof=1) of the paired differences.
    - ``independent-seeds``: both seeded, independent; ``sqrt(sd_b**2 + sd_c**2)`` of each model's own aggregate over
      its seeds (never all cross pairs); the per-seed table then matches seeds by sorted order only to show individual
      differences.

    ``sd_users`` is the mean over seed pairs of the bootstrap standard error of the difference; ``ratio = sd_retraining
    / sd_users``; ``widens_by = hypot(sd_users, sd_retraining) / sd_users - 1``; ``sign_reversals`` counts seed pairs
    whose difference has the sign opposite to ``mean_difference``.

    Parameters
    ----------
    baseline:
        Either one :class:`EvaluationResult` (a deterministic model such as EASE) or a mapping seed -> EvaluationResult
        (a stochastic model), all scored on the same users and targets.
    candidate:
        The same for the candidate model.
    metrics:
        One metric key or a list of keys.
    baseline_name:
        Label of the baseline; it also seeds the bootstrap exactly as in :func:`compare_pair`. Default ``"baseline"``.
    candidate_name:
        Label of the candidate, likewise. Default ``"candidate"``.
    paired_seeds:
        Only when both sides have seeds: pair runs by seed, for seeds that control randomness both models share (e.g.
        batch order). Default False: each model's own spread, added in quadrature.
    confidence_level:
        Level of the per-seed bootstrap intervals, as in :func:`compare_pair`. Default 0.95.
    n_resamples:
        Bootstrap replicates per seed pair. Default 9,999.
    random_state:
        Seed of the bootstrap, as in :func:`compare_pair`. Default 0.

    Returns
    -------
    SeedSpread

    Raises
    ------
    ValueError
        If neither side has seeds, a seeded side has fewer than 2 seeds, ``paired_seeds`` is set without seeds on both
        sides or with different seed sets, or the results cannot be compared (see :func:`compare_models`).

    Warns
    -----
    FewSeedsWarning
        With 2 to 4 seeds on a seeded side.
    """
    metrics = metric_keys(metrics)
    base_seeds = _side_iv(baseline, "baseline", baseline_name)
    cand_seeds = _side_iv(candidate, "candidate", candidate_name)
    protocol, pairs = _seed_pairs(baseline, candidate, base_seeds, cand_seeds, paired_seeds)
    settings = ComparisonSettings(
        reference=baseline_name,
        metrics=tuple(metrics),
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        random_state=random_state,
    )
    per_seed = _per_seed_frame(pairs, (baseline_name, candidate_name), settings)
    summary = [
        {
            "metric": metric,
            "baseline": baseline_name,
            "candidate": candidate_name,
            **_spread_row(per_seed[per_seed["metric"] == metric], protocol, baseline, candidate, metric),
        }
        for metric in metrics
    ]
    return SeedSpread(summary=pd.DataFrame(summary, columns=list(SEED_COLUMNS)), per_seed=per_seed)


def _seed_pairs(
    baseline, candidate, base_seeds: list | None, cand_seeds: list | None, paired_seeds: bool
) -> tuple[str, list[tuple]]:
    """The protocol and its seed pairs ``(baseline seed, candidate seed, baseline result, candidate result)``."""
    if base_seeds is None and cand_seeds is None:
        raise ValueError(
            "baseline, candidate: expected at least one side to be a mapping seed -> EvaluationResult, "
            "found a single EvaluationResult on both sides (there is no retraining spread to measure)"
        )
    if paired_seeds and (base_seeds is None or cand_seeds is None):
        raise ValueError("paired_seeds: True needs seeds on both sides, found one side deterministic")
    if base_seeds is None:
        return "one-side-seeded", [(None, s, baseline, candidate[s]) for s in cast(list, cand_seeds)]
    if cand_seeds is None:
        return "one-side-seeded", [(s, None, baseline[s], candidate) for s in base_seeds]
    if not paired_seeds:
        # The sides may have different numbers of seeds: the per-seed table pairs the smaller side's, sorted.
        return "independent-seeds", [
            (b, c, baseline[b], candidate[c]) for b, c in zip(base_seeds, cand_seeds, strict=False)
        ]
    if set(base_seeds) != set(cand_seeds):
        raise ValueError(
            "paired_seeds: expected the same seeds on both sides, found baseline seeds "
            f"{base_seeds} and candidate seeds {cand_seeds}"
        )
    return "paired-seeds", [(s, s, baseline[s], candidate[s]) for s in base_seeds]


def _per_seed_frame(pairs: list[tuple], names: tuple[str, str], settings: ComparisonSettings) -> pd.DataFrame:
    """One row per (metric, seed pair) with :data:`PER_SEED_COLUMNS`, bootstrapped as by :func:`compare_pair`."""
    metrics = list(settings.metrics or ())
    rows = []
    check_replicate_memory(settings.n_resamples, len(metrics))  # the same B and metrics for every seed pair
    with warnings.catch_warnings():
        # The main comparison already warned of unverified pairing; once per seed adds noise, not information.
        warnings.simplefilter("ignore", ComparisonWarning)
        for b_seed, c_seed, b_res, c_res in pairs:
            results = dict(zip(names, (b_res, c_res), strict=True))
            check_results(results, metrics)
            pair = paired_differences(results, names, metrics, units_of(b_res))
            rows += [
                {"metric": row["metric"], "baseline_seed": b_seed, "candidate_seed": c_seed}
                | {k: row[k] for k in PER_SEED_COLUMNS[3:]}
                for row in bootstrap_rows(pair, settings)
            ]
    return pd.DataFrame(rows, columns=list(PER_SEED_COLUMNS))


def _spread_row(m: pd.DataFrame, protocol: str, baseline, candidate, metric: str) -> dict:
    """The :data:`SEED_COLUMNS` after the names from one metric's per-seed rows ``m``."""
    diffs = m["difference"].to_numpy()
    sd_users = float(m["bootstrap_standard_error"].mean())
    notes = []
    if protocol == "independent-seeds":
        base_aggs, cand_aggs = _unit_means(baseline, metric), _unit_means(candidate, metric)
        mean_difference = float(cand_aggs.mean() - base_aggs.mean())
        sd_retraining = float(math.hypot(np.std(base_aggs, ddof=1), np.std(cand_aggs, ddof=1)))
        n_seeds = int(min(len(base_aggs), len(cand_aggs)))
        notes.append(
            f"{len(base_aggs)} baseline and {len(cand_aggs)} candidate seeds, treated as independent: the "
            "retraining SD adds each model's own spread, and the lowest and highest differences and the sign "
            "reversals pair the seeds in sorted order"
        )
    else:
        mean_difference = float(diffs.mean())
        sd_retraining = float(np.std(diffs, ddof=1))
        n_seeds = int(len(diffs))
    ratio = sd_retraining / sd_users if sd_users > 0 else float("nan")
    widens_by = math.hypot(sd_users, sd_retraining) / sd_users - 1 if sd_users > 0 else float("nan")
    if n_seeds < MIN_SEEDS_TO_SEPARATE and 0.7 <= ratio <= 1.4:
        rel_error = 1 / math.sqrt(2 * (n_seeds - 1))
        notes.append(
            f"with {n_seeds} seeds the retraining SD has about {rel_error:.0%} relative error, too much to "
            f"tell a ratio of {ratio:.2f} from 1; run more seeds to separate the two sources"
        )
    return {
        "n_seeds": n_seeds,
        "protocol": protocol,
        "mean_difference": mean_difference,
        "min_difference": float(diffs.min()),
        "max_difference": float(diffs.max()),
        "sd_users": sd_users,
        "sd_retraining": sd_retraining,
        "ratio": ratio,
        "widens_by": widens_by,
        "sign_reversals": int(np.sum(diffs * np.sign(mean_difference) < 0)),
        "notes": "; ".join(notes),
    }


def _side_iv(side, name: str, label: str) -> list | None:
    """Sorted seeds of a seeded side, or None for a single result."""
    if isinstance(side, EvaluationResult):
        return None
    if not isinstance(side, Mapping):
        raise TypeError(
            f"{name}: expected an EvaluationResult or a mapping seed -> EvaluationResult, found {type(side).__name__}"
        )
    for seed, res in side.items():
        if not isinstance(res, EvaluationResult):
            raise TypeError(f"{name}[{seed!r}]: expected an EvaluationResult, found {type(res).__name__}")
    if len(side) < 2:
        raise ValueError(f"{name}: expected at least 2 seeds to estimate a retraining spread, found {len(side)}")
    if len(side) < 5:
        warn(
            f"{name} ({label}): only {len(side)} seeds; a standard deviation from so few runs is very uncertain "
            f"(about {1 / math.sqrt(2 * (len(side) - 1)):.0%} relative error)",
            FewSeedsWarning,
        )
    return sorted(side, key=lambda s: (str(type(s)), s))


def _unit_means(side: Mapping[object, EvaluationResult], metric: str) -> np.ndarray:
    """Each seed's mean over users (each user's rows averaged first)."""
    return np.asarray(
        [
            float(Units.from_sample_ids(r.sample_ids).means(cast("dict[str, np.ndarray]", r.per_user)[metric]).mean())
            for r in side.values()
        ]
    )


def average_over_seeds(results: Mapping[object, EvaluationResult], *, name: str = "results") -> EvaluationResult:
    """One model's per-user metric values averaged over the instances trained under its seeds.

    Parameters
    ----------
    results:
        Seed -> :class:`EvaluationResult`, at least one, each with per-user values, all on the same sample ids in the
        same order and with the same targets fingerprint.
    name:
        How the argument is named in error messages (default ``"results"``).

    Returns
    -------
    EvaluationResult
        ``per_user[m]``: float64 ``(n_samples,)``, the row-wise mean over seeds (summed in sorted seed order, so the
        result does not depend on the mapping's order); ``metrics[m]``: its mean; the metric keys are those every seed
        holds, in the first seed's order; ``sample_ids``, ``targets_fingerprint`` and ``definitions`` from the seeds.

    Raises
    ------
    TypeError
        If ``results`` is not a mapping of EvaluationResult.
    ValueError
        If it is empty, a seed lacks per-user values, or the seeds differ in sample ids (length, content or order) or
        targets fingerprint.
    """
    if not isinstance(results, Mapping):
        raise TypeError(f"{name}: expected a mapping seed -> EvaluationResult, found {type(results).__name__}")
    if not results:
        raise ValueError(f"{name}: expected at least one seed, found none")
    for seed, res in results.items():
        if not isinstance(res, EvaluationResult):
            raise TypeError(f"{name}[{seed!r}]: expected an EvaluationResult, found {type(res).__name__}")
        if res.per_user is None:
            raise ValueError(f"{name}[{seed!r}]: holds no per-user values (evaluated with collect_per_user=False)")
    seed_values = {seed: cast("dict[str, np.ndarray]", res.per_user) for seed, res in results.items()}
    # Sorted only to fix the summation order; repr keeps seeds of mixed types (1, "a", (1, 2)) sortable.
    seeds = sorted(results, key=lambda s: (type(s).__name__, repr(s)))
    first = results[seeds[0]]
    ids = np.asarray(first.sample_ids)
    for seed in seeds:
        res = results[seed]
        other = np.asarray(res.sample_ids)
        if other.shape != ids.shape or not np.array_equal(other, ids):
            raise ValueError(
                f"{name}: seed {seed!r} was evaluated on other sample ids than seed {seeds[0]!r} "
                f"({other.shape[0]} rows against {ids.shape[0]}, or another order); every seed must be scored "
                "on the same users in the same order"
            )
        if res.targets_fingerprint != first.targets_fingerprint:
            raise ValueError(
                f"{name}: seed {seed!r} has targets fingerprint {str(res.targets_fingerprint)[:12]}, seed "
                f"{seeds[0]!r} has {str(first.targets_fingerprint)[:12]}; the seeds were not scored on the same "
                "targets"
            )
        for key, values in seed_values[seed].items():
            if np.shape(values) != ids.shape:
                raise ValueError(
                    f"{name}[{seed!r}]: expected per-user values of {key!r} with one value per sample id "
                    f"({ids.shape[0]}), found shape {np.shape(values)}"
                )
    keys = [k for k in seed_values[seeds[0]] if all(k in seed_values[s] for s in seeds)]
    # Summed in sorted seed order from zero, so the mean does not depend on the mapping's order.
    zero = np.zeros(ids.shape[0], dtype=np.float64)
    per_user = {
        k: sum((np.asarray(seed_values[s][k], dtype=np.float64) for s in seeds), zero) / len(seeds) for k in keys
    }
    return EvaluationResult(
        metrics={k: float(v.mean()) for k, v in per_user.items()},
        per_user=per_user,
        sample_ids=first.sample_ids,
        targets_fingerprint=first.targets_fingerprint,
        definitions={k: d for k, d in first.definitions.items() if k in per_user},
    )


def compare_seed_averaged(results: Mapping[str, Side], *, metrics: str | Sequence[str], **settings) -> ComparisonReport:
    """Compare models on their per-user metric values averaged over training seeds, paired over users.

    Each model's per-user values are first averaged over the instances trained under its seeds
    (:func:`average_over_seeds`); the averages are then compared exactly as :func:`~mlflow_recsys.stats.compare_models`
    compares single trained instances, with the same settings and the same random streams. Averaging removes part of the
    retraining noise from every user's difference, so the comparison is about the training procedure's typical instance
    rather than one draw of it. Inference is still over users for the trained instances at hand: the intervals and
    p-values do not cover the spread a new seed would bring, which :func:`seed_spread` describes.

    Parameters
    ----------
    results:
        Model name -> either one :class:`EvaluationResult` (a deterministic model, one instance) or a mapping seed ->
        EvaluationResult (a seeded model), all on the same sample ids in the same order.
    metrics:
        One metric key or a list of keys.
    **settings:
        Every keyword of :func:`~mlflow_recsys.stats.compare_models` (``reference``, ``correction``, ``primary``,
        ``family``, ...), with its defaults.

    Returns
    -------
    ComparisonReport
        As :func:`~mlflow_recsys.stats.compare_models`, with the columns ``baseline_seeds`` and ``candidate_seeds``
        giving how many instances each side averages; :attr:`ComparisonReport.seed_averaged` is True when any side
        averages two or more.

    Raises
    ------
    TypeError, ValueError
        As :func:`average_over_seeds` (naming ``results[<model>]``) and :func:`~mlflow_recsys.stats.compare_models`.
    """
    if not isinstance(results, Mapping):
        raise TypeError(
            f"results: expected a mapping of model name -> EvaluationResult or seed mapping, "
            f"found {type(results).__name__}"
        )
    averaged = {
        m: s if isinstance(s, EvaluationResult) else average_over_seeds(s, name=f"results[{m!r}]")
        for m, s in results.items()
    }
    counts = {m: 1 if isinstance(s, EvaluationResult) else len(s) for m, s in results.items()}
    report = compare_models(averaged, metrics=metrics, **settings)
    return dataclasses.replace(
        report,
        comparisons=tuple(
            dataclasses.replace(c, baseline_seeds=counts[c.baseline], candidate_seeds=counts[c.candidate])
            for c in report.comparisons
        ),
    )
