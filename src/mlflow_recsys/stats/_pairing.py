"""Paired input: the checks that results were scored on the same users and targets, and the per-unit differences every
test and interval of a model pair works on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._units import Units
from mlflow_recsys.stats._warnings import UnverifiedPairingWarning, warn

#: Differences within this fraction of the larger of their two values are rounding, not a difference: they count as ties
#: (0). Two models that score a user equally can differ by a few ulps when a score is an average computed in another
#: order, e.g. a seed average (0.4 + 0.4 + 0.4) / 3 against a single 0.4; counted as a difference, such noise would turn
#: ties into wins, and a model compared with copies of itself would come out significant. Ranking metrics are ratios of
#: small integers, so no real difference is within 1e-12 of the values.
TIE_RTOL = 1e-12

#: Largest magnitude of a per-user value a comparison takes. The effect sizes square the differences and the resampling
#: sums them over users, which must stay finite in float64 (at most about 1.8e308): 1e100 leaves room for both.
MAX_ABS_VALUE = 1e100


def units_of(first: EvaluationResult) -> Units:
    """The units (users) of the results' sample ids; ValueError when fewer than two."""
    units = Units.from_sample_ids(first.sample_ids)
    if units.n_units < 2:
        raise ValueError(
            f"results: expected at least 2 distinct users (units) to estimate variation across users, "
            f"found {units.n_units} (from {units.n_samples} rows)"
        )
    return units


@dataclass(frozen=True, eq=False)
class PairedDifferences:
    """One ordered model pair on its metrics: ``differences``, float64 ``(n_units, n_metrics)``, column-major, candidate
    minus baseline after each user's rows are averaged (ties within :data:`TIE_RTOL` set to 0), and each side's mean
    over units per metric (float64 ``(n_metrics,)``); ``sides``, each side's unit means, float64 ``(2, n_units,
    n_metrics)``, baseline then candidate (a ratio of means is bootstrapped from them)."""

    baseline: str
    candidate: str
    metrics: list[str]
    units: Units
    differences: np.ndarray
    baseline_means: np.ndarray
    candidate_means: np.ndarray
    sides: np.ndarray


def paired_differences(
    results: Mapping[str, EvaluationResult],
    pair: tuple[str, str],
    metrics: list[str],
    units: Units,
) -> PairedDifferences:
    """The pair ``(baseline, candidate)`` of ``results`` (checked by :func:`check_results`) on ``metrics``, with each
    side's unit means."""
    base, cand = results[pair[0]].per_user, results[pair[1]].per_user
    assert base is not None and cand is not None  # check_results has refused results without per-user values
    # Column-major, one metric at a time: each column is contiguous and reduces exactly as it would alone, and no (rows
    # x metrics) copy of the inputs is ever made.
    d = np.empty((units.n_units, len(metrics)), dtype=np.float64, order="F")
    base_means = np.empty(len(metrics))
    cand_means = np.empty(len(metrics))
    sides = np.empty((2, units.n_units, len(metrics)))
    for j, metric in enumerate(metrics):
        base_col = units.means(base[metric])
        cand_col = units.means(cand[metric])
        sides[0, :, j], sides[1, :, j] = base_col, cand_col
        base_means[j], cand_means[j] = base_col.mean(), cand_col.mean()
        np.subtract(cand_col, base_col, out=d[:, j])
        d[np.abs(d[:, j]) <= TIE_RTOL * np.maximum(np.abs(base_col), np.abs(cand_col)), j] = 0.0
    return PairedDifferences(*pair, metrics, units, d, base_means, cand_means, sides)


def check_results(results, metrics: list[str]) -> list[str]:
    """The model names of ``results``, checked to be paired results holding finite values of ``metrics``."""
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
            bad = ~(np.abs(values) <= MAX_ABS_VALUE)  # NaN too
            if bad.any():
                first = np.asarray(res.sample_ids)[np.argmax(bad)].item()
                kind = "non-finite" if not np.isfinite(values[bad]).all() else f"above {MAX_ABS_VALUE:g} in magnitude"
                raise ValueError(
                    f"results[{name!r}]: expected finite per-user values of {m!r} of magnitude at most "
                    f"{MAX_ABS_VALUE:g}, found {int(bad.sum())} {kind} (first at sample id {first!r}: "
                    f"{float(values[np.argmax(bad)])!r})"
                )
    _check_same_users(results, names)
    _check_fingerprints(results, names)
    return names


def _check_same_users(results, names) -> None:
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


def _check_fingerprints(results, names) -> None:
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
