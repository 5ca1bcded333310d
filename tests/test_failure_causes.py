"""Errors name their innermost system cause (issue 27, C7): a full disk or database, not what it broke upstream.

Real failures throughout: writes to ``/dev/full`` (ENOSPC for anyone), and, where the tests may mount (root),
tmpfs folders of a few KiB holding the temporary folder or the SQLite store, filled for real.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import sqlite_store, trained_copy
from mlflow_recsys import errors
from mlflow_recsys.cli import cli
from mlflow_recsys.errors import ArtifactError, DownloadError, failure_text, root_cause
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import TrainConfig, compare_runs, run_train

METRICS = ("ndcg@100",)
ENOSPC = "OSError: [Errno 28] No space left on device"


def write_to_dev_full() -> None:
    with open("/dev/full", "wb", buffering=0) as full:
        full.write(b"x")


def test_errors_name_the_innermost_system_failure_not_what_wrapped_it():
    try:
        try:
            write_to_dev_full()
        except OSError:
            raise ArtifactError("run 1: expected artifact evaluation.json, found none") from None
    except ArtifactError as masked:  # `from None` hides the disk from the traceback, not from root_cause
        assert failure_text(masked) == ENOSPC
    # Raised while handling the full disk (its __context__), and two levels down: the disk is what is named.
    try:
        try:
            try:
                write_to_dev_full()
            except OSError as exc:
                raise ArtifactError("run 1: expected artifact evaluation.json") from exc
        except ArtifactError:
            raise RuntimeError("Query-invoked autoflush")  # noqa: B904 - the implicit chain is the case here
    except RuntimeError as outer:
        assert root_cause(outer).errno == errno.ENOSPC
        assert failure_text(outer) == ENOSPC
    # What the package wrote around a refused connection stays: that is no system failure.
    try:
        try:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        except OSError as exc:
            raise DownloadError("could not fetch ml-100k.zip; place it at /data/ml-100k.zip") from exc
    except DownloadError as download:
        assert failure_text(download) == "DownloadError: could not fetch ml-100k.zip; place it at /data/ml-100k.zip"
    assert failure_text(KeyError("model")) == "KeyError: model"


def test_sqlite_errors_are_named_with_their_module():
    import sqlite3

    with sqlite3.connect(":memory:") as db:
        db.execute("PRAGMA max_page_count = 2")  # SQLite's own limit: the next page it needs is refused
        db.execute("CREATE TABLE t (x TEXT)")
        with pytest.raises(sqlite3.OperationalError) as full:
            db.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 100)
    assert failure_text(full.value) == "sqlite3.OperationalError: database or disk is full"
    assert errors.is_system_failure(full.value)
    assert not errors.is_system_failure(sqlite3.IntegrityError("UNIQUE constraint failed"))


@contextlib.contextmanager
def tiny_tmpfs(folder: Path, size: str):
    """``folder`` as a tmpfs of ``size`` (mount needs root); skipped where it cannot be mounted."""
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> None:
    """Write to ``folder`` until its file system refuses."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory):
    with trained_copy(trained_store, tmp_path_factory.mktemp("causes"), "causes") as trained:
        yield {**trained, "EASE": trained["ease"], "Popularity": trained["pop"]}


@pytest.fixture
def full_temporary_folder(tmp_path, monkeypatch):
    """tempfile's folder on a tmpfs of one 4 KiB page: no room for a run's per_user.parquet."""
    with tiny_tmpfs(tmp_path / "tmp", "4k") as folder:
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        yield folder


def comparisons(experiment_id):
    return MlflowClient().search_runs([experiment_id], "tags.`recsys.role` = 'comparison'")


def test_a_full_temporary_folder_is_named_as_the_cause_not_a_missing_artifact(store, full_temporary_folder):
    before = {r.info.run_id for r in comparisons(store["experiment_id"])}
    with pytest.raises(OSError) as full:
        compare_runs(
            run_ids=[store["EASE"], store["Popularity"]],
            settings=ComparisonSettings(reference="Popularity", n_resamples=99),
        )
    assert full.value.errno == errno.ENOSPC and str(full_temporary_folder) in str(full.value)
    (failed,) = [r for r in comparisons(store["experiment_id"]) if r.info.run_id not in before]
    reason = failed.data.tags["recsys.error"]
    assert failed.info.status == "FAILED" and reason.startswith(ENOSPC) and str(full_temporary_folder) in reason
    assert "evaluation.json, could not download" not in reason and "found none" not in reason
    # The command line prints the same cause, in one line.
    res = CliRunner().invoke(cli, ["compare", store["EASE"], store["Popularity"], "--n-resamples", "99"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    (line,) = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert line.startswith(f"Error: {ENOSPC}: ") and str(full_temporary_folder) in line
    # A training whose checkpoint cannot be copied here: the disk, not a missing checkpoint, and no run made.
    runs_before = len(MlflowClient().search_runs([store["experiment_id"]]))
    with pytest.raises(OSError) as no_room:
        run_train(store["checkpoint"], TrainConfig("Popularity", metrics=METRICS), log_model=False)
    assert type(no_room.value) is OSError and no_room.value.errno == errno.ENOSPC
    assert len(MlflowClient().search_runs([store["experiment_id"]])) == runs_before


def test_a_missing_artifact_is_still_reported_as_missing(store, tmp_path):
    bare = MlflowClient().create_run(store["experiment_id"], tags={"recsys.role": "train", "recsys.model": "X"})
    MlflowClient().set_terminated(bare.info.run_id)
    from mlflow_recsys.tracking._runs import load_evaluation_artifacts

    with pytest.raises(ArtifactError, match=rf"run {bare.info.run_id}: expected artifact per_user.parquet, found none"):
        load_evaluation_artifacts(bare.info.run_id)
    with pytest.raises(FileNotFoundError, match="checkpoint: could not download 'runs:/"):
        run_train(f"runs:/{bare.info.run_id}/checkpoint.zip", TrainConfig("Popularity"), log_model=False)


def test_a_full_sqlite_store_is_named_as_the_cause(store, tmp_path):
    checkpoint = Path(mlflow.artifacts.download_artifacts(store["checkpoint"], dst_path=str(tmp_path / "zip")))
    with tiny_tmpfs(tmp_path / "db", "2m") as folder:
        with sqlite_store(folder, "full"):
            fill(folder)
            with pytest.raises(Exception) as full:
                run_train(str(checkpoint), TrainConfig("Popularity", metrics=METRICS), log_model=False)
            assert "Query-invoked autoflush" in str(full.value)  # what SQLAlchemy says on top of it
            assert failure_text(full.value) == "sqlite3.OperationalError: database or disk is full"
            res = CliRunner().invoke(cli, ["train", "--checkpoint", str(checkpoint), "--model", "Popularity"])
            # MLflow logs its own traceback of the failed session first; the command's error is the last line.
            assert res.exit_code == 1
            assert res.output.strip().splitlines()[-1] == "Error: sqlite3.OperationalError: database or disk is full"
            mlflow.end_run()  # a failed start may leave nothing active; never the caller's


def test_a_closed_pipe_on_stdout_drops_the_output_and_nothing_else():
    """Once the reader has gone, writes and flushes succeed into /dev/null: a command carries on and ends its runs."""
    import io

    from mlflow_recsys._cli_group import StdoutGuard

    read_end, write_end = os.pipe()
    stream = io.TextIOWrapper(io.FileIO(write_end, "w"), encoding="utf-8", line_buffering=True)
    out = StdoutGuard(stream)
    try:
        out.write("read\n")
        assert os.read(read_end, 100) == b"read\n"
        os.close(read_end)  # the reader leaves
        with pytest.raises(BrokenPipeError):
            stream.write("lost\n")  # the bare stream raises, as MLflow's "View run" line did
        assert out.write("dropped\n") == len("dropped\n")
        out.flush()
        assert os.path.samefile(f"/proc/self/fd/{stream.fileno()}", os.devnull)
        assert out.failure is None  # a reader who left chose to: nothing to report
        assert out.encoding == "utf-8" and out.fileno() == write_end  # the rest is the stream's
    finally:
        stream.close()


def test_a_full_device_on_stdout_is_kept_to_report_after_the_runs_end():
    import io

    from mlflow_recsys._cli_group import StdoutGuard

    stream = io.TextIOWrapper(io.FileIO(os.open("/dev/full", os.O_WRONLY), "w"), encoding="utf-8")
    out = StdoutGuard(stream)
    try:
        out.write("x" * 100_000)  # more than the buffer: the write itself fails
        out.write("more\n")
        out.flush()
        assert isinstance(out.failure, OSError) and out.failure.errno == errno.ENOSPC
        assert os.path.samefile(f"/proc/self/fd/{stream.fileno()}", os.devnull)
    finally:
        stream.close()


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["compare", "--help"]])
def test_help_that_cannot_be_written_ends_in_one_error_line(args):
    """`--help > /dev/full`: click writes the help while it parses the options, before any command runs; it used to
    end in click's traceback."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-c", "from mlflow_recsys.cli import cli; cli()", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: OSError: [Errno 28] No space left on device (writing the standard output)"
