"""Time and memory of model fitting and scoring on synthetic interaction data, on the CPU or a GPU.

Prints EASE fit time and peak memory, EASE recommendation and evaluation throughput, and
ELSA seconds per epoch (the first epoch apart). The default size is 50,000 users x 10,000 items
with about 4M interactions; use ``--scale`` or ``--quick`` to shrink it.

``--device cuda`` fits and scores on the GPU and also checks there that two ELSA fits with one seed give
bit-identical weights, that the device's EASE weights equal the host's within 1e-4 relative (float64) and that
their top-100 lists agree (float32). ``--table`` runs the sizes of issue 33's table on the chosen device: ELSA at
50,000 x 10,000 (4M interactions, latent 1,024) and at 138,000 x 20,000 (10M, latent 512), then EASE fit and
scoring at 20,000 items.

    python benchmarks/bench_models.py --quick
    python benchmarks/bench_models.py --scale 0.5 --elsa-epochs 3
    python benchmarks/bench_models.py --device cuda --table
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp

from mlflow_recsys.evaluation import evaluate_recommender
from mlflow_recsys.models import EASE, EASEConfig, ELSAConfig, ELSATrainer
from mlflow_recsys.models._device import ranking_device

#: What the evaluation figure computes per user, as a training run does.
EVALUATION_METRICS = ["ndcg@100", "recall@20", "mrr@20", "map@20"]


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


def bench_ease(x: sp.csr_matrix, args: argparse.Namespace) -> None:
    l2, dtype, k, n_recommend, device = args.l2, args.dtype, args.k, args.recommend_users, args.device
    rss_before = max_rss_mib()
    tracemalloc.start()
    start = time.perf_counter()
    model = EASE(EASEConfig(l2=l2, dtype=dtype, device=device)).fit(x)
    fit_s = time.perf_counter() - start
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = max_rss_mib()
    dense_mib = x.shape[1] ** 2 * np.dtype(dtype).itemsize / 2**20
    print(f"EASE fit ({dtype}, l2={l2}, device {device}, {x.shape[1]:,} items): {fit_s:.2f} s")
    print(
        f"  peak traced allocations during fit: {traced_peak / 2**20:.0f} MiB "
        f"(one dense item x item matrix = {dense_mib:.0f} MiB)"
    )
    print(f"  process max RSS: {rss_before:.0f} MiB before fit, {rss_after:.0f} MiB after")

    rows = x[: min(n_recommend, x.shape[0])]
    on = ranking_device(device)  # the host's compiled ranking on a CPU, else the device's
    start = time.perf_counter()
    model.recommend(rows[:16], k, device=on)  # loads the compiled kernels (or the device's), once per process
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    model.recommend(rows, k, batch_size=args.score_batch_size, device=on)
    rec_s = time.perf_counter() - start
    print(f"EASE first recommend call (16 users, loading the kernels): {first_s:.2f} s")
    print(
        f"EASE recommend top-{k} for {rows.shape[0]} users at {x.shape[1]:,} items on {device}: {rec_s:.2f} s "
        f"({rows.shape[0] / rec_s:.0f} users/s)"
    )
    source, targets = hold_out(rows, 0.2, args.seed)
    start = time.perf_counter()
    result = evaluate_recommender(
        model, source=source, targets=targets, metrics=EVALUATION_METRICS, batch_size=args.score_batch_size, device=on
    )
    eval_s = time.perf_counter() - start
    print(
        f"EASE evaluation ({', '.join(EVALUATION_METRICS)}; a fifth of each user's items held out) of "
        f"{len(result.sample_ids)} users on {device}: {eval_s:.2f} s ({len(result.sample_ids) / eval_s:.0f} users/s)"
    )
    if device != "cpu":
        check_against_host(x, model, rows, args)


def hold_out(rows: sp.csr_matrix, fraction: float, seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(fold-in, targets): each stored entry a target with probability ``fraction``; users left without a target
    or without a fold-in item are dropped."""
    held = np.random.default_rng(seed).random(rows.nnz) < fraction
    source, targets = rows.copy(), rows.copy()
    source.data[held], targets.data[~held] = 0, 0
    source.eliminate_zeros()
    targets.eliminate_zeros()
    keep = (np.diff(source.indptr) > 0) & (np.diff(targets.indptr) > 0)
    return source[keep], targets[keep]


def check_against_host(x: sp.csr_matrix, model: EASE, rows: sp.csr_matrix, args: argparse.Namespace) -> None:
    """The device's fit and lists against the host's (issue 33, point 2 and 3)."""
    host = EASE(EASEConfig(l2=args.l2, dtype=args.dtype)).fit(x)
    relative = np.abs(model.weights - host.weights).max() / np.abs(host.weights).max()
    agree = np.mean(model.recommend(rows, 100, device=args.device)[0] == host.recommend(rows, 100)[0])
    same = np.array_equal(host.recommend(rows, 100)[0], host.recommend(rows, 100, device=args.device)[0])
    print(f"  {args.dtype} weights vs the host fit: max relative difference {relative:.2e}")
    print(f"  top-100 positions equal to the host fit's: {agree:.4%}; host weights ranked on the device equal: {same}")


def bench_elsa(x: sp.csr_matrix, args: argparse.Namespace, latent_dim: int) -> None:
    stamps = [time.perf_counter()]
    config = ELSAConfig(
        latent_dim=latent_dim,
        batch_size=args.batch_size,
        epochs=args.elsa_epochs,
        lr=0.01,
        seed=args.seed,
        device=args.device,
        matmul_precision="tf32" if args.tf32 else "fp32",
    )
    model = ELSATrainer(config).fit(x, on_epoch_end=lambda epoch, loss, score: stamps.append(time.perf_counter()))
    epoch_s = np.diff(stamps)
    later = epoch_s[1:] if len(epoch_s) > 1 else epoch_s
    print(
        f"ELSA fit on {args.device} ({config.matmul_precision}, latent_dim={latent_dim}, batch_size={args.batch_size}, "
        f"{x.shape[0]:,} users x {x.shape[1]:,} items, {x.nnz:,} interactions): {later.mean():.2f} s/epoch after the "
        f"first; first epoch {epoch_s[0]:.2f} s (epochs: {', '.join(f'{s:.2f}' for s in epoch_s)})"
    )
    print(f"  loss per epoch: {', '.join(f'{v:.4f}' for v in model.loss_history)}")
    print(f"  process max RSS: {max_rss_mib():.0f} MiB")
    if args.device != "cpu":
        same = np.array_equal(model.weights, ELSATrainer(config).fit(x).weights)
        print(f"  a second fit with the same seed gives bit-identical weights: {same}")


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
    parser.add_argument("--device", default="cpu", help="torch device to fit and score on: cpu (default) or cuda")
    parser.add_argument("--tf32", action="store_true", help="TF32 matrix products in ELSA training (CUDA only)")
    parser.add_argument("--score-batch-size", type=int, default=1024, help="users scored at once")
    parser.add_argument("--table", action="store_true", help="the sizes of issue 33's table (see above)")
    args = parser.parse_args(argv)
    if args.table:
        run_table(args)
        return
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
        bench_ease(x, args)
    if not args.skip_elsa:
        bench_elsa(x, args, args.latent_dim)


def run_table(args: argparse.Namespace) -> None:
    """Issue 33's sizes, one after another on ``args.device``."""
    args.batch_size, args.recommend_users = 1024, 8192
    small = synthetic_interactions(50_000, 10_000, 4_000_000, args.seed)
    bench_elsa(small, args, 1024)
    large = synthetic_interactions(138_000, 20_000, 10_000_000, args.seed)
    bench_elsa(large, args, 512)
    bench_ease(large, args)


if __name__ == "__main__":
    main()
