"""Recommendation lists from two real outside frameworks (implicit, Cornac), trained on an exported split.

Each function reads only the exported files (original user and item ids) and returns a frame of
(user, item, rank) for the test users, as a user of that framework would hand it to ``log_recommendations``.
Fold-in: both frameworks learn only from the rows they are given, so the test users' fold-in interactions are
added to the training rows (their targets never are); that is how a model without a fold-in step ranks users it
has not seen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

#: List length handed over: longer than the largest cutoff of the comparisons (100).
N = 100


def _interactions(folder: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """Training rows plus the test users' fold-in rows, and the test users (in the export's order, distinct)."""
    train = pd.read_parquet(folder / "train.parquet", columns=["user", "item"])
    fold_in = pd.read_parquet(folder / "test_fold_in.parquet", columns=["user", "item"])
    return pd.concat([train, fold_in], ignore_index=True), pd.unique(fold_in["user"])


def implicit_als(folder: Path, *, factors: int = 64, iterations: int = 15) -> pd.DataFrame:
    """implicit's ALS (Hu, Koren & Volinsky 2008), one thread, seed 0; its lists leave each user's own items out
    (``filter_already_liked_items``)."""
    from implicit.als import AlternatingLeastSquares
    from threadpoolctl import threadpool_limits

    rows, test_users = _interactions(folder)
    users, user_index = np.unique(rows["user"].to_numpy(), return_inverse=True)
    items, item_index = np.unique(rows["item"].to_numpy(), return_inverse=True)
    matrix = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (user_index, item_index)), (len(users), len(items)))
    with threadpool_limits(1, "blas"):  # implicit asks for it: its own threads and BLAS's would compete
        model = AlternatingLeastSquares(
            factors=factors, iterations=iterations, regularization=0.05, random_state=0, num_threads=1
        )
        model.fit(matrix, show_progress=False)
    wanted = np.searchsorted(users, test_users)
    ids, _ = model.recommend(wanted, matrix[wanted], N=N, filter_already_liked_items=True)
    return pd.DataFrame(
        {
            "user": np.repeat(test_users, N),
            "item": items[ids.ravel()],
            "rank": np.tile(np.arange(1, N + 1), len(wanted)),
        }
    )


def cornac_bpr(folder: Path, *, factors: int = 32, epochs: int = 60) -> pd.DataFrame:
    """Cornac's BPR (Rendle et al. 2009), one thread, seed 0, scored over every item: its lists still hold each
    user's own fold-in items, which the import takes out before scoring. Ranks follow the scores."""
    import cornac

    rows, test_users = _interactions(folder)
    triplets = list(zip(rows["user"].astype(str), rows["item"].astype(str), np.ones(len(rows)), strict=True))
    data = cornac.data.Dataset.from_uir(triplets, seed=0)
    model = cornac.models.BPR(
        k=factors, max_iter=epochs, learning_rate=0.05, lambda_reg=0.01, seed=0, verbose=False, num_threads=1
    )
    model.fit(data)
    item_ids = np.array(list(data.item_ids), dtype=rows["item"].dtype)  # cornac's item index -> id
    frames = []
    for user in test_users:
        scores = model.score(data.uid_map[str(user)])
        top = np.argsort(-scores, kind="stable")[:N]
        frames.append(pd.DataFrame({"user": user, "item": item_ids[top], "rank": np.arange(1, N + 1)}))
    return pd.concat(frames, ignore_index=True)
