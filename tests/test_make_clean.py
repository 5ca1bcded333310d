"""`make clean` removes from the demo's store only the runs `make demo` made; users' runs there stay."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient
from mlflow.utils.file_utils import local_file_uri_to_path

from conftest import new_sqlite_store

ROOT = Path(__file__).resolve().parents[1]
DEMO = "mlflow-recsys-demo"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def project(tmp_path):
    """A folder with the Makefile and the script, a ./mlruns a user made, a built site/ and other files."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", root / "Makefile")
    shutil.copy(ROOT / "scripts" / "clean_demo.py", root / "scripts" / "clean_demo.py")
    for folder in ("mlruns", "site/guide", "checkpoints"):
        (root / folder).mkdir(parents=True)
    for file in ("mlruns/keep.txt", "site/index.html", "site/guide/index.html", "other.db", "checkpoints/split.zip"):
        (root / file).write_text("x")
    return root


class Store:
    def __init__(self, root):
        self.root = root
        self.client = MlflowClient(tracking_uri=new_sqlite_store(root / "mlruns.db"))
        self.demo = self.client.create_experiment(DEMO, artifact_location=(root / "mlartifacts").resolve().as_uri())
        self.source = root.parent / "source"
        self.source.mkdir(exist_ok=True)
        (self.source / "per_user.parquet").write_text("x")

    def run(self, experiment_id, *, parent=None, role=None):
        run_id = self.client.create_run(experiment_id).info.run_id
        if role:
            self.client.set_tag(run_id, "recsys.role", role)
        if parent:
            self.client.set_tag(run_id, "mlflow.parentRunId", parent)
        self.client.log_artifact(run_id, str(self.source / "per_user.parquet"))
        self.client.set_terminated(run_id)
        return run_id

    def study(self):
        """What `make demo` leaves: a main run, its steps, and a model one step logged."""
        main = self.run(self.demo, role="main")
        steps = [self.run(self.demo, parent=main, role="split"), self.run(self.demo, parent=main, role="train")]
        model = self.client.create_logged_model(self.demo, source_run_id=steps[1])
        self.client.log_model_artifacts(model.model_id, str(self.source))
        return [main, *steps], model

    def folder(self, run_id):
        """The run's own folder (its artifact root's parent)."""
        return Path(local_file_uri_to_path(self.client.get_run(run_id).info.artifact_uri)).parent

    def run_ids(self):
        experiments = [e.experiment_id for e in self.client.search_experiments(view_type=ViewType.ALL)]
        return {r.info.run_id for r in self.client.search_runs(experiments, run_view_type=ViewType.ALL)}


def make_clean(root, python=sys.executable):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    done = subprocess.run(
        ["make", "clean", f"PY={python}"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_make_clean_removes_the_demo_runs_and_keeps_the_users(tmp_path):
    root = project(tmp_path)
    store = Store(root)
    demo_runs, model = store.study()
    demo_folders = [store.folder(r) for r in demo_runs]
    model_folder = Path(local_file_uri_to_path(model.artifact_location)).parent
    user_run = store.run(store.demo)  # (b) a user's run in the demo experiment, no parent
    other = store.client.create_experiment("mine", artifact_location=(root / "mlruns" / "mine").resolve().as_uri())
    other_run = store.run(other, role="comparison")  # (c) a user's run in another experiment
    gone = store.client.create_experiment("old", artifact_location=(root / "mlruns" / "old").resolve().as_uri())
    deleted_run = store.run(gone)  # a soft-deleted experiment of the user's: `mlflow gc` would purge it
    store.client.delete_experiment(gone)
    kept_folders = [store.folder(r) for r in (user_run, other_run, deleted_run)]
    assert all(f.is_dir() for f in demo_folders + kept_folders + [model_folder])

    out = make_clean(root)

    assert store.run_ids() == {user_run, other_run, deleted_run}
    assert not any(f.exists() for f in demo_folders + [model_folder])
    assert all((f / "artifacts" / "per_user.parquet").read_text() == "x" for f in kept_folders)
    assert store.client.search_logged_models([store.demo, other]) == []
    assert store.client.get_experiment(gone).lifecycle_stage == "deleted"
    assert (root / "mlruns" / "keep.txt").read_text() == "x"
    assert sorted(p.name for p in root.iterdir()) == [
        "Makefile",
        "checkpoints",
        "mlartifacts",
        "mlruns",
        "mlruns.db",
        "other.db",
        "scripts",
    ]
    assert "removed 3 demo run(s) and 1 logged model(s)" in out and "kept 3 other run(s)" in out


def test_make_clean_removes_a_store_that_holds_only_the_demo(tmp_path):
    root = project(tmp_path)
    store = Store(root)
    store.study()
    store.study()  # `make demo` run twice

    out = make_clean(root)

    assert sorted(p.name for p in root.iterdir()) == ["Makefile", "checkpoints", "mlruns", "other.db", "scripts"]
    assert (root / "mlruns" / "keep.txt").read_text() == "x"
    assert "removed 6 demo run(s)" in out and "removed mlruns.db and mlartifacts/" in out


def test_make_clean_without_the_venv_removes_only_site(tmp_path):
    root = project(tmp_path)
    (root / "mlruns.db").write_text("x")

    make_clean(root, python=tmp_path / "no-venv" / "bin" / "python")

    assert sorted(p.name for p in root.iterdir()) == [
        "Makefile",
        "checkpoints",
        "mlruns",
        "mlruns.db",
        "other.db",
        "scripts",
    ]
