"""Time and memory of model fitting on synthetic interaction data.

Prints EASE fit time and peak memory, EASE recommendation throughput, and
ELSA seconds per epoch. The default EASE size is 50,000 users x 10,000 items
with about 4M interactions; use ``--scale`` or ``--quick`` to shrink it.

    python benchmarks/bench_models.py --quick
    python benchmarks/bench_models.py --scale 0.5 --elsa-epochs 3
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp

from mlflow_recsys.models import EASE, EASEConfig, ELSAConfig, ELSATrainer


def synthetic_interactions(n_users: int, n_items: int, n_interactions: int, seed: int) -> sp.csr_matrix:
    """Binary float32 CSR with long-tailed item popularity; duplicates collapse, so nnz <= n_interactions."""
    rng = np.random.default_rng(seed)
    # A Zipf-like item popularity makes the Gram matrix dense-ish, as in real data.
    weights = 1.0 / np.arange(10, n_items + 10, dtype=np.float64) ** 0.9
    items = rng.choice(n_items, size=n_interactions, p=weights / weights.sum())
    users = rng.integers(0, n_users, size=n_interactions)
    x = sp.csr_matrix((np.ones(n_interactions, dtype=np.float32), (users, items)), shape=(n_users, n_items))
    x.sum_duplicates()
    x.data[:] = 1.0
    x.sort_indices()
    return x


def max_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    scale = 1.0 if sys.platform != "darwin" else 1.0 / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1024


def bench_ease(x: sp.csr_matrix, l2: float, dtype: str, k: int, n_recommend: int) -> None:
    rss_before = max_rss_mib()
    tracemalloc.start()
    start = time.perf_counter()
    model = EASE(EASEConfig(l2=l2, dtype=dtype)).fit(x)
    fit_s = time.perf_counter() - start
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = max_rss_mib()
    dense_mib = x.shape[1] ** 2 * np.dtype(dtype).itemsize / 2**20
    print(f"EASE fit ({dtype}, l2={l2}): {fit_s:.2f} s")
    print(
        f"  peak traced allocations during fit: {traced_peak / 2**20:.0f} MiB "
        f"(one dense item x item matrix = {dense_mib:.0f} MiB)"
    )
    print(f"  process max RSS: {rss_before:.0f} MiB before fit, {rss_after:.0f} MiB after")

    rows = x[: min(n_recommend, x.shape[0])]
    start = time.perf_counter()
    model.recommend(rows[:16], k)  # loads the compiled scoring and ranking kernels, once per process
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    model.recommend(rows, k)
    rec_s = time.perf_counter() - start
    print(f"EASE first recommend call (16 users, loading the compiled kernels): {first_s:.2f} s")
    print(f"EASE recommend top-{k} for {rows.shape[0]} users: {rec_s:.2f} s ({rows.shape[0] / rec_s:.0f} users/s)")


def bench_elsa(x: sp.csr_matrix, latent_dim: int, batch_size: int, epochs: int, seed: int) -> None:
    stamps = [time.perf_counter()]
    config = ELSAConfig(latent_dim=latent_dim, batch_size=batch_size, epochs=epochs, lr=0.01, seed=seed)
    model = ELSATrainer(config).fit(x, on_epoch_end=lambda epoch, loss, score: stamps.append(time.perf_counter()))
    epoch_s = np.diff(stamps)
    print(
        f"ELSA fit (latent_dim={latent_dim}, batch_size={batch_size}, {x.shape[0]} users x {x.shape[1]} items): "
        f"{epoch_s.mean():.2f} s/epoch (epochs: {', '.join(f'{s:.2f}' for s in epoch_s)})"
    )
    print(f"  loss per epoch: {', '.join(f'{v:.4f}' for v in model.loss_history)}")
    print(f"  process max RSS: {max_rss_mib():.0f} MiB")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--interactions", type=int, default=4_000_000)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply users, items and interactions")
    parser.add_argument("--quick", action="store_true", help="same as --scale 0.1 --elsa-epochs 2")
    parser.add_argument("--l2", type=float, default=500.0)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--recommend-users", type=int, default=2000)
    parser.add_argument("--latent-dim", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--elsa-epochs", type=int, default=3)
    parser.add_argument("--skip-ease", action="store_true")
    parser.add_argument("--skip-elsa", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.scale = min(args.scale, 0.1)
        args.elsa_epochs = min(args.elsa_epochs, 2)
    if not 0 < args.scale <= 10:
        parser.error(f"--scale: expected a value in (0, 10], found {args.scale}")

    n_users = max(1, round(args.users * args.scale))
    n_items = max(1, round(args.items * args.scale))
    n_interactions = max(1, round(args.interactions * args.scale))
    start = time.perf_counter()
    x = synthetic_interactions(n_users, n_items, n_interactions, args.seed)
    print(
        f"data: {n_users} users x {n_items} items, {x.nnz} interactions "
        f"({n_interactions} drawn, density {x.nnz / (n_users * n_items):.4f}), "
        f"generated in {time.perf_counter() - start:.1f} s"
    )
    if not args.skip_ease:
        bench_ease(x, args.l2, args.dtype, args.k, args.recommend_users)
    if not args.skip_elsa:
        bench_elsa(x, args.latent_dim, args.batch_size, args.elsa_epochs, args.seed)


if __name__ == "__main__":
    main()
