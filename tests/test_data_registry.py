"""Every registered dataset, downloaded for real from a local HTTP server that serves archives built here.

The archives copy each dataset's published layout (member path, separator,
header, columns, encoding) on a few synthetic ratings; the registry entry is
the real one with only the URL and the SHA-256 pointed at the local copy.
"""

import dataclasses
import hashlib
import http.server
import io
import threading
import types
import zipfile
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlflow_recsys.data import DATASETS, _download, build_recsys_checkpoint, load_interactions, load_recsys_split
from mlflow_recsys.data._datasets import get_dataset_spec
from mlflow_recsys.data._interactions import from_interactions

RATINGS = pd.DataFrame(
    {
        "user": [1, 1, 1, 2, 2, 3, 3, 3, 3],
        "item": [10, 20, 30, 10, 40, 20, 30, 40, 50],
        "value": [5.0, 3.5, 4.0, 2.0, 5.0, 4.0, 4.5, 1.0, 5.0],
        "timestamp": [
            978300760,
            978300761,
            978300800,
            978300100,
            978301000,
            978302000,
            978302001,
            978302002,
            978302003,
        ],
    }
)


def ratings_text(name: str) -> bytes:
    """RATINGS written the way the named dataset writes its ratings file."""
    r = RATINGS
    if name == "movielens-100k":
        lines = [f"{u}\t{i}\t{int(v)}\t{t}" for u, i, v, t in r.itertuples(index=False)]
        return ("\n".join(lines) + "\n").encode()
    if name == "movielens-1m":
        lines = [f"{u}::{i}::{int(v)}::{t}" for u, i, v, t in r.itertuples(index=False)]
        return ("\n".join(lines) + "\n").encode("latin-1")
    if name == "movielens-20m":
        lines = ["userId,movieId,rating,timestamp"] + [f"{u},{i},{v},{t}" for u, i, v, t in r.itertuples(index=False)]
        return ("\n".join(lines) + "\n").encode()
    if name == "goodbooks":
        lines = ["user_id,book_id,rating"] + [f"{u},{i},{int(v)}" for u, i, v, _ in r.itertuples(index=False)]
        return ("\n".join(lines) + "\n").encode()
    raise AssertionError(f"no layout written for {name}")


def expected_frame(name: str) -> pd.DataFrame:
    frame = RATINGS.copy()
    if name in ("movielens-100k", "movielens-1m", "goodbooks"):
        frame["value"] = np.floor(frame["value"])
    return frame.drop(columns="timestamp") if name == "goodbooks" else frame


def build_archive(name: str, extra: dict[str, bytes] | None = None) -> bytes:
    member = get_dataset_spec(name).ratings.member
    # Archives whose top folder is undocumented are registered by file name; put one in a folder.
    member = member if "/" in member else f"{name}-1.0/{member}"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, ratings_text(name))
        zf.writestr(str(Path(member).parent / "README"), b"synthetic test archive")
        for path, payload in (extra or {}).items():
            zf.writestr(path, payload)
    return buf.getvalue()


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/cut/"):
            # Announces the whole file, sends half of it, hangs up: a dropped connection.
            body = (Path(self.directory) / self.path[len("/cut/") :]).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield root, base
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def retry_waits(monkeypatch):
    """The seconds download waits between attempts, recorded instead of slept (tests/test_data_download.py waits
    them for real)."""
    waits: list[float] = []
    monkeypatch.setattr(_download, "time", types.SimpleNamespace(sleep=waits.append))
    return waits


def register_local(monkeypatch, served, name, payload, *, sha256=None, path_prefix=""):
    """Serve ``payload`` under the canonical archive name and point the registry entry at it."""
    root, base = served
    spec = get_dataset_spec(name)
    (root / spec.archive_name).write_bytes(payload)
    local = dataclasses.replace(
        spec, url=f"{base}/{path_prefix}{spec.archive_name}", sha256=sha256 or hashlib.sha256(payload).hexdigest()
    )
    monkeypatch.setitem(DATASETS, name, local)
    return local


def test_the_registry_holds_the_catalogue_with_source_and_terms():
    assert {"goodbooks", "movielens-100k", "movielens-1m", "movielens-20m"} <= set(DATASETS)
    for spec in DATASETS.values():
        assert spec.url.startswith("https://") and len(spec.sha256) == 64
        assert spec.licence and spec.citation and spec.homepage.startswith("https://")
    assert "2827872" in DATASETS["movielens-1m"].citation and "CC BY-SA 4.0" in DATASETS["goodbooks"].licence


def test_netflix_is_refused_with_the_reason_and_the_way_around():
    with pytest.raises(ValueError, match="not registered.*CSV or Parquet"):
        get_dataset_spec("netflix")


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_each_dataset_layout_downloads_and_parses(monkeypatch, served, tmp_path, name):
    spec = register_local(monkeypatch, served, name, build_archive(name))
    frame = load_interactions(name, data_dir=tmp_path / "cache", use_package_copy=False, progress=False)
    pd.testing.assert_frame_equal(frame, expected_frame(name))
    cached = tmp_path / "cache" / spec.archive_name
    assert [p.name for p in cached.parent.iterdir()] == [spec.archive_name]
    # The second load is served from the cache: stopping the server must not matter.
    (served[0] / spec.archive_name).unlink()
    pd.testing.assert_frame_equal(
        load_interactions(name, data_dir=tmp_path / "cache", use_package_copy=False, progress=False),
        expected_frame(name),
    )


def test_a_registered_download_feeds_a_checkpoint(monkeypatch, served, tmp_path):
    register_local(monkeypatch, served, "movielens-1m", build_archive("movielens-1m"))
    path = build_recsys_checkpoint(
        "movielens-1m",
        data_dir=tmp_path / "cache",
        checkpoint_path=tmp_path / "c.zip",
        split_mode="leave_one_out",
        min_rating=None,
        min_user_interactions=1,
    )
    split = load_recsys_split(path)
    assert split["manifest"]["dataset"]["name"] == "movielens-1m"
    assert split["manifest"]["dataset"]["url"].startswith("http://127.0.0.1")
    assert split["manifest"]["counts"]["n_raw_interactions"] == len(RATINGS)


def test_wrong_checksum_names_both_digests_and_leaves_nothing(monkeypatch, served, tmp_path, retry_waits):
    payload = build_archive("goodbooks")
    register_local(monkeypatch, served, "goodbooks", payload, sha256="0" * 64)
    with pytest.raises(ValueError, match=f"SHA-256 {hashlib.sha256(payload).hexdigest()}, expected {'0' * 64}"):
        load_interactions("goodbooks", data_dir=tmp_path / "cache", progress=False)
    assert list((tmp_path / "cache").iterdir()) == [] and retry_waits == [1, 2]


def test_truncated_file_fails_the_checksum_and_leaves_nothing(monkeypatch, served, tmp_path, retry_waits):
    full = build_archive("movielens-20m")
    spec = register_local(monkeypatch, served, "movielens-20m", full)
    (served[0] / spec.archive_name).write_bytes(full[: len(full) // 2])
    with pytest.raises(ValueError, match="downloaded file has SHA-256"):
        load_interactions("movielens-20m", data_dir=tmp_path / "cache", progress=False)
    assert list((tmp_path / "cache").iterdir()) == [] and retry_waits == [1, 2]


def test_connection_dropped_mid_body_leaves_nothing(monkeypatch, served, tmp_path, retry_waits):
    from mlflow_recsys.data import DownloadError

    register_local(monkeypatch, served, "movielens-20m", build_archive("movielens-20m"), path_prefix="cut/")
    with pytest.raises((DownloadError, ValueError), match="movielens|ml-20m"):
        load_interactions("movielens-20m", data_dir=tmp_path / "cache", progress=False)
    assert list((tmp_path / "cache").iterdir()) == [] and retry_waits == [1, 2]


def test_archive_with_a_zip_slip_member_is_refused(monkeypatch, served, tmp_path):
    evil = build_archive("movielens-100k", extra={"../../outside.txt": b"escape"})
    register_local(monkeypatch, served, "movielens-100k", evil)
    with pytest.raises(ValueError, match=r"refusing zip member '../../outside.txt'"):
        load_interactions("movielens-100k", data_dir=tmp_path / "cache", use_package_copy=False, progress=False)
    assert not (tmp_path / "outside.txt").exists()


def test_archive_without_the_ratings_file_names_what_it_found(monkeypatch, served, tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("goodbooks-10k/books.csv", b"id\n1\n")
    register_local(monkeypatch, served, "goodbooks", buf.getvalue())
    with pytest.raises(ValueError, match=r"expected one archive member 'ratings.csv', found none.*books.csv"):
        load_interactions("goodbooks", data_dir=tmp_path / "cache", progress=False)


def test_from_interactions_renames_columns_and_converts_datetimes():
    frame = pd.DataFrame(
        {
            "uid": ["a", "b"],
            "sku": [7, 8],
            "clicks": [3, 1],
            "when": pd.to_datetime(["1970-01-01 00:00:10", "2001-09-09 01:46:40"]),
        }
    )
    out = from_interactions(frame, user="uid", item="sku", value="clicks", timestamp="when")
    assert out["user"].tolist() == ["a", "b"] and out["item"].dtype == np.int64
    assert out["timestamp"].tolist() == [10, 1_000_000_000] and out["value"].tolist() == [3.0, 1.0]


@pytest.mark.parametrize(
    "frame, kwargs, message",
    [
        (
            pd.DataFrame({"u": [1], "item": [2], "value": [1.0]}),
            {},
            r"user: expected a column 'user'.*found columns \['u'",
        ),
        (pd.DataFrame({"user": [1], "item": [2], "value": ["x"]}), {}, "expected numbers in 'value'"),
        (pd.DataFrame({"user": [1, None], "item": [2, 3], "value": [1.0, 1.0]}), {}, "no missing values in 'user'"),
        (
            pd.DataFrame({"user": [1], "item": [2], "value": [1.0]}),
            {"timestamp": "ts"},
            "timestamp: expected a column 'ts'",
        ),
        ([1, 2], {}, "frame: expected a pandas DataFrame, found list"),
    ],
)
def test_from_interactions_names_the_bad_input(frame, kwargs, message):
    with pytest.raises(ValueError, match=message):
        from_interactions(frame, **kwargs)


def test_csv_and_parquet_logs_build_the_same_split(tmp_path):
    rng = np.random.default_rng(0)
    n = 4000
    frame = pd.DataFrame(
        {
            "user": rng.integers(0, 200, n),
            "item": rng.integers(0, 150, n),
            "value": rng.integers(1, 6, n).astype(float),
            "timestamp": rng.integers(0, 10**6, n),
        }
    )
    frame.to_csv(tmp_path / "log.csv", index=False)
    frame.to_parquet(tmp_path / "log.parquet")
    kwargs = dict(seed=3, min_user_interactions=3)
    a = load_recsys_split(build_recsys_checkpoint(tmp_path / "log.csv", checkpoint_path=tmp_path / "a.zip", **kwargs))
    b = load_recsys_split(
        build_recsys_checkpoint(str(tmp_path / "log.parquet"), checkpoint_path=tmp_path / "b.zip", **kwargs)
    )
    c = load_recsys_split(build_recsys_checkpoint(frame, checkpoint_path=tmp_path / "c.zip", **kwargs))
    assert a["split_digest"] == b["split_digest"] == c["split_digest"]
    assert a["manifest"]["dataset"]["file_name"] == "log.csv" and c["manifest"]["dataset"]["source"] == "frame"
    assert a["manifest"]["dataset"]["interactions_sha256"] == c["manifest"]["dataset"]["interactions_sha256"]


def test_csv_ids_keep_leading_zeros_and_plain_integers_become_int64(tmp_path):
    from mlflow_recsys.data import read_interactions_file

    (tmp_path / "zeros.csv").write_text("user,item,value\n1,0012,5\n1,12,4\n2,012,3\n")
    out = read_interactions_file(tmp_path / "zeros.csv")
    assert out["item"].tolist() == ["0012", "12", "012"] and out["user"].dtype == np.int64
    (tmp_path / "plain.csv").write_text("user,item,value\n1,12,5\n2,7,4\n")
    assert read_interactions_file(tmp_path / "plain.csv")["item"].dtype == np.int64


def test_ids_beyond_int64_stay_text_and_integral_floats_become_integers():
    big = pd.DataFrame(
        {"user": np.array([2**64 - 1, 2**64 - 2], dtype=np.uint64), "item": [1.0, 2.0], "value": [1.0, 1.0]}
    )
    out = from_interactions(big)
    assert out["user"].tolist() == [str(2**64 - 1), str(2**64 - 2)] and out["item"].tolist() == [1, 2]


def test_timestamps_from_iso_text_and_floats_are_whole_utc_seconds():
    frame = pd.DataFrame(
        {
            "user": [1, 2],
            "item": [1, 2],
            "value": 1.0,
            "timestamp": ["1970-01-01T00:00:10", "1970-01-01T01:00:00+01:00"],
        }
    )
    assert from_interactions(frame)["timestamp"].tolist() == [10, 0]
    frame["timestamp"] = [-1.5, 2.9]
    assert from_interactions(frame)["timestamp"].tolist() == [-2, 2]
    frame["timestamp"] = [np.inf, 1.0]
    with pytest.raises(ValueError, match="expected finite numbers in 'timestamp', found 1 infinite value"):
        from_interactions(frame)
    frame["timestamp"] = ["yesterday", "today"]
    with pytest.raises(ValueError, match="expected Unix seconds or ISO 8601 dates in 'timestamp'"):
        from_interactions(frame)


def test_empty_csv_is_named(tmp_path):
    from mlflow_recsys.data import read_interactions_file

    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError, match="empty.csv: expected a header line"):
        read_interactions_file(tmp_path / "empty.csv")


def test_arguments_are_checked_before_any_data_is_loaded(tmp_path):
    # The dataset would fail too (it is not registered): the argument errors must come first.
    for kwargs, message in (
        (dict(seed=-3), "seed: expected an integer >= 0"),
        (dict(min_rating=float("nan")), "min_rating: expected a finite number"),
        (dict(min_user_interactions=0), "min_user_interactions: expected an integer in \\[1, 2,147,483,647\\]"),
        (dict(test_frac=1e9), r"test_frac: expected a number strictly between 0 and 1"),
        (dict(eval_draws=True), r"eval_draws: expected an integer in \[1, 100\], found True"),
        (dict(checkpoint_path=tmp_path), "checkpoint_path: expected a file path"),
    ):
        with pytest.raises(ValueError, match=message):
            build_recsys_checkpoint("Netflix", **kwargs)
    with pytest.raises(ValueError, match="'Netflix' is not registered"):
        build_recsys_checkpoint("Netflix")


def test_a_split_without_test_rows_is_refused_saying_what_to_change(tmp_path):
    # One user: 20% of one user rounds to no test user.
    one_user = pd.DataFrame({"user": 1, "item": range(10), "value": 1.0, "timestamp": range(10)})
    with pytest.raises(ValueError, match=r"^user_split: the split has no test rows .*: raise test_frac"):
        build_recsys_checkpoint(one_user, checkpoint_path=tmp_path / "x.zip", min_rating=None, val_frac=0.0)
    # After the cut only user 2 is active, and it has no interaction before it to fold in.
    late = pd.DataFrame({"user": [1] * 8 + [2] * 2, "item": range(10), "value": 1.0, "timestamp": range(10)})
    with pytest.raises(
        ValueError, match=r"^time_split: the split has no test rows \(1 test user\(s\) dropped .*an earlier cut"
    ):
        build_recsys_checkpoint(
            late,
            checkpoint_path=tmp_path / "x.zip",
            split_mode="time_split",
            min_rating=None,
            min_user_interactions=1,
            val_frac=0.0,
        )
    assert not (tmp_path / "x.zip").exists()
