"""Issue 27: what a selection of runs takes, and what a comparison reads before it computes.

Real SQLite stores under temporary folders; the runs are copies of real training runs on MovieLens-100k.
"""

import uuid

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from conftest import sqlite_store
from mlflow_recsys.tracking import RunSelectionError
from mlflow_recsys.tracking.limits import duplicates
from mlflow_recsys.tracking.runs import select_runs


class _CountedId(str):
    """A run id that counts the hashes and comparisons made of it (in a class-wide counter)."""

    operations = 0

    def __hash__(self):
        type(self).operations += 1
        return str.__hash__(self)

    def __eq__(self, other):
        type(self).operations += 1
        return str.__eq__(self, other)


def _ids_with_one_repeat(n: int) -> list[str]:
    ids = [uuid.uuid4().hex for _ in range(n - 1)]
    return ids[: n // 2] + [ids[7]] + ids[n // 2 :]


def test_duplicate_check_of_a_selection_is_linear():
    # 40,000 ids with one repeat: a list.count per id made 1.6e9 comparisons (15 s); one count of each id makes
    # a hash per id, and the operations grow with n, not n^2.
    counts = {}
    for n in (20_000, 40_000):
        ids = [_CountedId(i) for i in _ids_with_one_repeat(n)]
        _CountedId.operations = 0
        assert duplicates(ids) == [ids[7]]
        counts[n] = _CountedId.operations
    assert counts[40_000] <= 2 * 40_000
    assert counts[40_000] / counts[20_000] == pytest.approx(2, rel=0.01)


def test_duplicate_check_of_a_selection_names_the_repeated_id_before_reading_any_run(tmp_path):
    ids = _ids_with_one_repeat(40_000)
    with sqlite_store(tmp_path):
        # Not one of these runs exists: the repeat is found before any is fetched (else "was not found").
        with pytest.raises(
            RunSelectionError, match=rf"^runs: expected distinct run ids, found {ids[7]} more than once"
        ):
            select_runs(run_ids=ids, client=MlflowClient())
        assert mlflow.search_runs(search_all_experiments=True).empty


def test_duplicate_check_lists_at_most_twenty_repeated_ids(tmp_path):
    ids = [f"run{i}" for i in range(30)] * 2
    assert duplicates(ids) == [f"run{i}" for i in range(30)]  # each once, in first-seen order
    with sqlite_store(tmp_path), pytest.raises(RunSelectionError, match=r"found run0, .*, run19 and 10 others more"):
        select_runs(run_ids=ids, client=MlflowClient())
