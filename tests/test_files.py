"""Files the package writes: modes follow the umask, checkpoints are not overwritten unasked.

`make clean` is tested in test_make_clean.py.
"""

import hashlib
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from mlflow_recsys._atomic import atomic_write, current_umask
from mlflow_recsys.data import build_recsys_checkpoint, download, load_recsys_split
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.models import EASE, EASEConfig
from mlflow_recsys.tracking._artifacts import write_evaluation_artifacts

ROOT = Path(__file__).resolve().parents[1]


def interactions():
    rng = np.random.default_rng(0)
    users, items = np.nonzero(rng.random((60, 20)) < 0.3)
    return pd.DataFrame({"user": users, "item": items, "value": 1.0})


# umask -> the mode a new file gets under it, as open() would give.
MODES = {0o022: 0o644, 0o077: 0o600, 0o002: 0o664}


@pytest.fixture(params=sorted(MODES))
def umask(request):
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_current_umask_reads_the_process_mask(umask):
    assert current_umask() == umask
    assert current_umask() == umask  # reading it does not change it


def test_checkpoint_mode_follows_the_umask(umask, tmp_path):
    path = build_recsys_checkpoint(interactions(), checkpoint_path=tmp_path / "c.zip", min_rating=None)
    assert mode(path) == MODES[umask]


def test_saved_model_modes_follow_the_umask(umask, tmp_path):
    x = sp.csr_matrix((np.random.default_rng(0).random((20, 8)) < 0.3).astype(np.float32))
    folder = EASE(EASEConfig(l2=1.0)).fit(x).save(tmp_path / "model")
    assert {p.name: mode(p) for p in folder.iterdir()} == {"config.json": MODES[umask], "B.npy": MODES[umask]}


def test_evaluation_artifact_modes_follow_the_umask(umask, tmp_path):
    result = EvaluationResult(
        metrics={"recall@5": 0.5}, per_user={"recall@5": np.array([0.0, 1.0])}, sample_ids=np.array([1, 2])
    )
    paths = write_evaluation_artifacts(result, tmp_path / "run", split_digest=None)
    assert {p.name: mode(p) for p in paths} == {"per_user.parquet": MODES[umask], "evaluation.json": MODES[umask]}
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["evaluation.json", "per_user.parquet"]


def test_downloaded_file_mode_follows_the_umask(umask, tmp_path):
    import functools
    import http.server
    import threading

    served = tmp_path / "served"
    served.mkdir()
    (served / "archive.bin").write_bytes(b"x" * 1000)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            dest = download(
                f"http://127.0.0.1:{server.server_address[1]}/archive.bin",
                tmp_path / "cache" / "archive.bin",
                hashlib.sha256(b"x" * 1000).hexdigest(),
                progress=False,
            )
        finally:
            server.shutdown()
    assert mode(dest) == MODES[umask]
    assert dest.read_bytes() == b"x" * 1000


def test_atomic_write_failure_leaves_the_target_and_no_temporary_file(tmp_path):
    target = tmp_path / "kept.txt"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="stop"):
        with atomic_write(target) as handle:
            handle.write(b"new and partial")
            raise RuntimeError("stop")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]


def test_atomic_write_replaces_the_target_on_success(tmp_path):
    target = tmp_path / "file.bin"
    target.write_bytes(b"old")
    with atomic_write(target) as handle:
        handle.write(b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_no_module_writes_with_mkstemp_or_replace_outside_the_helper():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src").rglob("*.py")
        if p.name != "_atomic.py" and any(word in p.read_text() for word in ("mkstemp", "os.replace("))
    ]
    assert offenders == []


# ---- no silent overwrite of a checkpoint ---------------------------------------------------------------------


def test_existing_checkpoint_is_refused_before_the_data_is_loaded(tmp_path):
    existing = tmp_path / "split.zip"
    existing.write_bytes(b"keep me")
    # The dataset does not exist: refusing the path first means no data was looked at.
    with pytest.raises(FileExistsError, match=r"checkpoint_path: .*split.zip already exists; pass overwrite=True"):
        build_recsys_checkpoint(tmp_path / "missing.csv", checkpoint_path=existing)
    assert existing.read_bytes() == b"keep me"


def test_existing_default_checkpoint_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    default = tmp_path / "checkpoints" / "interactions-user_split-seed42.zip"
    default.parent.mkdir()
    default.write_bytes(b"keep me")
    with pytest.raises(FileExistsError, match=r"checkpoints/interactions-user_split-seed42.zip already exists"):
        build_recsys_checkpoint(interactions(), min_rating=None)
    assert default.read_bytes() == b"keep me"


def test_overwrite_true_replaces_the_checkpoint(tmp_path):
    existing = tmp_path / "split.zip"
    existing.write_bytes(b"old")
    path = build_recsys_checkpoint(interactions(), checkpoint_path=existing, min_rating=None, overwrite=True)
    assert path == existing
    assert load_recsys_split(path)["x_train"].shape[1] == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["split.zip"]


def test_overwrite_must_be_a_bool(tmp_path):
    with pytest.raises(ValueError, match="overwrite: expected True or False, found 'yes'"):
        build_recsys_checkpoint(interactions(), checkpoint_path=tmp_path / "x.zip", overwrite="yes")
    assert list(tmp_path.iterdir()) == []
