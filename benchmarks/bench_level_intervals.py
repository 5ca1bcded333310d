"""Time and memory of the metric-level intervals a training run logs; prints figures, asserts nothing.

    .venv/bin/python benchmarks/bench_level_intervals.py            # 188 users (MovieLens-100k) and 100,000
    .venv/bin/python benchmarks/bench_level_intervals.py --quick    # 188 and 10,000

``metric_level_intervals`` at B = 9,999 on ranking-like per-user values of the default metrics: the first
call in a fresh process (it loads the compiled kernel from numba's cache, as a ``train`` run does), then the
median of five calls and the peak resident memory above the baseline (read from /proc: the kernels allocate
outside tracemalloc).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_stats import median_seconds, peak_extra_mib

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.models._train_config import DEFAULT_METRICS


def ranking_like(n_units: int, seed: int = 0) -> EvaluationResult:
    """One model's per-user values shaped like ranking metrics: bounded, a third of the users at zero."""
    rng = np.random.default_rng(seed)
    per_user = {key: rng.beta(2, 3, n_units) * (rng.random(n_units) > 0.3) for key in DEFAULT_METRICS}
    return EvaluationResult.from_per_user(per_user, sample_ids=np.arange(n_units), targets_fingerprint="x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 users instead of 100,000")
    parser.add_argument("--resamples", type=int, default=9999)
    args = parser.parse_args()
    started = time.perf_counter()
    from mlflow_recsys.stats._levels import metric_level_intervals

    imported = time.perf_counter() - started
    sizes = (188, 10_000) if args.quick else (188, 100_000)
    print(f"metric_level_intervals, B = {args.resamples:,}, {len(DEFAULT_METRICS)} metrics {list(DEFAULT_METRICS)}")
    print(f"  import of mlflow_recsys.stats._levels: {imported:.3f} s")
    for i, n in enumerate(sizes):
        result = ranking_like(n)

        def call(result=result):
            return metric_level_intervals(result, n_resamples=args.resamples)

        if i == 0:
            started = time.perf_counter()
            call()
            print(
                f"  first call in this process ({n:,} users, kernel loaded from cache): "
                f"{time.perf_counter() - started:.3f} s"
            )
        print(f"  {n:>7,} users: median {median_seconds(call):.3f} s, peak +{peak_extra_mib(call):.0f} MiB")


if __name__ == "__main__":
    main()
