"""Simulated evaluation results, for tests that need per-user values but no trained model: built in memory, or
written as the artifacts and tags of a training run as `mlflow-recsys train` logs them."""

import json
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from mlflow_recsys.evaluation import EvaluationResult


def result(values, ids=None, fingerprint="fp") -> EvaluationResult:
    """An EvaluationResult of per-user ``values``: ``{metric: array}``, or one array for metric ``"m"``; sample ids
    ``ids``, or 0..n-1 when None."""
    if not isinstance(values, Mapping):
        values = {"m": values}
    return EvaluationResult.from_per_user(
        values, sample_ids=None if ids is None else np.asarray(ids), targets_fingerprint=fingerprint
    )


def paired_results(base: np.ndarray, cand: np.ndarray, keys=("m",)) -> tuple[EvaluationResult, EvaluationResult]:
    """Two results over the same users from arrays of shape ``(n_users,)`` or ``(n_users, len(keys))``."""
    base, cand = (v.reshape(len(v), -1) for v in (base, cand))
    return tuple(result({k: v[:, i] for i, k in enumerate(keys)}, fingerprint="sim") for v in (base, cand))


def exchangeable_pair(rng: np.random.Generator, n: int, tie_rate: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """Scores of two interchangeable models, like MRR or recall: skewed towards 0 with a long right tail, equal for
    about ``tie_rate`` of the users; the label of each user's pair is a coin flip."""
    a = rng.beta(0.4, 2.0, n)
    b = rng.beta(0.4, 2.0, n)
    tied = rng.random(n) < tie_rate
    b[tied] = a[tied]
    return a, b


def ranking_result(n_users: int, shift: float, rng_seed: int) -> EvaluationResult:
    """nDCG@100 and recall@20 per user: beta(2, 5) and beta(2, 4) draws moved up by ``shift``, clipped to [0, 1];
    the targets fingerprint is ``"f" * 64``."""
    rng = np.random.default_rng(rng_seed)
    ndcg = np.clip(rng.beta(2, 5, n_users) + shift, 0, 1)
    recall = np.clip(rng.beta(2, 4, n_users) + shift, 0, 1)
    return result({"ndcg@100": ndcg, "recall@20": recall}, fingerprint="f" * 64)


def log_training_run(
    client: MlflowClient,
    experiment_id: str,
    folder: Path,
    *,
    model: str,
    seed: str | None,
    config: dict | None = None,
    digest: str = "d" * 64,
    shift: float = 0.0,
    n_users: int = 300,
    status: str = "FINISHED",
    name: str | None = None,
    extra_tags: dict | None = None,
    rng_seed: int = 0,
) -> str:
    """One FINISHED (or ``status``) training run tagged as `mlflow-recsys train` tags it, with the per-user
    artifacts of ``ranking_result(n_users, shift, rng_seed)`` and their means as metrics; its run id."""
    from mlflow_recsys.tracking._artifacts import write_evaluation_artifacts

    evaluated = ranking_result(n_users, shift, rng_seed)
    out = folder / f"{model}-{seed}-{digest[:4]}-{rng_seed}-{time.monotonic_ns()}"
    write_evaluation_artifacts(evaluated, out, split_digest=digest)
    tags = {
        "recsys.role": "train",
        "recsys.model": model,
        "recsys.seed": seed or "none",
        "recsys.split_digest": digest,
        "recsys.targets_fingerprint": "f" * 64,
        "recsys.dataset": "synthetic",
        "recsys.config": json.dumps({"size": 1} if config is None else config, sort_keys=True),
        "mlflow.runName": name or (f"{model} seed {seed}" if seed else model),
        **(extra_tags or {}),
    }
    rid = client.create_run(experiment_id, tags=tags).info.run_id
    now = int(time.time() * 1000)
    metrics = [Metric(k.replace("@", "_at_"), v, now, 0) for k, v in evaluated.metrics.items()]
    client.log_batch(rid, metrics=metrics)
    client.log_artifacts(rid, str(out))
    if status != "RUNNING":
        client.set_terminated(rid, status)
    return rid
