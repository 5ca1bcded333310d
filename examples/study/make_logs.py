"""Write the two interaction logs the example study (study.toml) reads beside MovieLens-100k, into this folder or
--out: a synthetic click log with timestamps, and a subsample of MovieLens-100k under other ids.

    python examples/study/make_logs.py --out my-study    # then copy study.toml there and run it
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from mlflow_recsys.data import load_interactions


def synthetic_clicks(seed: int = 0, n_users: int = 600, n_items: int = 400, per_user: int = 30) -> pd.DataFrame:
    """Implicit feedback with timestamps: each user belongs to one of 8 taste groups and clicks mostly in its
    group's block of items (70%), otherwise by popularity (Zipf), at times spread over a year."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, n_items + 1)
    popularity /= popularity.sum()
    groups = rng.integers(0, 8, n_users)
    block = n_items // 8
    rows = []
    for user, group in enumerate(groups):
        in_block = rng.random(per_user) < 0.7
        items = np.where(
            in_block, group * block + rng.integers(0, block, per_user), rng.choice(n_items, per_user, p=popularity)
        )
        for item in np.unique(items):
            rows.append((f"user-{user:04d}", f"sku-{item:04d}", int(rng.integers(1_700_000_000, 1_731_536_000))))
    return pd.DataFrame(rows, columns=["uid", "sku", "ts"]).sort_values("ts", kind="stable")


def movielens_subsample(seed: int = 1, share: float = 0.6) -> pd.DataFrame:
    """A random ``share`` of MovieLens-100k's users with all their ratings, users and movies renamed."""
    rng = np.random.default_rng(seed)
    ratings = load_interactions("movielens-100k", progress=False)
    users = ratings["user"].unique()
    kept = ratings[ratings["user"].isin(rng.choice(users, int(share * len(users)), replace=False))]
    user_ids = {u: f"viewer-{i:04d}" for i, u in enumerate(rng.permutation(kept["user"].unique()))}
    item_ids = {m: f"film-{i:04d}" for i, m in enumerate(rng.permutation(kept["item"].unique()))}
    return pd.DataFrame(
        {
            "viewer": kept["user"].map(user_ids),
            "film": kept["item"].map(item_ids),
            "stars": kept["value"],
            "when": kept["timestamp"],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent), help="folder for clicks.csv and ml-subsample.csv")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    clicks, subsample = synthetic_clicks(), movielens_subsample()
    clicks.to_csv(out / "clicks.csv", index=False)
    subsample.to_csv(out / "ml-subsample.csv", index=False)
    print(f"clicks.csv: {len(clicks):,} clicks of {clicks['uid'].nunique()} users on {clicks['sku'].nunique()} items")
    print(f"ml-subsample.csv: {len(subsample):,} ratings of {subsample['viewer'].nunique()} users")


if __name__ == "__main__":
    main()
