"""Time and memory of the exposure comparison (coverage@10 and gini@10); prints figures, asserts nothing.

    .venv/bin/python benchmarks/bench_exposure.py            # 2,000, 5,000 and 10,000 items
    .venv/bin/python benchmarks/bench_exposure.py --quick    # 5,000 items, fewer repeats

``compare_exposure`` of two models at 10,000 users x k = 10 x B = 9,999 (the issue's acceptance point: the paired
bootstrap in at most 10 s on a 2-core machine), after a warm-up call that loads or compiles the kernels: the whole
call, and its two parts (the paired bootstrap and the list-swap randomization test) timed alone, median of the
repeats; then the peak resident memory above the baseline (read from /proc, since the compiled kernels allocate
outside tracemalloc), and the scaling in users.
"""

from __future__ import annotations

import argparse
import os
import time

import numba
import numpy as np
from bench_stats import median_seconds, peak_extra_mib

from mlflow_recsys.stats import _exposure_kernels as kernels
from mlflow_recsys.stats import compare_exposure
from mlflow_recsys.stats._resampling import block_seeds

METRICS = ["coverage@10", "gini@10"]
B = 9999


def zipf_lists(n_users: int, n_items: int, k: int, skew: float, seed: int) -> np.ndarray:
    """int32 ``(n_users, k)``: each row k distinct items drawn without replacement with probability proportional to
    ``1 / rank**skew`` (the Gumbel-top-k trick, a few thousand users at a time)."""
    rng = np.random.default_rng(seed)
    log_p = -skew * np.log(np.arange(1, n_items + 1))
    rows = []
    for start in range(0, n_users, max(1, 4_000_000 // n_items)):
        keys = log_p + rng.gumbel(size=(min(n_users - start, max(1, 4_000_000 // n_items)), n_items))
        top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
        rows.append(np.take_along_axis(top, np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1), axis=1))
    return np.concatenate(rows).astype(np.int32)


def two_models(n_users: int, n_items: int) -> dict[str, np.ndarray]:
    """A popularity-heavy model and a flatter one, as a baseline and a candidate differ in exposure."""
    return {
        "pop": zipf_lists(n_users, n_items, 10, 1.0, seed=0),
        "ease": zipf_lists(n_users, n_items, 10, 0.7, seed=1),
    }


def parts(lists: dict[str, np.ndarray], n_items: int) -> tuple:
    """The two kernel calls of one pair, each a thunk: the paired bootstrap and the Monte Carlo swap test."""
    stacked = np.stack([lists["pop"], lists["ease"]])
    band_of = np.zeros(10, dtype=np.int64)
    seeds = block_seeds(np.random.SeedSequence(0), B)
    users = np.arange(stacked.shape[1], dtype=np.int64)
    return (
        lambda: kernels.bootstrap_exposure(stacked, band_of, n_items, seeds, B),
        lambda: kernels.swap_exposure(stacked, band_of, n_items, users, seeds, B),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one catalogue size, one repeat")
    args = parser.parse_args()
    repeats = 1 if args.quick else 3
    print(f"cores: {os.cpu_count()}, numba threads: {numba.get_num_threads()}")
    started = time.perf_counter()
    warm = two_models(200, 500)
    compare_exposure(warm, n_items=500, metrics=METRICS, n_resamples=999)  # load or compile the kernels
    print(f"warm-up call (kernels loaded from numba's cache or compiled): {time.perf_counter() - started:.1f} s")

    print(f"\n10,000 users x k = 10 x B = {B:,}, coverage@10 and gini@10, 2 models (median of {repeats})")
    print(f"  {'items':>7} {'compare_exposure':>17} {'bootstrap':>10} {'swap test':>10} {'peak extra MiB':>15}")
    for n_items in (5_000,) if args.quick else (2_000, 5_000, 10_000):
        lists = two_models(10_000, n_items)
        call = lambda lists=lists, n=n_items: compare_exposure(lists, n_items=n, metrics=METRICS)  # noqa: E731
        whole = median_seconds(call, repeats)
        boot, swap = (median_seconds(part, repeats) for part in parts(lists, n_items))
        peak = peak_extra_mib(call)
        print(f"  {n_items:>7,} {whole:>15.2f} s {boot:>8.2f} s {swap:>8.2f} s {peak:>15.1f}")

    print(f"\nScaling in users (5,000 items, k = 10, B = {B:,}, the whole call)")
    for n_users in (1_000, 10_000) if args.quick else (1_000, 10_000, 50_000):
        lists = two_models(n_users, 5_000)
        seconds = median_seconds(lambda lists=lists: compare_exposure(lists, n_items=5_000, metrics=METRICS), 1)
        print(f"  {n_users:>7,} users: {seconds:8.2f} s")


if __name__ == "__main__":
    main()
