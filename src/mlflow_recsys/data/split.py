"""Split users into train / validation / test and hide part of each held-out history.

This is the strong-generalisation protocol of Liang et al., "Variational
Autoencoders for Collaborative Filtering" (WWW 2018): models are trained on
the training users only and evaluated on unseen users, given part of their
history (fold-in) and asked to rank the rest (targets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys.data.preprocess import _check_frame


@dataclass(frozen=True)
class HeldOut:
    """Evaluation rows of one held-out group (validation or test).

    ``source`` and ``target`` are binary float32 CSR matrices of shape
    ``(n_rows, n_items)``; row r belongs to user ``user_ids[r]``. With D draws
    the rows are D stacked blocks, each holding every user of the group once
    in the same order, so ``n_rows = D * n_users``.
    """

    source: sp.csr_matrix
    target: sp.csr_matrix
    user_ids: np.ndarray
    n_users_dropped: int


@dataclass(frozen=True)
class UserSplit:
    """Result of :func:`user_split`.

    ``x_train`` is a binary float32 CSR matrix ``(len(train_user_ids),
    len(item_ids))``; ``item_ids[j]`` is the raw id of column j.
    """

    x_train: sp.csr_matrix
    train_user_ids: np.ndarray
    item_ids: np.ndarray
    val: HeldOut
    test: HeldOut


def round_half_up(x: float) -> int:
    """Nearest integer, halves rounded up (Python's ``round`` rounds halves to even)."""
    return int(math.floor(x + 0.5))


def user_split(
    frame: pd.DataFrame,
    *,
    seed: int,
    test_frac: float = 0.2,
    val_frac: float = 0.1,
    eval_holdout_frac: float = 0.2,
    eval_draws: int = 1,
) -> UserSplit:
    """Split users at random and draw fold-in/target items for held-out users.

    Steps, all driven by one ``numpy.random.Generator(PCG64(seed))``:

    1. Distinct users are sorted and permuted; the first
       ``round_half_up(test_frac * n_users)`` become test users, the next
       ``round_half_up(val_frac * n_users)`` validation users, the rest training users.
    2. The item catalogue is the sorted set of items of the training users;
       items outside it are removed from held-out users, and held-out users
       left with fewer than 2 items are dropped (counted in ``n_users_dropped``).
    3. For each draw (test draws first, then validation draws), each held-out
       user with n items gets ``t = clip(round_half_up(eval_holdout_frac * n), 1,
       n - 1)`` items chosen uniformly without replacement as targets; the other
       ``n - t`` items are the fold-in source.

    Parameters
    ----------
    frame:
        Binary interactions with columns user, item, value, timestamp and
        distinct (user, item) pairs (see :mod:`mlflow_recsys.data.preprocess`).
    seed:
        Integer >= 0.
    test_frac, val_frac:
        Fractions of users held out, each in [0, 1) with sum < 1. Defaults 0.2, 0.1.
    eval_holdout_frac:
        Fraction of a held-out user's items used as targets, in (0, 1). Default 0.2.
    eval_draws:
        Number of independent fold-in/target draws per held-out user, >= 1.

    Returns
    -------
    UserSplit
        Held-out users are in sorted id order within each draw block.

    Raises
    ------
    ValueError
        Bad argument values, duplicate (user, item) pairs, or no training user.
    """
    _check_frame(frame)
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, found {seed!r}")
    for name, value in (("test_frac", test_frac), ("val_frac", val_frac)):
        if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name}: expected a number in [0, 1), found {value!r}")
    if test_frac + val_frac >= 1.0:
        raise ValueError(
            f"test_frac + val_frac: expected a sum below 1 so that training users remain, "
            f"found {test_frac} + {val_frac}"
        )
    if (
        isinstance(eval_holdout_frac, bool)
        or not isinstance(eval_holdout_frac, Real)
        or not 0.0 < eval_holdout_frac < 1.0
    ):
        raise ValueError(
            f"eval_holdout_frac: expected a number in (0, 1), found {eval_holdout_frac!r}"
        )
    if isinstance(eval_draws, bool) or not isinstance(eval_draws, Integral) or eval_draws < 1:
        raise ValueError(f"eval_draws: expected an integer >= 1, found {eval_draws!r}")
    if frame.duplicated(["user", "item"]).any():
        raise ValueError("frame: expected distinct (user, item) pairs, found duplicates")

    rng = np.random.default_rng(seed)
    users = np.unique(frame["user"].to_numpy())
    n_users = len(users)
    n_test = round_half_up(test_frac * n_users)
    n_val = round_half_up(val_frac * n_users)
    if n_test + n_val >= n_users:
        raise ValueError(
            f"frame: expected enough users to keep some for training, found {n_users} "
            f"users of which {n_test} test and {n_val} validation"
        )
    order = rng.permutation(n_users)
    test_users = np.sort(users[order[:n_test]])
    val_users = np.sort(users[order[n_test : n_test + n_val]])
    train_users = np.sort(users[order[n_test + n_val :]])

    user_col = frame["user"].to_numpy()
    item_col = frame["item"].to_numpy()
    in_train = np.isin(user_col, train_users)
    item_ids = np.unique(item_col[in_train])
    x_train = _matrix(
        np.searchsorted(train_users, user_col[in_train]),
        np.searchsorted(item_ids, item_col[in_train]),
        (len(train_users), len(item_ids)),
    )

    test = _held_out(user_col, item_col, test_users, item_ids, eval_holdout_frac, eval_draws, rng)
    val = _held_out(user_col, item_col, val_users, item_ids, eval_holdout_frac, eval_draws, rng)
    return UserSplit(
        x_train=x_train,
        train_user_ids=_id_array(train_users),
        item_ids=_id_array(item_ids),
        val=val,
        test=test,
    )


def _held_out(
    user_col: np.ndarray,
    item_col: np.ndarray,
    group: np.ndarray,
    item_ids: np.ndarray,
    holdout_frac: float,
    draws: int,
    rng: np.random.Generator,
) -> HeldOut:
    n_items = len(item_ids)
    mask = np.isin(user_col, group) & np.isin(item_col, item_ids)
    rows = np.searchsorted(group, user_col[mask])
    cols = np.searchsorted(item_ids, item_col[mask])
    counts = np.bincount(rows, minlength=len(group))
    keep_user = counts >= 2
    n_dropped = int(len(group) - keep_user.sum())
    kept_users = group[keep_user]
    # Renumber rows over the kept users and order entries by (row, col) so the
    # random keys below are consumed in an order fixed by the data alone.
    new_row = np.cumsum(keep_user) - 1
    entry_keep = keep_user[rows]
    rows = new_row[rows[entry_keep]]
    cols = cols[entry_keep]
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    counts = counts[keep_user]
    n_kept = len(kept_users)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if n_kept else np.zeros(0, np.int64)
    n_target = np.clip(
        np.floor(holdout_frac * counts + 0.5).astype(np.int64), 1, np.maximum(counts - 1, 1)
    )

    src_blocks, tgt_blocks = [], []
    for _ in range(draws):
        keys = rng.random(len(rows))
        # Sorting by (row, key) shuffles the items within each user; the first
        # n_target positions of each user's run are its targets.
        perm = np.lexsort((keys, rows))
        rank = np.empty(len(rows), dtype=np.int64)
        rank[perm] = np.arange(len(rows)) - starts[rows[perm]]
        is_target = rank < n_target[rows]
        shape = (n_kept, n_items)
        tgt_blocks.append(_matrix(rows[is_target], cols[is_target], shape))
        src_blocks.append(_matrix(rows[~is_target], cols[~is_target], shape))
    return HeldOut(
        source=_csr(sp.vstack(src_blocks, format="csr")),
        target=_csr(sp.vstack(tgt_blocks, format="csr")),
        user_ids=_id_array(np.tile(kept_users, draws)),
        n_users_dropped=n_dropped,
    )


def _matrix(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    data = np.ones(len(rows), dtype=np.float32)
    return _csr(sp.csr_matrix((data, (rows, cols)), shape=shape, dtype=np.float32))


def _csr(m: sp.spmatrix) -> sp.csr_matrix:
    m = sp.csr_matrix(m, dtype=np.float32)
    m.sum_duplicates()
    m.sort_indices()
    return m


def _id_array(ids: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    return ids.astype(str)
