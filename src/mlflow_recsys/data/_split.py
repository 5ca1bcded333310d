"""Split interactions into training data and held-out evaluation rows (fold-in + targets).

Three protocols, one result type (:class:`UserSplit`):

- :func:`user_split`, strong generalisation (Liang et al., "Variational Autoencoders for Collaborative Filtering", WWW
  2018): models train on the training users only and are evaluated on unseen users, given part of their history
  (fold-in) and asked to rank the rest (targets).
- :func:`leave_one_out`: every user's last interaction is a test target and the one before it a validation target (He et
  al., "Neural Collaborative Filtering", WWW 2017; Kang & McAuley, "Self-Attentive Sequential Recommendation", ICDM
  2018).
- :func:`time_split`: one global time cut; everything after it is predicted from everything before it (Meng, McCreadie,
  Macdonald & Ounis, "Exploring Data Splitting Strategies for the Evaluation of Recommendation Models", RecSys 2020).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys import _validation as validation
from mlflow_recsys._sparse import binary_csr, canonical_csr
from mlflow_recsys.data._interactions import check_frame


@dataclass(frozen=True)
class HeldOut:
    """Evaluation rows of one held-out group (validation or test).

    ``source`` and ``target`` are binary float32 CSR matrices of shape ``(n_rows, n_items)``; row r belongs to user
    ``eval_user_ids[r]``. With D draws the rows are D stacked blocks, each holding every user of the group once in the
    same order, so ``n_rows = D * n_users``."""

    source: sp.csr_matrix
    target: sp.csr_matrix
    eval_user_ids: np.ndarray
    n_users_dropped: int


@dataclass(frozen=True)
class UserSplit:
    """Result of :func:`user_split`, :func:`leave_one_out` or :func:`time_split`.

    ``x_train`` is a binary float32 CSR matrix ``(len(train_user_ids), len(item_ids))``; ``item_ids[j]`` is the raw id
    of column j. Under ``user_split`` held-out users are absent from ``x_train``; under the two other protocols they
    appear there with their earlier interactions. ``cut_timestamps`` holds the (validation, test) cuts of
    :func:`time_split`."""

    x_train: sp.csr_matrix
    train_user_ids: np.ndarray
    item_ids: np.ndarray
    val: HeldOut
    test: HeldOut
    cut_timestamps: tuple[int, int] | None = None


@dataclass(frozen=True)
class _Log:
    """A split's input as id columns in canonical row order, and the training catalogue ``item_ids``."""

    users: np.ndarray
    items: np.ndarray
    item_ids: np.ndarray

    def matrix(self, mask: np.ndarray, row_ids: np.ndarray) -> sp.csr_matrix:
        """The rows ``mask`` picks, one matrix row per id of the sorted ``row_ids``, over the catalogue."""
        rows, cols = np.searchsorted(row_ids, self.users[mask]), np.searchsorted(self.item_ids, self.items[mask])
        return binary_csr(rows, cols, (len(row_ids), len(self.item_ids)))


#: The fewest interactions a user needs to be an evaluation row, by split mode: the splits enforce it, their
#: docstrings state it and :func:`evaluation_rule` quotes it; ``tests/test_data_split_modes.py`` checks they agree.
MIN_EVAL_INTERACTIONS = {"user_split": 2, "leave_one_out": 3, "time_split": 2}

#: What those interactions are for, by split mode.
_EVAL_ROLES = {
    "user_split": "at least one fold-in item and one target, among the training users' items",
    "leave_one_out": "one fold-in, one validation and one test target",
    "time_split": "at least one before the test cut, as fold-in, and one at or after it, as target",
}


def evaluation_rule(split_mode: str) -> str:
    """``"each evaluated user needs 3 interactions or more (one fold-in, one validation and one test target)"``."""
    return (
        f"each evaluated user needs {MIN_EVAL_INTERACTIONS[split_mode]} interactions or more "
        f"({_EVAL_ROLES[split_mode]})"
    )


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

    1. Distinct users are sorted and permuted; the first ``round_half_up(test_frac * n_users)`` become test users, the
       next ``round_half_up(val_frac * n_users)`` validation users, the rest training users.
    2. The item catalogue is the sorted set of items of the training users; items outside it are removed from held-out
       users. A held-out user is evaluated with at least 2 interactions left (one fold-in, one target); one left with
       fewer is dropped (counted in ``n_users_dropped``).
    3. For each draw (test draws first, then validation draws), each held-out user with n items gets
       ``t = clip(round_half_up(eval_holdout_frac * n), 1, n - 1)`` items chosen uniformly without replacement as
       targets; the other ``n - t`` items are the fold-in source.

    The split depends on the set of rows, not their order: rows are put in (user, item) order before any
    random draw (as in every split function). Held-out users are in sorted id order within each draw block.

    Parameters
    ----------
    frame:
        Binary interactions with columns user, item, value, timestamp and
        distinct (user, item) pairs (see :mod:`mlflow_recsys.data._preprocess`).
    seed:
        Integer >= 0.
    test_frac, val_frac:
        Fractions of users held out, ``test_frac`` in (0, 1), ``val_frac`` in [0, 1), sum < 1. Defaults 0.2, 0.1.
    eval_holdout_frac:
        Fraction of a held-out user's items used as targets, in (0, 1). Default 0.2.
    eval_draws:
        Number of independent fold-in/target draws per held-out user, >= 1. Default 1.

    Raises
    ------
    ValueError
        For bad argument values, duplicate (user, item) pairs, or no training user.
    """
    frame = _split_input(frame, seed)
    check_fractions(test_frac, val_frac, "training users")
    validation.number(eval_holdout_frac, "eval_holdout_frac", above=0, below=1)
    validation.integer(eval_draws, "eval_draws", minimum=1)
    rng = np.random.default_rng(seed)
    user_col, item_col = frame["user"].to_numpy(), frame["item"].to_numpy()
    users = np.unique(user_col)
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
    in_train = np.isin(user_col, train_users)
    log = _Log(user_col, item_col, np.unique(item_col[in_train]))
    test = _held_out(log, test_users, eval_holdout_frac, eval_draws, rng)
    val = _held_out(log, val_users, eval_holdout_frac, eval_draws, rng)
    return UserSplit(log.matrix(in_train, train_users), _id_array(train_users), _id_array(log.item_ids), val, test)


def _held_out(log: _Log, group: np.ndarray, holdout_frac: float, draws: int, rng: np.random.Generator) -> HeldOut:
    mask = np.isin(log.users, group) & np.isin(log.items, log.item_ids)
    rows = np.searchsorted(group, log.users[mask])
    cols = np.searchsorted(log.item_ids, log.items[mask])
    counts = np.bincount(rows, minlength=len(group))
    keep_user = counts >= MIN_EVAL_INTERACTIONS["user_split"]
    n_dropped = int(len(group) - keep_user.sum())
    kept_users = group[keep_user]
    # Renumber rows over the kept users and order entries by (row, col): the random keys below are then consumed in
    # an order fixed by the data alone.
    new_row = np.cumsum(keep_user) - 1
    entry_keep = keep_user[rows]
    rows = new_row[rows[entry_keep]]
    cols = cols[entry_keep]
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    counts = counts[keep_user]
    shape = (len(kept_users), len(log.item_ids))
    n_target = np.clip(np.floor(holdout_frac * counts + 0.5).astype(np.int64), 1, np.maximum(counts - 1, 1))

    src_blocks, tgt_blocks = [], []
    for _ in range(draws):
        # Sorting by (row, key) shuffles each user's items; the first n_target of each user's run are its targets.
        is_target = _rank_in_group(rows, np.lexsort((rng.random(len(rows)), rows)), counts) < n_target[rows]
        tgt_blocks.append(binary_csr(rows[is_target], cols[is_target], shape))
        src_blocks.append(binary_csr(rows[~is_target], cols[~is_target], shape))
    source, target = (canonical_csr(sp.vstack(blocks, format="csr")) for blocks in (src_blocks, tgt_blocks))
    return HeldOut(source, target, _id_array(np.tile(kept_users, draws)), n_dropped)


def leave_one_out(frame: pd.DataFrame, *, seed: int) -> UserSplit:
    """Hold out each user's last interaction for testing and the one before for validation.

    Every user with at least 3 interactions is evaluated. Their interactions are ordered by timestamp (ties, and all of
    them when the frame has no timestamp, in an order drawn from ``numpy.random.Generator(PCG64(seed))`` over the rows
    put in (user, item) order, so the row order of ``frame`` does not matter): the last is the test target, with every
    earlier one as fold-in; the second last is the validation target, with the ones before it as fold-in. ``x_train``
    holds everything except the held-out targets of evaluated users (users with fewer than 3 interactions train but are
    not evaluated). The catalogue is the items of ``x_train``; an evaluated user whose target is outside it, or whose
    fold-in is empty, is dropped from that group and counted. Each group holds one row per evaluated user, in sorted
    id order.

    ``frame`` holds binary interactions with columns user, item, value and optionally timestamp, distinct (user, item)
    pairs; ``seed`` is an integer >= 0. ValueError for a bad seed, duplicate pairs, or no interaction left for training.
    """
    frame = _split_input(frame, seed)
    minimum = MIN_EVAL_INTERACTIONS["leave_one_out"]
    rng = np.random.default_rng(seed)
    user_col = frame["user"].to_numpy()
    item_col = frame["item"].to_numpy()
    users, user_idx = np.unique(user_col, return_inverse=True)
    keys = rng.random(len(frame))
    order_keys = (keys, frame["timestamp"].to_numpy(), user_idx) if "timestamp" in frame else (keys, user_idx)
    order = np.lexsort(order_keys)
    counts = np.bincount(user_idx, minlength=len(users))
    from_end = counts[user_idx] - 1 - _rank_in_group(user_idx, order, counts)
    evaluated = counts[user_idx] >= minimum
    is_test = evaluated & (from_end == 0)
    is_val = evaluated & (from_end == 1)
    group, train = users[counts >= minimum], ~(is_test | is_val)
    return _fixed_split(user_col, item_col, train, val=(group, train, is_val), test=(group, ~is_test, is_test))


def time_split(frame: pd.DataFrame, *, test_frac: float = 0.2, val_frac: float = 0.1) -> UserSplit:
    """Cut the interaction log at two global times: train before, validate between, test after.

    With n interactions sorted by timestamp, the test cut is the timestamp of interaction
    ``n - round_half_up(test_frac * n)`` (0-based) and the validation cut the timestamp ``round_half_up(val_frac * n)``
    interactions earlier; an interaction at or after a cut belongs to the later period, so ties never straddle a cut.
    ``x_train`` holds the training period. A user with validation-period interactions is a validation row: fold-in =
    their training-period items, targets = their validation-period items. A user with test-period interactions is a test
    row: fold-in = everything they did before the test cut, targets = their test-period items. Items outside the
    training catalogue are removed; a user is evaluated with at least 2 interactions left, one before the group's period
    and one in it: users left without fold-in or without targets are dropped from that group and counted. No randomness
    is involved, and the row order of ``frame`` does not matter. The result's ``cut_timestamps`` are (validation cut,
    test cut) in Unix seconds.

    ``frame`` holds binary interactions with columns user, item, value, timestamp and distinct (user, item) pairs;
    ``test_frac`` and ``val_frac`` are the shares of the interactions (by time) in the test and validation periods,
    ``test_frac`` in (0, 1), ``val_frac`` in [0, 1), sum < 1, defaults 0.2 and 0.1. ValueError for no timestamp column,
    bad fractions, duplicate pairs, or no interaction before the validation cut."""
    frame = _split_input(frame, 0)
    if "timestamp" not in frame.columns:
        raise ValueError(
            "frame: time_split needs a timestamp column, found none "
            "(use split_mode='user_split' or 'leave_one_out' for data without times)"
        )
    check_fractions(test_frac, val_frac, "training interactions")
    stamps = frame["timestamp"].to_numpy(dtype=np.int64)
    ordered = np.sort(stamps)
    n = len(ordered)
    n_test, n_val = round_half_up(test_frac * n), round_half_up(val_frac * n)
    if n_test + n_val >= n:
        raise ValueError(
            f"frame: expected enough interactions to keep some for training, found {n} "
            f"of which {n_test} test and {n_val} validation"
        )
    test_cut = int(ordered[n - n_test]) if n_test else int(ordered[-1]) + 1
    val_cut = int(ordered[n - n_test - n_val]) if n_val else test_cut
    if val_cut <= ordered[0]:
        raise ValueError(
            f"frame: expected interactions before the validation cut {val_cut}, found none "
            "(all timestamps are equal or the fractions are too large)"
        )
    user_col = frame["user"].to_numpy()
    item_col = frame["item"].to_numpy()
    train = stamps < val_cut
    in_val = (stamps >= val_cut) & (stamps < test_cut)
    in_test = stamps >= test_cut
    val, test = (np.unique(user_col[in_val]), train, in_val), (np.unique(user_col[in_test]), ~in_test, in_test)
    split = _fixed_split(user_col, item_col, train, val=val, test=test)
    return dataclasses.replace(split, cut_timestamps=(val_cut, test_cut))


def _fixed_split(user_col, item_col, train, *, val, test) -> UserSplit:
    """A split whose held-out rows are given as (users, fold-in mask, target mask) per group."""
    if not train.any():
        raise ValueError("frame: expected some interactions left for training, found none")
    log = _Log(user_col, item_col, np.unique(item_col[train]))
    train_users = np.unique(user_col[train])
    val, test = _fixed_held_out(log, *val), _fixed_held_out(log, *test)
    return UserSplit(log.matrix(train, train_users), _id_array(train_users), _id_array(log.item_ids), val, test)


def _fixed_held_out(log: _Log, group: np.ndarray, source: np.ndarray, target: np.ndarray) -> HeldOut:
    usable = np.isin(log.items, log.item_ids) & np.isin(log.users, group)
    source, target = source & usable, target & usable
    kept = np.intersect1d(log.users[source], log.users[target])
    in_kept = np.isin(log.users, kept)
    return HeldOut(
        log.matrix(source & in_kept, kept), log.matrix(target & in_kept, kept), _id_array(kept), len(group) - len(kept)
    )


def _split_input(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The checked ``frame`` in (user, item) order, index reset, so that a split depends on the set of rows and the
    seed alone (random keys are drawn one per row, and break ties in time)."""
    check_frame(frame)
    validation.seed(seed, "seed")
    if frame.duplicated(["user", "item"]).any():
        raise ValueError("frame: expected distinct (user, item) pairs, found duplicates")
    return frame.sort_values(["user", "item"], kind="mergesort").reset_index(drop=True)


def check_fractions(test_frac: float, val_frac: float, what: str) -> None:
    """ValueError unless ``test_frac`` is in (0, 1), ``val_frac`` in [0, 1) and their sum below 1 (``what`` names
    what remains): a split without test rows has nothing to evaluate; one without validation rows is fine."""
    validation.number(test_frac, "test_frac", above=0, below=1)
    validation.number(val_frac, "val_frac", at_least=0, below=1)
    if test_frac + val_frac >= 1.0:
        raise ValueError(
            f"test_frac + val_frac: expected a sum below 1 so that {what} remain, found {test_frac} + {val_frac}"
        )


def _rank_in_group(groups: np.ndarray, order: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each entry's 0-based place within its group (``groups``, sized ``counts``) when entries are taken in ``order``,
    which lists each group's entries together, the groups in ascending order."""
    rank = np.empty(len(groups), dtype=np.int64)
    rank[order] = np.arange(len(groups)) - (np.cumsum(counts) - counts)[groups[order]]
    return rank


def _id_array(ids: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    return ids.astype(str)
