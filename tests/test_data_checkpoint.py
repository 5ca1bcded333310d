import hashlib
import json
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.data import (
    build_recsys_checkpoint,
    load_interactions,
    load_recsys_split,
    read_checkpoint,
)
from mlflow_recsys.data._preprocess import binarise, kcore_prune
from mlflow_recsys.data._split import user_split

MATRICES = ["x_train", "test_source_matrix", "test_target_matrix", "val_source_matrix", "val_target_matrix"]
IDS = ["train_user_ids", "item_ids", "test_eval_user_ids", "val_eval_user_ids"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "ml100k-42.zip"
    return build_recsys_checkpoint("movielens-100k", checkpoint_path=path, seed=42)


@pytest.fixture(scope="module")
def loaded(built):
    with read_checkpoint(built) as root:
        return load_recsys_split(root)


def rewrite(src, dst, edit):
    """Copy a checkpoint zip, passing each member's bytes through edit(name, data)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, edit(name, zin.read(name)))


def test_same_seed_builds_a_byte_identical_zip(built, tmp_path):
    again = build_recsys_checkpoint("movielens-100k", checkpoint_path=tmp_path / "again.zip", seed=42)
    assert again.read_bytes() == built.read_bytes()


def test_other_seed_gives_other_split(built, loaded, tmp_path):
    other = build_recsys_checkpoint("movielens-100k", checkpoint_path=tmp_path / "s7.zip", seed=7)
    split7 = load_recsys_split(other)
    assert split7["split_digest"] != loaded["split_digest"]
    assert not np.array_equal(split7["test_eval_user_ids"], loaded["test_eval_user_ids"])


def test_round_trip_returns_the_split_computed_in_memory(loaded):
    frame, _ = kcore_prune(binarise(load_interactions("movielens-100k"), 4.0), 5)
    s = user_split(frame, seed=42)
    expected = {
        "x_train": s.x_train,
        "test_source_matrix": s.test.source,
        "test_target_matrix": s.test.target,
        "val_source_matrix": s.val.source,
        "val_target_matrix": s.val.target,
        "train_user_ids": s.train_user_ids,
        "item_ids": s.item_ids,
        "test_eval_user_ids": s.test.eval_user_ids,
        "val_eval_user_ids": s.val.eval_user_ids,
    }
    for key in MATRICES:
        m = loaded[key]
        assert isinstance(m, sp.csr_matrix) and m.dtype == np.float32 and m.has_sorted_indices
        assert m.shape == expected[key].shape and (m != expected[key]).nnz == 0
    for key in IDS:
        assert loaded[key].dtype == np.int64
        assert np.array_equal(loaded[key], expected[key])


def test_load_accepts_the_zip_path_directly(built, loaded):
    direct = load_recsys_split(built)
    assert direct["split_digest"] == loaded["split_digest"]


def test_manifest_records_parameters_and_counts_consistent_with_arrays(loaded):
    m = loaded["manifest"]
    assert m["format"] == "mlflow-recsys-checkpoint" and m["format_version"] == 1
    assert m["dataset"]["name"] == "movielens-100k" and len(m["dataset"]["interactions_sha256"]) == 64
    assert m["parameters"] == {
        "split_mode": "user_split",
        "seed": 42,
        "eval_draws": 1,
        "eval_holdout_frac": 0.2,
        "test_frac": 0.2,
        "val_frac": 0.1,
        "min_rating": 4.0,
        "min_user_interactions": 5,
        "min_item_interactions": 1,
    }
    c = m["counts"]
    assert c["n_raw_interactions"] == 100_000
    assert c["n_train_users"] == loaded["x_train"].shape[0] == len(loaded["train_user_ids"])
    assert c["n_items"] == loaded["x_train"].shape[1] == len(loaded["item_ids"])
    assert c["n_test_rows"] == len(loaded["test_eval_user_ids"])
    assert c["n_val_rows"] == len(loaded["val_eval_user_ids"])
    held = c["n_test_users"] + c["n_val_users"] + c["n_test_users_dropped"] + c["n_val_users_dropped"]
    assert c["n_train_users"] + held == c["n_users"]
    assert c["n_test_users"] + c["n_test_users_dropped"] == round(0.2 * c["n_users"])
    assert m["split_digest"] == loaded["split_digest"]


def test_movielens_held_out_rows_use_only_training_items(loaded):
    # Every catalogue column has at least one training interaction.
    assert (np.asarray(loaded["x_train"].sum(axis=0)).ravel() > 0).all()
    for part in ("test", "val"):
        src, tgt = loaded[f"{part}_source_matrix"], loaded[f"{part}_target_matrix"]
        assert (np.diff(tgt.indptr) >= 1).all() and src.multiply(tgt).nnz == 0
    users = set(loaded["train_user_ids"])
    assert not users & set(loaded["test_eval_user_ids"]) and not users & set(loaded["val_eval_user_ids"])


def test_sparse_members_are_readable_by_scipy_load_npz(built, tmp_path):
    with zipfile.ZipFile(built) as zf:
        zf.extract("x_train.npz", tmp_path)
    m = sp.load_npz(tmp_path / "x_train.npz")
    assert m.format == "csr" and m.dtype == np.float32


def test_read_checkpoint_removes_its_folder_on_exit(built):
    with read_checkpoint(built) as root:
        assert (root / "manifest.json").is_file()
    assert not root.exists()


def test_missing_checkpoint_path_raises_file_not_found_naming_it(tmp_path):
    missing = tmp_path / "nope.zip"
    with pytest.raises(FileNotFoundError, match="nope.zip"):
        with read_checkpoint(missing):
            pass
    with pytest.raises(FileNotFoundError, match="nope.zip"):
        load_recsys_split(missing)


def test_file_that_is_not_a_zip_is_rejected(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="not a zip"):
        with read_checkpoint(bad):
            pass


def test_zip_without_manifest_is_rejected(tmp_path):
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("data.csv", "a,b\n")
    with pytest.raises(ValueError, match="manifest"):
        load_recsys_split(other)


def test_unknown_format_version_is_rejected(built, tmp_path):
    def bump(name, data):
        if name != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["format_version"] = 2
        return json.dumps(manifest).encode()

    future = tmp_path / "future.zip"
    rewrite(built, future, bump)
    with pytest.raises(ValueError, match="format_version 1, found 2"):
        load_recsys_split(future)


def test_edited_array_fails_the_split_digest_check(built, tmp_path):
    # The manifest's member size and SHA-256 are edited too, so only the split digest can catch it.
    with zipfile.ZipFile(built) as zf:
        replacement = zf.read("test_eval_user_ids.npy")

    def swap(name, data):
        if name == "manifest.json":
            manifest = json.loads(data)
            manifest["sizes"]["val_eval_user_ids.npy"] = len(replacement)
            manifest["files"]["val_eval_user_ids.npy"] = hashlib.sha256(replacement).hexdigest()
            return json.dumps(manifest).encode()
        return replacement if name == "val_eval_user_ids.npy" else data

    edited = tmp_path / "edited.zip"
    rewrite(built, edited, swap)
    with pytest.raises(ValueError, match="split_digest"):
        load_recsys_split(edited)


def test_eval_draws_repeat_each_held_out_user(tmp_path):
    path = build_recsys_checkpoint("movielens-100k", checkpoint_path=tmp_path / "d3.zip", eval_draws=3)
    d = load_recsys_split(path)
    ids, counts = np.unique(d["test_eval_user_ids"], return_counts=True)
    assert (counts == 3).all()
    assert d["manifest"]["counts"]["n_test_rows"] == 3 * len(ids) == d["test_source_matrix"].shape[0]


def test_unknown_split_mode_is_named(tmp_path):
    with pytest.raises(ValueError, match="split_mode"):
        build_recsys_checkpoint("movielens-100k", checkpoint_path=tmp_path / "x.zip", split_mode="time")


def test_build_leaves_only_the_checkpoint_in_its_folder(tmp_path):
    out = tmp_path / "deep" / "ck.zip"
    build_recsys_checkpoint("movielens-100k", checkpoint_path=out, seed=1)
    assert [p.name for p in out.parent.iterdir()] == ["ck.zip"]


@pytest.mark.parametrize("member", ["../escape.npy", "/etc/escape.npy", "a/../../escape.npy"])
def test_zip_slip_members_are_refused(built, tmp_path, member):
    evil = tmp_path / "evil.zip"
    rewrite(built, evil, lambda name, data: data)
    with zipfile.ZipFile(evil, "a") as zf:
        zf.writestr(member, b"x")
    with pytest.raises(ValueError, match="points outside the archive.s folder"):
        with read_checkpoint(evil):
            pass
    assert not (tmp_path.parent / "escape.npy").exists()


def test_truncated_zip_is_refused_naming_the_file(built, tmp_path):
    data = built.read_bytes()
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(data[: len(data) // 2] + data[-200:])  # keeps an end record, loses members
    with pytest.raises(ValueError, match="truncated.zip"):
        with read_checkpoint(truncated) as root:
            load_recsys_split(root)


def test_oversized_archive_is_refused(built, tmp_path, monkeypatch):
    from mlflow_recsys.data import _safezip as safezip

    monkeypatch.setattr(safezip, "MAX_UNCOMPRESSED_BYTES", 1000)
    with pytest.raises(ValueError, match="at most 1,000 bytes uncompressed"):
        with read_checkpoint(built):
            pass
