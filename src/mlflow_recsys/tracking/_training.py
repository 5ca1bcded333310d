"""The ``split`` and ``train`` steps as MLflow runs."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd

from mlflow_recsys._validation import expected
from mlflow_recsys.data import LoadedSplit, SplitConfig, build_recsys_checkpoint, load_recsys_split
from mlflow_recsys.errors import is_system_failure, root_cause
from mlflow_recsys.evaluation import evaluate_recommender
from mlflow_recsys.metrics import ItemPopularity
from mlflow_recsys.models._device import device_type, ranking_device
from mlflow_recsys.models._train_config import TrainConfig
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._artifacts import write_evaluation_artifacts
from mlflow_recsys.tracking._context import check_step_run, entry_point_run, mark_training_experiment
from mlflow_recsys.tracking._downloads import download_file
from mlflow_recsys.tracking._logged_models import log_test_metrics
from mlflow_recsys.tracking._model_logging import log_recommender
from mlflow_recsys.tracking._redact import redact


def run_split(
    dataset: str | os.PathLike | pd.DataFrame,
    config: SplitConfig | None = None,
    *,
    columns: Mapping[str, str | None] | None = None,
    data_dir: str | os.PathLike | None = None,
) -> str:
    """Build a split of ``dataset`` (a registered name, a .csv/.parquet path or a frame) under ``config`` (default
    ``SplitConfig()``), log it as a ``split`` run and return the run id.

    See :func:`~mlflow_recsys.data.build_recsys_checkpoint` for the pipeline. The run's params are
    ``dataset`` and :meth:`SplitConfig.to_params <mlflow_recsys.data.SplitConfig.to_params>` (the manifest's
    ``parameters``); ``columns`` (a user's own log: which column holds user, item, value and timestamp) is
    logged as the param ``columns``, JSON. ``data_dir`` is the download cache.

    The checkpoint is logged as the artifact ``checkpoint.zip``; training runs
    take it as ``runs:/<run id>/checkpoint.zip``.

    Raises
    ------
    RunOwnershipError
        If the caller's active run or ``MLFLOW_RUN_ID`` names a run this step must not log under (see
        :func:`~mlflow_recsys.tracking._context.check_step_run`: inside the caller's ``mlflow.start_run()`` the
        split run is nested under it); checked first, before the split is built.
    ValueError
        If ``config`` is not a :class:`~mlflow_recsys.data.SplitConfig`, for an unknown dataset or bad ``columns``.
    """
    check_step_run()
    config = SplitConfig() if config is None else config
    if not isinstance(config, SplitConfig):
        raise ValueError(expected("config", "a SplitConfig", config))
    if data_dir is not None and not isinstance(data_dir, (str, os.PathLike)):
        raise ValueError(expected("data_dir", "a folder path or None", data_dir))
    with tempfile.TemporaryDirectory() as tmp:
        # Built before the run starts: bad input fails here and leaves no run behind.
        path = build_recsys_checkpoint(
            dataset=dataset,
            data_dir=data_dir,
            checkpoint_path=Path(tmp) / "checkpoint.zip",
            columns=columns,
            **config.to_params(),
        )
        split = load_recsys_split(path)
        manifest = split["manifest"]
        name = manifest["dataset"]["name"]
        # A frame is named by its content digest: its printed form would be a table cut at random.
        digest = f"{type(dataset).__name__}, interactions sha256 {manifest['dataset']['interactions_sha256']}"
        given = str(dataset) if isinstance(dataset, (str, os.PathLike)) else digest
        params = {"dataset": given, **manifest["parameters"]}
        if columns:
            params["columns"] = json.dumps(columns, sort_keys=True)
        run_name = f"split {name} {config.split_mode} seed {config.seed}"
        made_with = {tags.ROLE: tags.ROLE_SPLIT, tags.SPLIT_DIGEST: split["split_digest"], tags.DATASET: name}
        with entry_point_run(run_name, params=params, whole_params_in="manifest.json", tags=made_with) as run:
            mlflow.log_metrics({k: float(v) for k, v in manifest["counts"].items()})
            mlflow.log_artifact(str(path))
            mlflow.log_dict(manifest, "manifest.json")
            mlflow.log_input(split_dataset(manifest, split["split_digest"]), context="split")
            return run.info.run_id


def split_dataset(manifest: dict, split_digest: str):
    """The split as an MLflow dataset, so the UI links split, train and comparison runs by one digest."""
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.dataset_source import DatasetSource
    from mlflow.data.http_dataset_source import HTTPDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    params = manifest["parameters"]
    origin = manifest["dataset"]
    name = f"{origin['name']} {params['split_mode']} seed {params['seed']}"
    source: DatasetSource
    if origin.get("url"):
        source = HTTPDatasetSource(origin["url"])
    else:
        # A user's own file or frame has no address; its content digest identifies it.
        source = CodeDatasetSource(
            tags={k: str(v) for k, v in origin.items() if k in ("source", "file_name", "file_sha256")}
            | {"interactions_sha256": origin["interactions_sha256"]}
        )
    # MLflow stores at most 36 characters of a digest. MetaDataset leaves the abstract `profile` unimplemented,
    # but Dataset is no ABC, so it instantiates (MLflow itself builds MetaDatasets so).
    return MetaDataset(source=source, name=name, digest=split_digest[:36])  # type: ignore[abstract]


def resolve_checkpoint(checkpoint: str, dst: str) -> Path:
    """A local path to the checkpoint: the path itself, or a download of an artifact URI into ``dst``."""
    local = Path(checkpoint)
    if local.is_file():
        return local
    # A proxied artifact's URI (mlflow-artifacts:/<experiment>/<run>/artifacts/...) has a single slash.
    if "://" in checkpoint or checkpoint.startswith(("runs:/", "mlflow-artifacts:/")):
        try:
            local = download_file(checkpoint, dst)
        except Exception as exc:  # MLflow raises several types for a missing artifact
            if is_system_failure(root_cause(exc)):  # a full disk here is no missing checkpoint
                raise
            # The download error repeats the URI, so the whole message is redacted, not just our part.
            raise FileNotFoundError(redact(f"checkpoint: could not download {checkpoint!r} ({exc})")) from None
        if not zipfile.is_zipfile(local):  # named by its URI, not by the temporary copy a message would show
            raise ValueError(redact(f"checkpoint: expected a checkpoint zip at {checkpoint!r}, found another file"))
        return local
    raise FileNotFoundError(
        redact(
            f"checkpoint: expected an existing checkpoint zip or an artifact URI (runs:/<id>/checkpoint.zip), "
            f"found {checkpoint!r}"
        )
    )


def _log_epoch(epoch: int, loss: float, score: float | None) -> None:
    metrics = {"train_loss": loss} if score is None else {"train_loss": loss, "val_ndcg_at_100": score}
    mlflow.log_metrics(metrics, step=epoch)


def _validation_ndcg(split: LoadedSplit):
    """nDCG@100 on the validation users, which ELSA's early stopping watches (None without them)."""
    from mlflow_recsys.metrics import NDCG

    if split["val_source_matrix"].shape[0] == 0:
        return None

    def score(model) -> float:
        return evaluate_recommender(
            model,
            source=split["val_source_matrix"],
            targets=split["val_target_matrix"],
            metrics=[NDCG(100)],
            sample_ids=split["val_eval_user_ids"],
        ).metrics["ndcg@100"]

    return score


def configuration_tag(config) -> str:
    """The ``recsys.config`` tag of a model's config (``None``: no hyper-parameters): every hyper-parameter but
    the seed (runs are pooled over it), the device and the precision of its matrix products (the same model on other
    hardware: the ``recsys.device`` tag tells them apart), as sorted JSON."""
    hyper = dataclasses.asdict(config) if config is not None else {}
    hardware = ("seed", "device", "matmul_precision")
    return json.dumps({k: v for k, v in hyper.items() if k not in hardware}, sort_keys=True)


def run_train(checkpoint: str | os.PathLike, config: TrainConfig, *, log_model: bool = True) -> str:
    """Fit the model ``config`` names on the checkpoint's training users, evaluate it on the test users, log a
    ``train`` run; return its id.

    Logged: params (:meth:`TrainConfig.to_params <mlflow_recsys.models.TrainConfig.to_params>`: only what the
    model uses, and the checkpoint with any credentials redacted), the ``recsys.`` tags, aggregate test metrics
    (MLflow-safe names, e.g. ``ndcg_at_100``), the training loss per epoch (ELSA), ``per_user.parquet`` +
    ``evaluation.json``, and the model unless ``log_model`` is False; with ``config.register``, the model becomes the
    next version of that registered model (its source run this run), after everything else is logged.

    Raises
    ------
    RunOwnershipError
        If the caller's active run or ``MLFLOW_RUN_ID`` names a run this step must not log under (see
        :func:`~mlflow_recsys.tracking._context.check_step_run`: inside the caller's ``mlflow.start_run()`` the
        train run is nested under it); checked first, before anything is read or written.
    FileNotFoundError
        If the checkpoint cannot be found.
    ValueError
        If ``config`` is not a :class:`~mlflow_recsys.models.TrainConfig`, it asks for early stopping on a
        split without validation users, or to register a model that ``log_model=False`` does not log.
    """
    check_step_run()
    if not isinstance(config, TrainConfig):
        raise ValueError(expected("config", "a TrainConfig", config))
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise ValueError(expected("checkpoint", "a checkpoint zip path or an artifact URI", checkpoint))
    checkpoint = os.fspath(checkpoint)
    if not isinstance(log_model, bool):
        raise ValueError(expected("log_model", "True or False", log_model))
    if config.register is not None and not log_model:
        raise ValueError(expected("log_model", f"True to register the model as {config.register!r}", log_model))
    spec = config.spec
    unfitted: Any = config.build()  # each registered model has fit; Recommender, the common base, does not
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-train-") as tmp:
        split = load_recsys_split(resolve_checkpoint(checkpoint, tmp))
        validate = _validation_ndcg(split) if spec.epochs else None
        if spec.epochs and validate is None and config.hyperparameters.get("patience") is not None:
            raise ValueError(
                "patience: early stopping needs validation rows, and this split has none (val_frac=0, or no "
                "validation user kept enough interactions); drop --patience or rebuild the split"
            )
        seed = str(unfitted.config.seed) if spec.seeded else tags.NO_SEED
        run_name = f"{config.model} seed {seed}" if spec.seeded else config.model
        params = {**config.to_params(), "checkpoint": checkpoint}
        made_with = _train_tags(config.model, unfitted.config, seed, split)
        with entry_point_run(run_name, params=params, whole_params_in="evaluation.json", tags=made_with) as run:
            mark_training_experiment(run.info.experiment_id)
            started = time.perf_counter()
            if spec.epochs:
                fitted = unfitted.fit(split["x_train"], on_epoch_end=_log_epoch, validate=validate)
                mlflow.log_metric("best_epoch", fitted.best_epoch)
            else:
                fitted = unfitted.fit(split["x_train"])
            fit_seconds = time.perf_counter() - started
            test_ids = split["test_eval_user_ids"]
            result = evaluate_recommender(
                fitted,
                source=split["test_source_matrix"],
                targets=split["test_target_matrix"],
                metrics=config.metric_objects(),
                sample_ids=test_ids,
                item_popularity=ItemPopularity.from_interactions(split["x_train"]),
                device=ranking_device(getattr(fitted.config, "device", None)),
            )
            # The model first: its id is known when the test metrics are logged (log_model links metrics too).
            logged = log_recommender(fitted, split["item_ids"], eval_user_ids=test_ids) if log_model else None
            model_id = logged.model_id if logged is not None else None
            log_evaluation(result, split, Path(tmp) / "evaluation", model_id=model_id)
            if logged is not None and config.register is not None:
                mlflow.register_model(logged.model_uri, config.register)
            mlflow.log_metric("fit_seconds", fit_seconds)
            return run.info.run_id


def _train_tags(model: str, config, seed_tag: str, split: LoadedSplit, config_tag: str | None = None) -> dict[str, str]:
    """The train run's ``recsys.`` tags; ``config_tag`` defaults to that of ``config``."""
    device = getattr(config, "device", None)
    return {
        tags.ROLE: tags.ROLE_TRAIN,
        tags.MODEL: model,
        **({} if config_tag is not None else {tags.DEVICE: device_type(device or "cpu")}),
        tags.CONFIG: configuration_tag(config) if config_tag is None else config_tag,
        tags.SEED: seed_tag,
        tags.SPLIT_DIGEST: split["split_digest"],
        tags.DATASET: split["manifest"]["dataset"]["name"],
    }


def log_evaluation(result, split: LoadedSplit, out_dir: Path, *, model_id: str | None = None) -> None:
    """Log a test-set result to the active run as every ``train``-role run has it, trained or imported."""
    mlflow.set_tag(tags.TARGETS_FINGERPRINT, result.targets_fingerprint)
    dataset = split_dataset(split["manifest"], split["split_digest"])
    mlflow.log_input(dataset, context="training")
    intervals = log_test_metrics(result, dataset=dataset, model_id=model_id)
    mlflow.log_metrics({"n_eval_users": result.n_units, "n_eval_rows": result.n_samples})
    write_evaluation_artifacts(result, out_dir, split_digest=split["split_digest"], level_intervals=intervals)
    mlflow.log_artifacts(str(out_dir))
