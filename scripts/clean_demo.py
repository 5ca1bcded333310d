"""Remove from the demo's store exactly the runs `make demo` made (run by `make clean`).

`make demo` logs a study: one run tagged ``recsys.role=main`` in the demo experiment, and its steps, each
tagged ``mlflow.parentRunId`` = that run (see ``mlflow_recsys.tracking._study``). The README points users at
the same store for their own runs, so only those runs go, with their artifacts and the models they logged;
every other run stays. When nothing but the demo's runs was there, the store file goes, and the artifacts
folder too once nothing else is in it. ``./mlruns`` is never touched, nor anything outside the artifacts
folder: a demo run whose artifacts (or logged model) live elsewhere is kept and counted.

The deletion is permanent and mirrors ``mlflow gc``'s per-run step (delete the run's artifacts, then the
run's row). ``mlflow gc --run-ids`` itself is not called: besides those runs it also purges every
soft-deleted experiment and logged model of the store, which may be the user's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

SQLITE = "sqlite:///"
PAGE = 1000


def _all(fetch):
    """Every item of a paged MLflow search; ``fetch(page_token)`` returns one page."""
    items, token = [], None
    while True:
        page = fetch(token)
        items.extend(page)
        token = page.token
        if not token:
            return items


def _local_path(uri: str) -> Path | None:
    from mlflow.utils.file_utils import local_file_uri_to_path
    from mlflow.utils.uri import is_local_uri

    return Path(local_file_uri_to_path(uri)).resolve() if is_local_uri(uri) else None


def _inside(uri: str, folder: Path) -> bool:
    path = _local_path(uri)
    return path is not None and path.is_relative_to(folder) and path != folder


def _delete_artifacts(uri: str, folder: Path) -> None:
    """Remove an artifact root (inside ``folder``) and its parent, the run's or model's own folder, once empty."""
    path = _local_path(uri)
    if path.exists():
        shutil.rmtree(path)
    parent = path.parent
    if parent != folder and parent.is_relative_to(folder) and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()


def _prune(folder: Path) -> int:
    """Remove the empty folders under ``folder`` (and it, if then empty); return how many files are left.

    The folder is not removed outright: it is also where `mlflow server` keeps artifacts by default, and
    another store's runs may have theirs there.
    """
    if not folder.is_dir():
        return 0
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()
        return 0
    return sum(1 for p in folder.rglob("*") if not p.is_dir())


def clean(store: str, experiment: str, artifacts: Path) -> str:
    from mlflow import MlflowClient
    from mlflow.entities import LifecycleStage, ViewType

    db = Path(store[len(SQLITE) :])
    if not db.exists():
        return f"no {db.name}: no runs to remove"

    client = MlflowClient(tracking_uri=store)
    backend = client._tracking_client.store  # the SqlAlchemyStore `mlflow gc` would open for this URI
    experiment_ids = [
        e.experiment_id
        for e in _all(lambda t: client.search_experiments(view_type=ViewType.ALL, max_results=PAGE, page_token=t))
    ]
    runs = (
        _all(lambda t: client.search_runs(experiment_ids, run_view_type=ViewType.ALL, max_results=PAGE, page_token=t))
        if experiment_ids
        else []
    )
    demo = client.get_experiment_by_name(experiment)
    mains = {
        r.info.run_id
        for r in runs
        if demo is not None and r.info.experiment_id == demo.experiment_id and r.data.tags.get("recsys.role") == "main"
    }
    demo_runs = [r for r in runs if r.info.run_id in mains or r.data.tags.get("mlflow.parentRunId") in mains]

    # A demo run is kept when its artifacts, or a model it logged, lie outside the artifacts folder, or when
    # a registered model version (the user's act) refers to it or to a model it logged.
    models = (
        _all(lambda t: client.search_logged_models(experiment_ids, max_results=PAGE, page_token=t))
        if experiment_ids
        else []
    )
    versions = _all(lambda t: client.search_model_versions(max_results=PAGE, page_token=t))
    registered = {v.run_id for v in versions} | {getattr(v, "model_id", None) for v in versions}
    registered |= {m.source_run_id for m in models if m.model_id in registered}
    outside = {m.source_run_id for m in models if not _inside(m.artifact_location, artifacts)}
    removable = {
        r.info.run_id
        for r in demo_runs
        if _inside(r.info.artifact_uri, artifacts) and r.info.run_id not in registered and r.info.run_id not in outside
    }
    demo_models = [m for m in models if m.source_run_id in removable]

    for model in demo_models:  # before the runs: a logged model refers to its source run
        client.delete_logged_model(model.model_id)
        _delete_artifacts(model.artifact_location, artifacts)
        backend._hard_delete_logged_model(model.model_id)
    for run in demo_runs:
        if run.info.run_id not in removable:
            continue
        if run.info.lifecycle_stage != LifecycleStage.DELETED:
            client.delete_run(run.info.run_id)
        _delete_artifacts(run.info.artifact_uri, artifacts)
        backend._hard_delete_run(run.info.run_id)

    kept_demo = len(demo_runs) - len(removable)
    others = len(runs) - len(demo_runs)
    models_left = len(models) - len(demo_models)
    traces = (
        client.search_traces(locations=experiment_ids, max_results=1, include_spans=False) if experiment_ids else []
    )
    line = (
        f"removed {len(removable)} demo run(s) and {len(demo_models)} logged model(s) from {store}, "
        f"with their artifacts"
    )
    if kept_demo == 0 and others == 0 and models_left == 0 and not versions and not traces:
        backend.engine.dispose()
        for path in (
            db,
            db.with_name(db.name + "-journal"),
            db.with_name(db.name + "-wal"),
            db.with_name(db.name + "-shm"),
        ):
            path.unlink(missing_ok=True)
        left = _prune(artifacts)
        return (
            line
            + f"; nothing else was in it, so removed {db.name}"
            + (
                f" and {artifacts.name}/"
                if not left
                else f"; kept {left} file(s) in {artifacts.name}/ that no run of it owned (another store's?)"
            )
        )
    kept = [f"{others} other run(s)"] + [
        f"{n} {what}"
        for n, what in (
            (kept_demo, f"demo run(s) with artifacts outside {artifacts.name}/ or a registered model"),
            (models_left, "other logged model(s)"),
            (len(versions), "registered model version(s)"),
        )
        if n
    ]
    kept += ["its traces"] if traces else []
    return line + "; kept " + ", ".join(kept)


@click.command(help=__doc__.split("\n\n")[0])
@click.option("--store", required=True, help="The demo's tracking store, a local SQLite URI (sqlite:///mlruns.db).")
@click.option("--experiment", required=True, help="The demo's experiment (mlflow-recsys-demo).")
@click.option(
    "--artifacts",
    default="mlartifacts",
    show_default=True,
    type=click.Path(file_okay=False),
    help="The folder that holds the store's artifacts; only files inside it are deleted.",
)
def main(store: str, experiment: str, artifacts: str) -> None:
    if not store.startswith(SQLITE):
        raise click.BadParameter(f"expected a local SQLite URI ({SQLITE}...), found {store!r}", param_hint="--store")
    click.echo("make clean: " + clean(store, experiment, Path(artifacts).resolve()))


if __name__ == "__main__":
    main()
