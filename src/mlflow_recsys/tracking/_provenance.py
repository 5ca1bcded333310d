"""What exactly a comparison compared: dataset, preprocessing, split, and each model's runs and settings.

A reviewer's first questions are which data, which split and which trained runs stand behind a number. The
answers live in the split run's ``manifest.json`` and in the training runs' tags; this module gathers them
once, as plain data; :mod:`mlflow_recsys.report._provenance` writes them for every report surface.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mlflow
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from mlflow_recsys.tracking import _tags as tags

#: A checkpoint param naming a split run's artifact: runs:/<run id>/checkpoint.zip.
_RUNS_URI = re.compile(r"^runs:/([^/]+)/")
#: Manifest fields that describe the split; the member list and digests only matter to the reader of the zip.
_MANIFEST_FIELDS = ("dataset", "parameters", "counts", "split_digest")


def collect_provenance(
    runs: list[Run],
    groups: dict[str, dict[str, str]],
    representative_seeds: dict[str, str],
    representative_seed: str | None,
) -> dict[str, Any]:
    """Provenance of a comparison of ``runs`` (``groups``: model -> seed tag -> run id) as JSON-ready data."""
    by_id = {r.info.run_id: r for r in runs}
    digest = runs[0].data.tags.get(tags.SPLIT_DIGEST)
    models = {}
    for model, seeds in groups.items():
        seed = representative_seeds[model]
        if len(seeds) == 1:
            why = "its only run" if seed == tags.NO_SEED else f"its only seed ({seed})"
        elif representative_seed is not None:
            why = f"seed {seed}, chosen for the report (--representative-seed {representative_seed})"
        else:
            why = f"seed {seed}, the lowest of {', '.join(sorted(seeds, key=tags.seed_order))}"
        first = by_id[seeds[seed]]
        models[model] = {
            "hyperparameters": json.loads(first.data.tags.get(tags.CONFIG, "{}")),
            "runs": {s: {"run_id": rid, "experiment_id": by_id[rid].info.experiment_id} for s, rid in seeds.items()},
            "representative_seed": seed,
            "why": why,
        }
    return {"split": _split(runs, digest), "models": models}


def _split(runs: list[Run], digest: str | None) -> dict[str, Any] | None:
    """The split run's id and manifest fields; only what is known when it or its manifest cannot be read."""
    if not digest:
        return None
    run_id = _split_run_id(runs, digest)
    if run_id is None:
        return {"run_id": None, "split_digest": digest}
    try:
        manifest = mlflow.artifacts.load_dict(f"runs:/{run_id}/manifest.json")
    except (MlflowException, OSError, ValueError):
        return {"run_id": run_id, "split_digest": digest}
    return {"run_id": run_id, **{k: manifest[k] for k in _MANIFEST_FIELDS if k in manifest}}


def _split_run_id(runs: list[Run], digest: str) -> str | None:
    """The split run their ``checkpoint`` param names, when it has this digest; else the earliest split run with
    it in their experiments (a later split of the same rows has the digest but another dataset description)."""
    client = MlflowClient()
    named = {m.group(1) for r in runs if (m := _RUNS_URI.match(r.data.params.get("checkpoint", "")))}
    for run_id in sorted(named):
        try:
            found = client.get_run(run_id).data.tags
        except MlflowException:
            continue
        if found.get(tags.ROLE) == tags.ROLE_SPLIT and found.get(tags.SPLIT_DIGEST) == digest:
            return run_id
    experiments = sorted({r.info.experiment_id for r in runs})
    query = f"tags.`{tags.ROLE}` = '{tags.ROLE_SPLIT}' and tags.`{tags.SPLIT_DIGEST}` = '{digest}'"
    earliest = client.search_runs(
        experiments, filter_string=query, max_results=1, order_by=["attributes.start_time ASC"]
    )
    return earliest[0].info.run_id if earliest else None
