"""Shared fixtures: a store trained once per session, a real MLflow tracking server over HTTP, and a way to copy
training runs."""

import os

# MLflow sends usage telemetry unless told not to (MLFLOW_DISABLE_TELEMETRY, its documented opt-out). On a machine that
# cannot reach its server the telemetry client gives up in a thread of its own and unsets an environment variable there,
# which broke a request iterating os.environ at that moment (KeyError '_MLFLOW_TELEMETRY_SESSION_ID' in a browser test).
# Set before MLflow is first imported, for the tests and for every server and command they start.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"

import atexit
import functools
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import hypothesis.configuration
import mlflow
import pandas as pd
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from mlflow_recsys.tracking._local_server import local_tracking_server

BIN = Path(sys.executable).parent


def small_study(*, seeds=(0, 1), split_seed=42, executor="sequential"):
    """The plan of a one-dataset study small enough to start, for tests that are refused before it does."""
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking._study_file import shorthand_plan

    return shorthand_plan(
        dataset="movielens-100k",
        split_seed=split_seed,
        seeds=seeds,
        ease={"l2": 500.0},
        elsa={"latent_dim": 8, "batch_size": 64, "epochs": 1, "lr": 0.01},
        comparison=ComparisonSettings(reference="EASE", metrics="ndcg@100", primary="ndcg@100", n_resamples=99),
        executor=executor,
    )


def clean_env(tracking_uri: str) -> dict:
    """This environment without MLflow variables, pointing at ``tracking_uri``, with the venv on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(MLFLOW_TRACKING_URI=tracking_uri, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return env


@pytest.fixture(autouse=True)
def cli_process_state(monkeypatch):
    """Undo what an in-process CLI call sets for its whole process: variables and the SIGTERM and SIGINT handlers."""
    from mlflow_recsys.tracking._server_errors import CLI_DEFAULTS

    for name in ("MLFLOW_RECSYS_COMMAND", *CLI_DEFAULTS):
        monkeypatch.delenv(name, raising=False)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in handlers.items():
        signal.signal(s, handler)


@functools.cache
def _migrated_empty_store() -> Path:
    """An empty SQLite store that MLflow made and migrated, once per session."""
    folder = Path(tempfile.mkdtemp(prefix="recsys-empty-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    MlflowClient(tracking_uri=f"sqlite:///{folder}/mlruns.db").search_experiments()
    return folder / "mlruns.db"


def new_sqlite_store(path: Path) -> str:
    """The URI of a new SQLite store at ``path``, as MLflow would make it there from the current folder (its
    Default experiment keeps artifacts under ``./mlruns``). A copy of :func:`_migrated_empty_store`: MLflow's
    migrations take about a second per store, and the suite makes some ninety."""
    source, target = sqlite3.connect(_migrated_empty_store()), sqlite3.connect(path)
    try:
        source.backup(target)
        default = str(Path.cwd() / "mlruns" / "0")
        target.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0", (default,))
        target.commit()
    finally:
        source.close()
        target.close()
    return f"sqlite:///{path}"


@contextmanager
def sqlite_store(root: Path, experiment: str = "tests"):
    """Point MLflow at a new SQLite store under ``root`` (:func:`new_sqlite_store`) with one active experiment;
    yield its id."""
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(new_sqlite_store(root / "mlruns.db"))
    try:
        experiment_id = mlflow.create_experiment(experiment, artifact_location=(root / "artifacts").as_uri())
        mlflow.set_experiment(experiment_id=experiment_id)
        yield experiment_id
    finally:
        mlflow.set_tracking_uri(previous)


#: The metrics EASE and Popularity of :func:`trained_store` are evaluated on.
TRAINED_METRICS = ("ndcg@100", "recall@20")


@pytest.fixture(scope="session")
def trained_store(tmp_path_factory):
    """MovieLens-100k split with seed 42, and EASE and Popularity trained on it with :data:`TRAINED_METRICS`, in
    one SQLite store made once per session (a split and two trainings take seconds, and about ten modules start
    from them); a module works on its own copy, made by :func:`trained_copy`. A dict of root, experiment_id, split,
    checkpoint (its ``runs:/`` URI), ease and pop (the run ids)."""
    from mlflow_recsys.tracking import SplitConfig, TrainConfig, run_split, run_train

    root = tmp_path_factory.mktemp("trained")
    with sqlite_store(root, "trained") as experiment_id:
        split = run_split("movielens-100k", SplitConfig(seed=42))
        checkpoint = f"runs:/{split}/checkpoint.zip"
        ease = run_train(checkpoint, TrainConfig("EASE", metrics=TRAINED_METRICS), log_model=False)
        pop = run_train(checkpoint, TrainConfig("Popularity", metrics=TRAINED_METRICS), log_model=False)
    return dict(root=root, experiment_id=experiment_id, split=split, checkpoint=checkpoint, ease=ease, pop=pop)


@contextmanager
def trained_copy(trained: dict, root: Path, experiment: str):
    """A copy under ``root`` of :func:`trained_store` (database and artifacts), its experiment renamed
    ``experiment``, with MLflow pointed at it as by :func:`sqlite_store`; yields ``trained`` with this root.

    A copy, not the shared store, so that what a module logs, counts, edits or deletes stays its own."""
    source = sqlite3.connect(trained["root"] / "mlruns.db")
    target = sqlite3.connect(root / "mlruns.db")
    try:
        source.backup(target)
        # The store names its artifacts by absolute URI: point them at the copy.
        old, new = (trained["root"] / "artifacts").as_uri(), (root / "artifacts").as_uri()
        for table, column in (
            ("experiments", "artifact_location"),
            ("runs", "artifact_uri"),
            ("logged_models", "artifact_location"),
        ):
            target.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)", (old, new))
        target.commit()
    finally:
        source.close()
        target.close()
    shutil.copytree(trained["root"] / "artifacts", root / "artifacts")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{root}/mlruns.db")
    try:
        MlflowClient().rename_experiment(trained["experiment_id"], experiment)
        mlflow.set_experiment(experiment_id=trained["experiment_id"])
        yield {**trained, "root": root}
    finally:
        mlflow.set_tracking_uri(previous)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """One `mlflow server` on 127.0.0.1 for the whole session (it takes 10 to 25 s to start)."""
    root = tmp_path_factory.mktemp("server")
    with local_tracking_server(new_sqlite_store(root / "server.db"), root / "artifacts") as url:
        yield url


def copy_training_run(source_run_id, folder, *, model, edit_meta=None, edit_frame=None, tags=None, experiment_id=None):
    """A FINISHED training run whose per-user artifacts and aggregate metrics are an (optionally edited) copy of
    another's; ``tags`` are set over the copied ``recsys.`` tags."""
    client = MlflowClient()
    source = client.get_run(source_run_id)
    folder = Path(folder) / "artifacts"  # not the model name: names may be long or hold a slash
    folder.mkdir(parents=True)
    listed = {info.path for info in client.list_artifacts(source_run_id)}
    for name in ("per_user.parquet", "evaluation.json", "rankings.parquet"):
        if name in listed:  # the scored lists, which evaluation.json names, travel with it
            mlflow.artifacts.download_artifacts(run_id=source_run_id, artifact_path=name, dst_path=str(folder))
    if edit_meta is not None:
        meta = json.loads((folder / "evaluation.json").read_text())
        (folder / "evaluation.json").write_text(json.dumps(edit_meta(meta)))
    if edit_frame is not None:
        frame = pd.read_parquet(folder / "per_user.parquet")
        edit_frame(frame).to_parquet(folder / "per_user.parquet", index=False)
    run_tags = {k: v for k, v in source.data.tags.items() if k.startswith("recsys.")}
    run = client.create_run(
        experiment_id or source.info.experiment_id, tags={**run_tags, "recsys.model": model, **(tags or {})}
    )
    now = int(time.time() * 1000)
    client.log_batch(run.info.run_id, metrics=[Metric(k, v, now, 0) for k, v in source.data.metrics.items()])
    client.log_artifacts(run.info.run_id, str(folder))
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


@pytest.fixture(scope="session")
def recbole_metrics_module():
    """RecBole 1.2.1's ``recbole.evaluator.metrics``, an independent implementation of the item-side and global metrics.

    RecBole is installed with ``--no-deps``; its evaluator needs ``colorlog`` and ``texttable`` (small, in the test
    extra) and ``torch.utils.tensorboard``, which imports the ``tensorboard`` package (with grpcio and a compiled data
    server: not small). No metric used here touches TensorBoard, so when it is missing the import is made with a
    stand-in module for ``torch.utils.tensorboard``, in place for the import only."""
    import importlib.util
    import types

    if importlib.util.find_spec("recbole") is None:
        pytest.skip("recbole is not installed (make install adds it with --no-deps)")
    with pytest.MonkeyPatch.context() as patch:
        try:
            import torch.utils.tensorboard  # noqa: F401
        except ImportError:
            stand_in = types.ModuleType("torch.utils.tensorboard")
            stand_in.SummaryWriter = None  # type: ignore[attr-defined]
            patch.setitem(sys.modules, "torch.utils.tensorboard", stand_in)
        import recbole.evaluator.metrics as metrics
    return metrics


@pytest.fixture
def copy_run():
    """:func:`copy_training_run`, for tests that take it as a fixture."""
    return copy_training_run


# -- the suite leaves the working tree as it found it -------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
# Hypothesis keeps its example database under ./.hypothesis of the working directory unless told otherwise.
hypothesis.configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="recsys-hypothesis-"))
#: Made by any Python or pytest run; not something a test wrote.
_CACHES = ("__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")


def working_tree_state(root: Path = ROOT) -> set[str]:
    """What ``git status --porcelain --ignored`` says of ``root`` (changed, untracked and ignored paths), caches
    left out; outside a git checkout, every path below ``root`` but the caches, ``.git`` and ``.venv``."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--ignored", "--untracked-files=all"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        out = [
            str(p.relative_to(root))
            for p in root.rglob("*")
            if not {".git", ".venv", *_CACHES} & set(p.relative_to(root).parts)
        ]
    # The project's own environment is installed into, never written by a test (make browser-test adds to it).
    return {
        line
        for line in out
        if not line[3:].startswith(".venv/") and not any(c in line.split("/") or c + "/" in line for c in _CACHES)
    }


def new_in_working_tree(before: set[str], after: set[str]) -> list[str]:
    """Entries of ``after`` that ``before`` lacks: what the session wrote into the working tree."""
    return sorted(after - before)


def pytest_sessionstart(session):
    session.config._recsys_tree = working_tree_state()


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test wrote into the working tree (an MLflow store or artifacts, a report): every
    test must write under its temporary folder only."""
    before = getattr(session.config, "_recsys_tree", None)
    if before is None:
        return
    written = new_in_working_tree(before, working_tree_state())
    if written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "the tests wrote into the working tree (expected temporary folders only): " + ", ".join(written)
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
