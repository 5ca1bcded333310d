"""Prepare a Kubernetes launch of the `train` entry point, and rehearse it locally.

The how-to "Remote project backends" (docs/howto/remote-backends.md) as one script. A real launch
needs Docker, an image registry and a cluster; this script needs none of them. It writes the backend
configuration and the Job template the how-to describes, checks that they hold what MLflow's
Kubernetes backend reads, and then runs the same `split` and `train` entry points of the project's
MLproject with the local backend, with the parameters a remote job would get. It logs to the store
MLFLOW_TRACKING_URI names, or to a SQLite file in a temporary folder when it is unset. Run it with
``.venv/bin/python examples/howto_remote_backend.py``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import mlflow
import mlflow.projects
import yaml

PROJECT = Path(__file__).resolve().parents[1]

JOB_TEMPLATE = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "{replaced with MLflow Project name}", "namespace": "recsys"},
    "spec": {
        "ttlSecondsAfterFinished": 3600,
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "{replaced with MLflow Project name}",
                        "image": "{replaced with URI of Docker image created during Project execution}",
                        "command": ["{replaced with MLflow Project entry point command}"],
                        "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}},
                    }
                ],
            }
        },
    },
}


def write_kubernetes_config(folder: Path) -> Path:
    """The two files `mlflow run --backend kubernetes --backend-config <json>` reads."""
    template = folder / "kubernetes_job_template.yaml"
    template.write_text(yaml.safe_dump(JOB_TEMPLATE, sort_keys=False))
    config = folder / "kubernetes_config.json"
    config.write_text(
        json.dumps(
            {
                "kube-context": "gpu-cluster",
                "repository-uri": "registry.example.com/mlflow-recsys",
                "kube-job-template-path": str(template),
            },
            indent=2,
        )
    )
    return config


def check_kubernetes_config(config_path: Path) -> None:
    """What MLflow's Kubernetes backend requires of the files, checked before anything is built or pushed."""
    config = json.loads(config_path.read_text())
    missing = [key for key in ("repository-uri", "kube-job-template-path") if key not in config]
    if missing:
        raise ValueError(f"{config_path}: expected keys {missing}")
    job = yaml.safe_load(Path(config["kube-job-template-path"]).read_text())
    if job.get("kind") != "Job" or "namespace" not in job.get("metadata", {}):
        raise ValueError("job template: expected a Kubernetes Job with metadata.namespace")
    if not job["spec"]["template"]["spec"]["containers"]:
        raise ValueError("job template: expected one container, which MLflow fills in")
    print(
        f"{config_path.name}: registry {config['repository-uri']}, "
        f"template {Path(config['kube-job-template-path']).name}, "
        f"namespace {job['metadata']['namespace']}"
    )


def rehearse(experiment: str) -> None:
    """The steps a cluster would run, through the same entry points, on this machine."""
    split = mlflow.projects.run(
        str(PROJECT),
        entry_point="split",
        parameters={"seed": 42},
        env_manager="local",
        experiment_name=experiment,
        backend="local",
        synchronous=True,
    )
    train = mlflow.projects.run(
        str(PROJECT),
        entry_point="train",
        env_manager="local",
        experiment_name=experiment,
        backend="local",
        parameters={
            "checkpoint": f"runs:/{split.run_id}/checkpoint.zip",
            "model": "ELSA",
            "seed": 0,
            "latent_dim": 16,
            "epochs": 3,
            "device": "cpu",
        },
        synchronous=True,
    )
    run = mlflow.get_run(train.run_id)
    print(
        f"local rehearsal of `train`: run {train.run_id} {run.info.status}, "
        f"model={run.data.tags['recsys.model']} seed={run.data.tags['recsys.seed']}, "
        f"ndcg@100={run.data.metrics['ndcg_at_100']:.4f}"
    )


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory(prefix="howto-remote-") as tmp:
        if not os.environ.get("MLFLOW_TRACKING_URI"):
            # The entry points run as child processes: they find the store through the environment.
            os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp}/mlruns.db"
        # The entry points' commands start `python`: make it this interpreter, as `make demo` does.
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        check_kubernetes_config(write_kubernetes_config(Path(tmp)))
        rehearse("remote-rehearsal")
