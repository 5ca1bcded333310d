"""Time and memory of the paired statistics; prints figures, asserts nothing.

    .venv/bin/python benchmarks/bench_stats.py            # the issue's figures
    .venv/bin/python benchmarks/bench_stats.py --quick    # a smaller run

Reports the median of five calls (fifteen, taking turns, for the comparison and its max-T and sliced variants) for:
- a default ``compare_models`` call (randomization test plus bootstrap interval)
  on 2,500 users x 4 metrics x one pair at B = 9,999, with its two parts timed
  separately, beside a straightforward per-hypothesis NumPy implementation, and
  the same call with ``correction="maxt"`` (for one and for two candidates), and with one slice of four history
  strata (``slices=[history_slice(..., bins=4)]``);
- scaling in users (1e3 .. 1e6) and in B, with peak resident memory above the
  baseline. The peak is read from /proc (VmHWM after resetting it), because the
  compiled kernels allocate outside Python's tracemalloc.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import pandas as pd

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import ComparisonWarning, compare_models, history_slice
from mlflow_recsys.stats._resampling import bootstrap_means, sign_flip_means

METRICS = ["ndcg@100", "calibrated_recall@20", "recall@20", "mrr@20"]


def ranking_like_results(n_units: int, seed: int = 0) -> dict[str, EvaluationResult]:
    """Two models' per-user values shaped like ranking metrics: bounded, often tied."""
    rng = np.random.default_rng(seed)
    base, cand = {}, {}
    for key in METRICS:
        b = rng.beta(2, 3, n_units)
        moved = rng.random(n_units) < 0.6
        base[key] = b
        cand[key] = np.clip(b + moved * rng.normal(0.005, 0.08, n_units), 0, 1)
    ids = np.arange(n_units)
    return {
        "EASE": EvaluationResult.from_per_user(base, sample_ids=ids, targets_fingerprint="x"),
        "ELSA": EvaluationResult.from_per_user(cand, sample_ids=ids, targets_fingerprint="x"),
    }


def median_seconds(func, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def interleaved_medians(funcs, rounds: int) -> list[float]:
    """Each function's median time over ``rounds`` rounds in which every function runs once, in turn."""
    times: list[list[float]] = [[] for _ in funcs]
    for _ in range(rounds):
        for func, spent in zip(funcs, times, strict=True):
            start = time.perf_counter()
            func()
            spent.append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def reset_peak() -> int:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
    return _status_kib("VmRSS")


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field)


def peak_extra_mib(func) -> float:
    baseline = reset_peak()
    func()
    return (_status_kib("VmHWM") - baseline) / 1024


def naive_numpy(d: np.ndarray, n_resamples: int, seed: int = 0) -> None:
    """What one writes first: per hypothesis, a (B, n) sign matrix and a (B, n) index matrix."""
    rng = np.random.default_rng(seed)
    n = d.shape[0]
    for j in range(d.shape[1]):
        signs = rng.choice([-1.0, 1.0], size=(n_resamples, n))
        null = signs @ d[:, j] / n
        idx = rng.integers(0, n, size=(n_resamples, n))
        boot = d[idx, j].mean(axis=1)
        _ = (np.abs(null) >= abs(d[:, j].mean())).mean(), np.quantile(boot, [0.025, 0.975])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ComparisonWarning)
    B = 9999
    print(f"cores: {os.cpu_count()}, numba threads: {__import__('numba').get_num_threads()}")

    results = ranking_like_results(2500)
    d = np.column_stack([results["ELSA"].per_user[k] - results["EASE"].per_user[k] for k in METRICS])
    ss = np.random.SeedSequence(0)
    compare_models(results, metrics=METRICS, reference="EASE", n_resamples=99)  # compile the kernels
    lengths = pd.Series(np.random.default_rng(3).geometric(0.02, 2500), index=results["EASE"].sample_ids)
    history = [history_slice(lengths, bins=4)]
    same = {"metrics": METRICS, "reference": "EASE", "n_resamples": B}
    # The three calls take turns, so a slow spell of a shared machine falls on all of them alike.
    full, maxt, sliced = interleaved_medians(
        [
            lambda: compare_models(results, **same),
            lambda: compare_models(results, **same, correction="maxt"),
            lambda: compare_models(results, **same, slices=history),
        ],
        rounds=5 if args.quick else 15,
    )
    flips = median_seconds(lambda: sign_flip_means(d, B, ss))
    boot = median_seconds(lambda: bootstrap_means(d, B, ss))
    naive = median_seconds(lambda: naive_numpy(d, B), repeats=1 if args.quick else 3)
    print(f"\n2,500 users x 4 metrics x 1 pair, B = 9,999 (median of {5 if args.quick else 15}, taking turns)")
    print(f"  compare_models (randomization + bootstrap): {full * 1000:8.1f} ms  (issue 33: <= 40 ms)")
    print(f"    randomization part (sign flips):          {flips * 1000:8.1f} ms")
    print(f"    bootstrap part:                           {boot * 1000:8.1f} ms")
    print(f"  straightforward per-hypothesis NumPy:       {naive * 1000:8.1f} ms  ({naive / full:.1f}x slower)")
    added = f"+{maxt / full - 1:.0%}, {(maxt - full) * 1000:+.1f} ms; issue 32: <= +50%"
    print(f"  the same with correction='maxt':            {maxt * 1000:8.1f} ms  ({added})")
    added = f"+{sliced / full - 1:.0%}, {(sliced - full) * 1000:+.1f} ms; issue 32: <= +50%"
    print(f"  the same with one slice of 4 strata:        {sliced * 1000:8.1f} ms  ({added})")
    three = dict(results, POP=ranking_like_results(2500, seed=1)["ELSA"])
    holm3 = median_seconds(lambda: compare_models(three, metrics=METRICS, reference="EASE", n_resamples=B))
    maxt3 = median_seconds(
        lambda: compare_models(three, metrics=METRICS, reference="EASE", n_resamples=B, correction="maxt")
    )
    print(f"  2 candidates (8 hypotheses), Holm:          {holm3 * 1000:8.1f} ms")
    print(f"  2 candidates (8 hypotheses), max-T:         {maxt3 * 1000:8.1f} ms  (+{maxt3 / holm3 - 1:.0%})")

    print("\nScaling in users (4 metrics, B = 9,999)")
    print(f"  {'users':>9} {'compare_models':>15} {'peak extra MiB':>15}")
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    for n in sizes:
        res = ranking_like_results(n)
        call = lambda res=res: compare_models(res, metrics=METRICS, reference="EASE", n_resamples=B)  # noqa: E731
        seconds = median_seconds(call, repeats=1 if n >= 100_000 else 3)
        peak = peak_extra_mib(call)
        print(f"  {n:>9,} {seconds:>13.3f} s {peak:>15.1f}")

    print("\nScaling in B (2,500 users, 4 metrics)")
    for b in (999, 9_999, 99_999):
        seconds = median_seconds(
            lambda b=b: compare_models(results, metrics=METRICS, reference="EASE", n_resamples=b), repeats=3
        )
        print(f"  B = {b:>6,}: {seconds * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
