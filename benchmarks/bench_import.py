"""Time and peak memory of importing recommendation lists: 100,000 users x 100 items, as Parquet and as CSV.

A synthetic split (100,000 test users, 20,000 items, 20 fold-in and 5 target items per user) and one list of
100 items per user (10,000,000 rows, a few history items among them) are written first; then the file is read
in Arrow batches, checked against the protocol and scored (the train step's nine default metrics). The figures
come from a fresh process that loads the split (npz files) and then imports the list file, so its peak RSS
(resource.getrusage) is that of the split plus the import alone; each format is measured in a process of its
own. A CSV file's ids are read as text and then matched to the split's integer ids.
Logging to an MLflow store is not included (it writes a 100,000-row per_user.parquet and a few tags).

    python benchmarks/bench_import.py
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys.interchange._recommendations import read_recommendations, score_recommendations
from mlflow_recsys.models._train_config import DEFAULT_METRICS

USERS, ITEMS, LIST, FOLD_IN, TARGETS = 100_000, 20_000, 100, 20, 5


def synthetic(seed: int = 0) -> tuple[dict, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    picks = np.argsort(rng.random((USERS, FOLD_IN + TARGETS + LIST)), axis=1)  # rows of distinct offsets
    items = (picks * 97 + np.arange(USERS)[:, None]) % ITEMS  # distinct within a row (97 and 20,000 coprime)

    def matrix(cols, width):
        r = np.repeat(np.arange(USERS), width)
        return sp.csr_matrix((np.ones(r.size, np.float32), (r, cols.ravel())), shape=(USERS, ITEMS))

    split = {
        "item_ids": np.arange(ITEMS, dtype=np.int64) * 3,
        "test_eval_user_ids": np.arange(USERS, dtype=np.int64) + 1,
        "test_source_matrix": matrix(items[:, :FOLD_IN], FOLD_IN),
        "test_target_matrix": matrix(items[:, FOLD_IN : FOLD_IN + TARGETS], TARGETS),
    }
    listed = items[:, FOLD_IN + TARGETS - 2 : FOLD_IN + TARGETS - 2 + LIST]  # starts with 2 targets
    listed[:100, 0] = items[:100, 0]  # a history item in 100 lists
    frame = pd.DataFrame(
        {
            "user": np.repeat(split["test_eval_user_ids"], LIST),
            "item": split["item_ids"][listed.ravel()],
            "rank": np.tile(np.arange(1, LIST + 1), USERS),
        }
    )
    return split, frame


def measure(folder: Path, kind: str) -> None:
    split = {key: np.load(folder / f"{key}.npy") for key in ("item_ids", "test_eval_user_ids")}
    for key in ("test_source_matrix", "test_target_matrix"):
        split[key] = sp.load_npz(folder / f"{key}.npz")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    started = time.perf_counter()
    recs = read_recommendations(folder / f"recs.{kind}")
    read = time.perf_counter() - started
    scored = score_recommendations(recs, split, metrics=list(DEFAULT_METRICS))
    total = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"import {USERS:,} users x {LIST} items ({USERS * LIST:,} rows, {kind})")
    print(f"  read {read:.1f} s, read+check+score {total:.1f} s (target <= 20 s)")
    print(f"  peak RSS {peak:.2f} GiB (with the split loaded: {base:.2f} GiB; target <= 2 GiB)")
    print(f"  counts {scored.counts}; ndcg@100 {scored.result.metrics['ndcg@100']:.4f}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        measure(Path(sys.argv[2]), sys.argv[3])
        return
    split, frame = synthetic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        frame.to_parquet(folder / "recs.parquet")
        frame.to_csv(folder / "recs.csv", index=False)
        for key, value in split.items():
            if sp.issparse(value):
                sp.save_npz(folder / f"{key}.npz", value)
            else:
                np.save(folder / f"{key}.npy", value)
        del frame, split
        for kind in ("parquet", "csv"):
            subprocess.run([sys.executable, "-W", "ignore", __file__, "--measure", tmp, kind], check=True)


if __name__ == "__main__":
    main()
