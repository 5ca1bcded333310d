"""Time and peak memory of building split checkpoints.

1. MovieLens-100k (the real data, from the recbole wheel), user split.
2. A synthetic GoodBooks-10k stand-in: 53,424 users x 10,000 books, about 6M
   ratings (1-5 stars, GoodBooks' layout: ratings.csv with a header and no
   timestamps, zipped). The archive is written first; then a fresh process
   reads it through the GoodBooks reader and builds the user-split checkpoint,
   so the peak RSS printed is that of loading + building alone.

    python benchmarks/bench_checkpoint.py            # both
    python benchmarks/bench_checkpoint.py --scale 0.1
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from mlflow_recsys.data import build_recsys_checkpoint, load_recsys_split

USERS, ITEMS, RATINGS = 53_424, 10_000, 5_976_479


def goodbooks_like_zip(path: Path, scale: float, seed: int = 0) -> int:
    """Write ratings.csv (user_id,book_id,rating) into a zip at ``path``; return the number of rows."""
    rng = np.random.default_rng(seed)
    n = int(RATINGS * scale)
    n_users, n_items = max(int(USERS * scale), 100), ITEMS
    weights = 1.0 / np.arange(10, n_items + 10, dtype=np.float64) ** 0.8
    frame = pd.DataFrame(
        {
            "user_id": rng.integers(1, n_users + 1, n),
            "book_id": rng.choice(np.arange(1, n_items + 1), size=n, p=weights / weights.sum()),
            # Star shares close to GoodBooks' own (mean rating about 3.9).
            "rating": rng.choice([1, 2, 3, 4, 5], size=n, p=[0.02, 0.06, 0.23, 0.36, 0.33]),
        }
    )
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("goodbooks-10k/ratings.csv", buf.getvalue())
    return n


def child(archive: str, out: str) -> None:
    from mlflow_recsys.data._datasets import DATASETS, read_archive

    started = time.perf_counter()
    raw = read_archive(archive, DATASETS["goodbooks"].ratings)
    loaded = time.perf_counter()
    path = build_recsys_checkpoint(raw, checkpoint_path=out, seed=42)
    done = time.perf_counter()
    counts = load_recsys_split(path)["manifest"]["counts"]
    print(
        json.dumps(
            {
                "read_s": loaded - started,
                "build_s": done - loaded,
                "total_s": done - started,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "zip_mib": Path(out).stat().st_size / 2**20,
                "counts": counts,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="share of GoodBooks' size to generate")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    with tempfile.TemporaryDirectory() as tmp:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            build_recsys_checkpoint("movielens-100k", checkpoint_path=Path(tmp) / "ml100k.zip", seed=42, overwrite=True)
            times.append(time.perf_counter() - started)
        print(f"movielens-100k user split: {np.median(times):.2f} s (median of 3)")

        archive = Path(tmp) / "goodbooks-like.zip"
        started = time.perf_counter()
        n = goodbooks_like_zip(archive, args.scale)
        print(
            f"synthetic GoodBooks archive: {n:,} ratings, {archive.stat().st_size / 2**20:.0f} MiB, "
            f"written in {time.perf_counter() - started:.1f} s (not part of the figures below)"
        )
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(archive), str(Path(tmp) / "gb.zip")],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        c = r["counts"]
        print(
            f"goodbooks-sized user split: read {r['read_s']:.1f} s + build {r['build_s']:.1f} s = "
            f"{r['total_s']:.1f} s; peak RSS {r['peak_rss_mib']:.0f} MiB; checkpoint {r['zip_mib']:.0f} MiB"
        )
        print(
            f"  {c['n_raw_interactions']:,} ratings -> {c['n_positive_interactions']:,} positives -> "
            f"{c['n_users']:,} users x {c['n_items']:,} items; {c['n_train_users']:,} train / "
            f"{c['n_val_users']:,} val / {c['n_test_users']:,} test users"
        )


if __name__ == "__main__":
    main()
