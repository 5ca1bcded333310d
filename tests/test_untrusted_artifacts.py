"""Checkpoints, saved models and per-user artifacts are read as untrusted input.

A checkpoint zip yields only the members its manifest lists, each bounded by its declared size; a saved model
loads only with a digest for every array; per-user values must be numbers inside their metric's range.
"""

import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from mlflow_recsys.data import _checkpoint as checkpoint
from mlflow_recsys.data import build_recsys_checkpoint, load_recsys_split, read_checkpoint
from mlflow_recsys.evaluation import EvaluationResult, evaluate_recommender
from mlflow_recsys.metrics import METRIC_CLASSES, ItemMetric, value_range
from mlflow_recsys.models import EASE, ELSA, MODELS, EASEConfig, ELSAConfig, Popularity
from mlflow_recsys.tracking._artifacts import (
    ArtifactError,
    _metric_values,
    per_user_byte_limit,
    read_evaluation_artifacts,
    write_evaluation_artifacts,
)

BIG = 200 * 2**20  # 200 MiB of zeros deflates to about 200 KiB


def interactions(seed=0, n_users=80, n_items=30):
    rng = np.random.default_rng(seed)
    users, items = np.nonzero(rng.random((n_users, n_items)) < 0.3)
    return pd.DataFrame({"user": users, "item": items, "value": 1.0})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "small.zip"
    return build_recsys_checkpoint(interactions(), checkpoint_path=path, min_rating=None)


@pytest.fixture(scope="module")
def manifest(built):
    with zipfile.ZipFile(built) as zf:
        return json.loads(zf.read("manifest.json"))


def rewrite(src, dst, *, edit=lambda name, data: data, manifest_edit=None, extra=()):
    """Copy a checkpoint, passing members through edit(name, data) and the manifest through manifest_edit."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "manifest.json" and manifest_edit is not None:
                document = json.loads(data)
                manifest_edit(document)
                data = json.dumps(document).encode()
            if name != "manifest.json":
                data = edit(name, data)
            if data is not None:
                zout.writestr(name, data)
        for name, size in extra:
            write_zeros(zout, name, size)
    return dst


def write_zeros(zf, name, size):
    """Add a member of ``size`` zero bytes, streamed so the test never holds it in memory."""
    chunk = bytes(1 << 20)
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with zf.open(info, "w", force_zip64=True) as out:
        for start in range(0, size, len(chunk)):
            out.write(chunk[: min(len(chunk), size - start)])


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """Record the temporary folders read_checkpoint makes and the bytes of each file in them at cleanup,
    and the bytes decompressed from each zip member."""
    record = {"folders": [], "read": {}}
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))

    class Measured(tempfile.TemporaryDirectory):
        def __exit__(self, *exc):
            files = {p.name: p.stat().st_size for p in Path(self.name).rglob("*") if p.is_file()}
            record["folders"].append(files)
            return super().__exit__(*exc)

    original_read = zipfile.ZipExtFile.read

    def counting_read(self, n=-1):
        data = original_read(self, n)
        record["read"][self.name] = record["read"].get(self.name, 0) + len(data)
        return data

    monkeypatch.setattr(checkpoint.tempfile, "TemporaryDirectory", Measured)
    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting_read)
    record["root"] = root
    return record


# ---- checkpoints ---------------------------------------------------------------------------------------------


def test_manifest_declares_the_size_and_digest_of_every_member(built, manifest):
    with zipfile.ZipFile(built) as zf:
        members = {i.filename: zf.read(i.filename) for i in zf.infolist() if i.filename != "manifest.json"}
    assert manifest["sizes"] == {name: len(data) for name, data in members.items()}
    assert manifest["files"] == {name: hashlib.sha256(data).hexdigest() for name, data in members.items()}
    assert len(members) == 9


def test_happy_path_extracts_exactly_the_listed_members_at_their_sizes(built, manifest, measured):
    with read_checkpoint(built) as root:
        extracted = {p.name: p.stat().st_size for p in root.iterdir()}
    assert extracted == {**manifest["sizes"], "manifest.json": extracted["manifest.json"]}
    assert measured["folders"] == [extracted]
    assert list(measured["root"].iterdir()) == []


def test_unlisted_large_member_is_refused_before_anything_is_written(built, tmp_path, measured):
    bomb = rewrite(built, tmp_path / "bomb.zip", extra=[("extra.bin", BIG)])
    assert bomb.stat().st_size < 2 * 2**20  # a small file that would unpack to 200 MiB
    with zipfile.ZipFile(bomb) as zf:
        assert zf.getinfo("extra.bin").file_size == BIG
    measured["read"].clear()
    with pytest.raises(ValueError, match=r"bomb.zip: refusing zip member 'extra.bin'"):
        with read_checkpoint(bomb):
            pass
    assert measured["folders"] == []  # no temporary folder was even made
    assert measured["read"].get("extra.bin", 0) == 0
    assert list(measured["root"].iterdir()) == []


def test_unlisted_member_fails_a_training_load_too(built, tmp_path):
    extra = rewrite(built, tmp_path / "extra.zip", extra=[("notes.txt", 10)])
    with pytest.raises(ValueError, match="'notes.txt'"):
        load_recsys_split(extra)


def test_listed_member_larger_than_declared_stops_at_the_declared_size(built, manifest, tmp_path, measured):
    declared = manifest["sizes"]["x_train.npz"]
    swollen = rewrite(
        built,
        tmp_path / "swollen.zip",
        edit=lambda n, d: None if n == "x_train.npz" else d,
        extra=[("x_train.npz", BIG)],
    )
    measured["read"].clear()  # count only what read_checkpoint decompresses
    with pytest.raises(
        ValueError,
        match=rf"'x_train.npz': expected at most {declared:,} bytes .*, found at least",
    ):
        with read_checkpoint(swollen):
            pass
    (folder,) = measured["folders"]
    assert folder.get("x_train.npz", 0) <= declared
    assert measured["read"]["x_train.npz"] <= declared + 1  # decompression stopped right after the bound
    assert list(measured["root"].iterdir()) == []


def test_listed_member_shorter_than_declared_is_refused(built, manifest, tmp_path):
    short = rewrite(built, tmp_path / "short.zip", edit=lambda n, d: d[:-7] if n == "item_ids.npy" else d)
    size = manifest["sizes"]["item_ids.npy"]
    with pytest.raises(ValueError, match=rf"'item_ids.npy' expected {size:,} bytes .*, found {size - 7:,}"):
        load_recsys_split(short)


def test_member_with_the_declared_size_but_other_bytes_fails_its_digest(built, tmp_path):
    def flip(name, data):
        return data[:-1] + bytes([data[-1] ^ 0xFF]) if name == "item_ids.npy" else data

    edited = rewrite(built, tmp_path / "edited.zip", edit=flip)
    with pytest.raises(ValueError, match="member 'item_ids.npy' expected SHA-256 .* found"):
        load_recsys_split(edited)


def test_duplicate_member_is_refused(built, tmp_path):
    with zipfile.ZipFile(built) as zf:
        ids = zf.read("item_ids.npy")
    twice = rewrite(built, tmp_path / "twice.zip")
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(twice, "a") as zf:
        zf.writestr("item_ids.npy", ids)
    with pytest.raises(ValueError, match="'item_ids.npy': it appears more than once"):
        load_recsys_split(twice)


def test_missing_listed_member_is_refused(built, tmp_path):
    missing = rewrite(built, tmp_path / "missing.zip", edit=lambda n, d: None if n == "val_eval_user_ids.npy" else d)
    with pytest.raises(ValueError, match=r"expected the manifest's files \['val_eval_user_ids.npy'\] in the zip"):
        load_recsys_split(missing)


def test_checkpoint_without_declared_sizes_is_refused(built, tmp_path):
    unsized = rewrite(built, tmp_path / "unsized.zip", manifest_edit=lambda m: m.pop("sizes"))
    with pytest.raises(ValueError, match=r"expected the manifest's 'sizes' to list \[.*\], found None"):
        load_recsys_split(unsized)


def test_manifest_listing_a_foreign_file_is_refused(built, tmp_path):
    def add(m):
        m["sizes"]["run.sh"] = 10
        m["files"]["run.sh"] = "0" * 64

    foreign = rewrite(built, tmp_path / "foreign.zip", manifest_edit=add, extra=[("run.sh", 10)])
    with pytest.raises(ValueError, match=r"expected the manifest's 'files' to list \[.*\], found \[.*'run.sh'"):
        load_recsys_split(foreign)


def test_oversized_manifest_is_refused_without_reading_it_whole(built, tmp_path, measured):
    big = rewrite(
        built, tmp_path / "big.zip", edit=lambda n, d: d, manifest_edit=lambda m: m.update(padding=" " * (2 * 2**20))
    )
    measured["read"].clear()
    with pytest.raises(ValueError, match=r"'manifest.json': expected at most 1,048,576 bytes \(the manifest size"):
        with read_checkpoint(big):
            pass
    assert measured["read"]["manifest.json"] <= 2**20 + 1
    assert measured["folders"] == []


def test_same_seed_still_gives_a_byte_identical_checkpoint(built, tmp_path):
    again = build_recsys_checkpoint(interactions(), checkpoint_path=tmp_path / "again.zip", min_rating=None)
    assert again.read_bytes() == built.read_bytes()


# ---- saved models --------------------------------------------------------------------------------------------

FACTORIES = {
    "EASE": lambda: EASE(EASEConfig(l2=2.0)),
    "ELSA": lambda: ELSA(ELSAConfig(latent_dim=3, batch_size=16, epochs=1, seed=0)),
    "Popularity": Popularity,
}


@pytest.fixture(params=sorted(FACTORIES))
def saved(request, tmp_path):
    rng = np.random.default_rng(1)
    x = sp.csr_matrix((rng.random((30, 10)) < 0.3).astype(np.float32))
    folder = FACTORIES[request.param]().fit(x).save(tmp_path / "model")
    return MODELS[request.param].model_class, folder


def edit_config(folder, edit):
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))


def test_model_without_the_digest_field_is_refused(saved):
    cls, folder = saved
    (name,) = json.loads((folder / "config.json").read_text())["arrays"]
    edit_config(folder, lambda c: c.pop("sha256"))
    with pytest.raises(ValueError, match=rf"expected a sha256 digest for every array, found none for \['{name}'\]"):
        cls.load(folder)


def test_model_missing_one_array_digest_is_refused(saved):
    cls, folder = saved
    (name,) = json.loads((folder / "config.json").read_text())["arrays"]
    edit_config(folder, lambda c: c["sha256"].pop(name))
    with pytest.raises(ValueError, match=rf"expected a sha256 digest for every array, found none for \['{name}'\]"):
        cls.load(folder)


def test_tampered_weights_under_an_untouched_digest_are_refused(saved):
    cls, folder = saved
    (weights,) = folder.glob("*.npy")
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"weights file {weights.name} does not match the sha256"):
        cls.load(folder)


def test_array_names_cannot_point_outside_the_model_folder(saved, tmp_path):
    cls, folder = saved
    edit_config(folder, lambda c: c.update(arrays=["../outside"], sha256={"../outside": "0" * 64}))
    with pytest.raises(ValueError, match=r"expected 'arrays' to be a list of array names, found \['../outside'\]"):
        cls.load(folder)


def test_intact_model_loads_with_equal_scores(saved):
    cls, folder = saved
    model = cls.load(folder)
    x = sp.csr_matrix(np.eye(3, 10, dtype=np.float32))
    assert model.n_items == 10
    assert np.array_equal(model.score(x), cls.load(folder).score(x))


# ---- per-user values -----------------------------------------------------------------------------------------


class Fixed:
    """A recommender with a fixed ranking, enough for evaluate_recommender."""

    n_items = 6

    def recommend(self, source_rows, k, **_):
        order = np.tile(np.arange(self.n_items, dtype=np.int64), (source_rows.shape[0], 1))[:, :k]
        return order, np.zeros(order.shape, dtype=np.float32)


@pytest.fixture
def artifacts(tmp_path):
    targets = sp.csr_matrix(np.array([[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 1], [0, 0, 1, 0, 0, 0]], dtype=np.float32))
    source = sp.csr_matrix((3, 6), dtype=np.float32)
    result = evaluate_recommender(
        Fixed(), source=source, targets=targets, metrics=["ndcg@5", "recall@3"], sample_ids=np.array([10, 11, 12])
    )
    folder = tmp_path / "run"
    write_evaluation_artifacts(result, folder, split_digest=None)
    return folder


def edit_frame(folder, edit):
    frame = pd.read_parquet(folder / "per_user.parquet")
    edit(frame)
    frame.to_parquet(folder / "per_user.parquet", index=False)


def add_metric(folder, key):
    meta = json.loads((folder / "evaluation.json").read_text())
    meta["metrics"][key] = {"mean": 0.0, "definition": "a custom metric"}
    (folder / "evaluation.json").write_text(json.dumps(meta))


def test_values_inside_the_range_are_read_back_unchanged(artifacts):
    read = read_evaluation_artifacts(artifacts, origin="run abc")
    frame = pd.read_parquet(artifacts / "per_user.parquet")
    assert np.array_equal(read.result.per_user["ndcg@5"], frame["ndcg@5"].to_numpy())
    assert read.result.per_user["recall@3"].tolist() == [0.5, 0.5, 1.0]


@pytest.mark.parametrize("key, value", [("ndcg@5", 45.0), ("recall@3", -0.25), ("ndcg@5", 1.0 + 1e-9)])
def test_values_outside_the_metric_range_are_refused_naming_the_run(artifacts, key, value):
    edit_frame(artifacts, lambda f: f.__setitem__(key, [0.5, value, 0.5]))
    with pytest.raises(
        ArtifactError,
        match=rf"^run abc: per_user.parquet: column '{key}' expected values in \[0, 1\] .*, "
        rf"found 1 outside, e\.g\. {value!r} in row 1 \(sample_id 11\)",
    ):
        read_evaluation_artifacts(artifacts, origin="run abc")


def test_boolean_metric_column_is_refused(artifacts):
    edit_frame(artifacts, lambda f: f.__setitem__("recall@3", [True, False, True]))
    with pytest.raises(
        ArtifactError,
        match=r"^run abc: per_user.parquet: column 'recall@3' expected float64 metric "
        r"values, found dtype bool",
    ):
        read_evaluation_artifacts(artifacts, origin="run abc")


def test_text_metric_column_is_refused(artifacts):
    edit_frame(artifacts, lambda f: f.__setitem__("recall@3", ["0.5", "0.1", "1"]))
    with pytest.raises(
        ArtifactError,
        match=r"^run abc: per_user.parquet: column 'recall@3' expected float64 metric "
        r"values, found dtype (object|str)",
    ):
        read_evaluation_artifacts(artifacts, origin="run abc")


def test_complex_metric_column_is_refused():
    # Parquet cannot hold complex numbers, so the column check is called on a frame directly.
    frame = pd.DataFrame({"sample_id": [1, 2], "recall@3": np.array([0.5, 1.0], dtype=np.complex128)})
    with pytest.raises(
        ArtifactError,
        match=r"^run abc: per_user.parquet: column 'recall@3' expected float64 metric "
        r"values, found dtype complex128",
    ):
        _metric_values(frame, "recall@3", "run abc: ")


def test_integer_metric_column_is_read_as_float64(artifacts):
    edit_frame(artifacts, lambda f: f.__setitem__("recall@3", [0, 1, 1]))
    read = read_evaluation_artifacts(artifacts, origin="run abc")
    assert read.result.per_user["recall@3"].dtype == np.float64
    assert read.result.per_user["recall@3"].tolist() == [0.0, 1.0, 1.0]


def test_unknown_metric_key_is_not_range_checked_but_must_be_finite(artifacts):
    edit_frame(artifacts, lambda f: f.__setitem__("revenue@5", [45.0, -3.0, 0.0]))
    add_metric(artifacts, "revenue@5")
    read = read_evaluation_artifacts(artifacts, origin="run abc")
    assert read.result.per_user["revenue@5"].tolist() == [45.0, -3.0, 0.0]
    edit_frame(artifacts, lambda f: f.__setitem__("revenue@5", [45.0, np.nan, 0.0]))
    with pytest.raises(ArtifactError, match=r"^run abc: .*column 'revenue@5' expected finite values, found 1 NaN"):
        read_evaluation_artifacts(artifacts, origin="run abc")


def test_value_range_comes_from_the_metric_classes():
    unbounded = {"arp", "novelty"}  # a count of users, and bits of self-information
    expected = {n: (0.0, float("inf") if n in unbounded else 1.0) for n in METRIC_CLASSES}
    assert {name: cls.value_range for name, cls in METRIC_CLASSES.items()} == expected
    assert value_range("ndcg@100") == (0.0, 1.0)
    assert value_range("calibrated_recall@20") == (0.0, 1.0)
    assert value_range("revenue@5") is None
    assert value_range("ndcg") is None
    assert value_range(3) is None


@pytest.mark.parametrize("name", sorted(n for n, cls in METRIC_CLASSES.items() if not issubclass(cls, ItemMetric)))
def test_every_metric_stays_within_its_range_and_reaches_its_ends(name):
    rng = np.random.default_rng(7)
    n, n_items, k = 400, 25, 10
    rankings = np.argsort(rng.random((n, n_items)), axis=1)[:, :k]
    rankings[rng.random((n, k)) < 0.1] = -1  # some padding
    rankings = np.where(np.cumsum(rankings < 0, axis=1) > 0, -1, rankings)  # padding only at the end
    dense = (rng.random((n, n_items)) < rng.uniform(0.02, 0.9, (n, 1))).astype(np.float32)
    # Row 0: a perfect ranking; row 1: no hit at all.
    dense[0] = 0
    dense[0, rankings[0, :3]] = 1
    dense[1] = 0
    dense[1, [i for i in range(n_items) if i not in rankings[1]][:2]] = 1
    targets = sp.csr_matrix(dense)
    metric = METRIC_CLASSES[name](k)
    values = metric.compute(rankings, targets)[f"{name}@{k}"]
    low, high = metric.value_range
    defined = values[~np.isnan(values)]
    assert defined.size > 300
    assert defined.min() >= low and defined.max() <= high
    assert values[1] == low
    if name != "precision":  # precision@10 of a 3-target row is 0.3 at best
        assert values[0] == high


# -- issue 27, C3: a per-user file is read only in the columns and the size its evaluation.json declares ----------

N_USERS = 943  # MovieLens-100k's users
HUGE_TEXT = 256 * 1024  # one value of a compressible column: 943 rows of it decode to 247 MB


@pytest.fixture
def ml100k_shaped(tmp_path):
    rng = np.random.default_rng(27)
    values = {"ndcg@100": rng.random(N_USERS), "recall@20": rng.random(N_USERS)}
    ids = np.array([f"u{i}" for i in range(N_USERS)])
    result = EvaluationResult.from_per_user(values, sample_ids=ids, targets_fingerprint="x")
    folder = tmp_path / "run"
    write_evaluation_artifacts(result, folder, split_digest=None)
    return folder


def _repeated(text_bytes: int) -> pa.DictionaryArray:
    """One long value repeated on every row under a dictionary: a few KB on disk, ``N_USERS * text_bytes`` decoded."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(N_USERS, dtype=np.int32)), pa.array(["x" * text_bytes]))


def _rewrite(folder: Path, **columns) -> int:
    """Replace or add columns of ``per_user.parquet`` (written without the Arrow schema, so text reads back dense,
    as other tools write it); its size in bytes."""
    path = folder / "per_user.parquet"
    table = pq.read_table(path)
    for name, column in columns.items():
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, column) if index >= 0 else table.append_column(name, column)
    pq.write_table(table, path, compression="zstd", store_schema=False)
    return path.stat().st_size


_MEASURE = """
import json, resource, sys
import pyarrow as pa
from mlflow_recsys.tracking._artifacts import ArtifactError, read_evaluation_artifacts
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read = read_evaluation_artifacts(sys.argv[1], origin="run bomb")
    outcome = {"rows": len(read.result.sample_ids), "ndcg": read.result.per_user["ndcg@100"].tolist()}
except ArtifactError as exc:
    outcome = {"error": str(exc)}
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
peak = pa.default_memory_pool().max_memory()
print(json.dumps({**outcome, "arrow_peak": peak, "rss_growth": (after - before) * 1024}))
"""


def _read_in_a_fresh_process(folder: Path) -> dict:
    """What reading ``folder`` gives in a fresh process, with the process's peak memory: Arrow's pool and RSS."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_per_user_columns_nobody_reads_cost_nothing_to_read(ml100k_shaped):
    expected = pd.read_parquet(ml100k_shaped / "per_user.parquet")["ndcg@100"].tolist()
    size = _rewrite(ml100k_shaped, notes=_repeated(HUGE_TEXT))
    assert size < 64 * 1024  # tens of KB on disk ...
    notes = pq.ParquetFile(ml100k_shaped / "per_user.parquet", read_dictionary=["notes"]).read(columns=["notes"])
    assert notes["notes"].chunk(0).dictionary[0].as_py() == "x" * HUGE_TEXT and len(notes) == N_USERS  # ... 247 MB read
    measured = _read_in_a_fresh_process(ml100k_shaped)
    assert measured["rows"] == N_USERS and measured["ndcg"] == expected
    # Reading every column took more than N_USERS * HUGE_TEXT = 247 MB; only sample_id and the metrics are read.
    assert measured["arrow_peak"] < 16 * 2**20 and measured["rss_growth"] < 64 * 2**20


@pytest.mark.parametrize("column", ["sample_id", "recall@20"])
def test_per_user_columns_that_decode_past_their_bound_are_refused_before_decoding(ml100k_shaped, column):
    _rewrite(ml100k_shaped, **{column: _repeated(HUGE_TEXT)})
    limit = per_user_byte_limit(N_USERS, 2)
    assert limit == N_USERS * (1024 + 2 * 16) + 2**20
    # Decoded text is each row's bytes and a 4-byte offset; numbers are what the footer says.
    decoded = N_USERS * (HUGE_TEXT + 4)
    if column != "sample_id":
        decoded += sum(len(f"u{i}") + 4 for i in range(N_USERS))
    decoded += _footer_bytes(ml100k_shaped, {"ndcg@100", "recall@20"} - {column})
    measured = _read_in_a_fresh_process(ml100k_shaped)
    assert measured["error"] == (
        "run bomb: per_user.parquet: expected columns ['sample_id', 'ndcg@100', 'recall@20'] to take at most "
        f"{limit:,} bytes decoded, found {decoded:,}"
    )
    assert measured["arrow_peak"] < 16 * 2**20 and measured["rss_growth"] < 64 * 2**20


def _footer_bytes(folder: Path, columns: set[str]) -> int:
    """The footer's uncompressed bytes of ``columns``."""
    meta = pq.ParquetFile(folder / "per_user.parquet").metadata
    return sum(
        meta.row_group(g).column(i).total_uncompressed_size
        for g in range(meta.num_row_groups)
        for i in range(meta.num_columns)
        if meta.row_group(g).column(i).path_in_schema in columns
    )


def test_per_user_row_count_and_plain_size_are_checked_from_the_footer(ml100k_shaped):
    meta = json.loads((ml100k_shaped / "evaluation.json").read_text())
    (ml100k_shaped / "evaluation.json").write_text(json.dumps({**meta, "n_samples": 10}))
    with pytest.raises(ArtifactError, match=r"^run abc: per_user.parquet: expected 10 rows \(n_samples\), found 943$"):
        read_evaluation_artifacts(ml100k_shaped, origin="run abc")
    for bad in (True, "943", -1, None):
        (ml100k_shaped / "evaluation.json").write_text(json.dumps({**meta, "n_samples": bad}))
        with pytest.raises(ArtifactError, match=r"evaluation.json: expected 'n_samples' to be a count of rows"):
            read_evaluation_artifacts(ml100k_shaped, origin="run abc")
    (ml100k_shaped / "evaluation.json").write_text(json.dumps(meta))
    # Distinct ids of 4 KB each: no repetition to hide behind, so the footer alone shows them over the bound.
    _rewrite(ml100k_shaped, sample_id=pa.array([f"{i:04d}" + "y" * 4096 for i in range(N_USERS)]))
    with pytest.raises(ArtifactError, match=r"^run abc: per_user.parquet: expected columns .* bytes decoded, found"):
        read_evaluation_artifacts(ml100k_shaped, origin="run abc")
