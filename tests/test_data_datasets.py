from collections import Counter

import pytest

from mlflow_recsys.data import DATASETS, build_recsys_checkpoint, load_interactions
from mlflow_recsys.data._interactions import interactions_digest
from mlflow_recsys.data._preprocess import binarise, kcore_prune


@pytest.fixture(scope="module")
def ml100k():
    return load_interactions("movielens-100k")


def test_unknown_dataset_error_lists_the_known_names(tmp_path):
    for call in (
        lambda: load_interactions("movielens-1b"),
        lambda: build_recsys_checkpoint("movielens-1b", checkpoint_path=tmp_path / "x.zip"),
    ):
        with pytest.raises(ValueError) as err:
            call()
        assert "movielens-1b" in str(err.value)
        for name in DATASETS:
            assert name in str(err.value)


def test_movielens_registry_entry_records_source_and_terms():
    spec = DATASETS["movielens-100k"]
    assert spec.url == "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
    assert len(spec.sha256) == 64 and spec.size_bytes > 0
    assert "Harper" in spec.citation and "Konstan" in spec.citation and "2015" in spec.citation
    assert spec.licence


def test_movielens_100k_has_the_published_size(ml100k):
    # GroupLens README: 100,000 ratings (1-5) from 943 users on 1682 movies.
    assert list(ml100k.columns) == ["user", "item", "value", "timestamp"]
    assert len(ml100k) == 100_000
    assert ml100k["user"].nunique() == 943 and ml100k["item"].nunique() == 1682
    assert set(ml100k["value"].unique()) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert str(ml100k["user"].dtype) == "int64" and str(ml100k["timestamp"].dtype) == "int64"


def test_movielens_core_matches_a_plain_python_pruning(ml100k):
    pos = {(u, i) for u, i, v in zip(ml100k["user"], ml100k["item"], ml100k["value"], strict=True) if v >= 4}
    while True:
        per_user = Counter(u for u, _ in pos)
        kept = {(u, i) for u, i in pos if per_user[u] >= 5}
        if kept == pos:
            break
        pos = kept
    core, _ = kcore_prune(binarise(ml100k, 4.0), min_user_interactions=5)
    assert set(zip(core["user"], core["item"], strict=True)) == pos


def test_interactions_digest_ignores_row_order_but_not_content(ml100k):
    shuffled = ml100k.sample(frac=1.0, random_state=0)
    assert interactions_digest(shuffled) == interactions_digest(ml100k)
    edited = ml100k.copy()
    edited.loc[0, "value"] = 1.0 if edited.loc[0, "value"] != 1.0 else 2.0
    assert interactions_digest(edited) != interactions_digest(ml100k)
