"""What exactly a comparison compared: dataset, preprocessing, split, and each model's runs and settings.

A reviewer's first questions are which data, which split and which trained runs stand behind a number. The
answers live in the split run's ``manifest.json`` and in the training runs' tags; this module gathers them
once, as plain data, and writes them as markdown and HTML for every report surface.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import mlflow
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from mlflow_recsys.tracking import tags

#: Manifest fields that describe the split; the member list and digests only matter to the reader of the zip.
#: A checkpoint param naming a split run's artifact: runs:/<run id>/checkpoint.zip.
_RUNS_URI = re.compile(r"^runs:/([^/]+)/")
_MANIFEST_FIELDS = ("dataset", "parameters", "counts", "split_digest")


def collect_provenance(
    runs: list[Run], groups: dict[str, dict[str, str]], representative: dict[str, str], chosen_seed: str | None
) -> dict[str, Any]:
    """Provenance of a comparison as JSON-ready data.

    Parameters
    ----------
    runs:
        The training runs compared.
    groups:
        Model -> seed tag -> run id.
    representative:
        Model -> the seed tag of the run in the paired table.
    chosen_seed:
        The seed asked for (``--seed``), or ``None`` when each model's lowest seed stands for it.

    Returns
    -------
    dict
        ``split``: the split run id and its manifest (dataset, parameters, counts, digest), or ``None`` when no
        split run with the compared runs' split digest is found in their experiments; ``models``: per model its
        hyper-parameters (the ``recsys.config`` tag), its runs by seed with their experiment ids, the seed in the
        paired table and why.
    """
    by_id = {r.info.run_id: r for r in runs}
    digest = runs[0].data.tags.get(tags.SPLIT_DIGEST)
    models = {}
    for model, seeds in groups.items():
        seed = representative[model]
        if len(seeds) == 1:
            why = "its only run" if seed == tags.NO_SEED else f"its only seed ({seed})"
        elif chosen_seed is not None:
            why = f"seed {seed}, chosen for the report (--seed {chosen_seed})"
        else:
            why = f"seed {seed}, the lowest of {', '.join(sorted(seeds, key=tags.seed_order))}"
        first = by_id[seeds[seed]]
        models[model] = {
            "hyperparameters": json.loads(first.data.tags.get(tags.CONFIG, "{}")),
            "runs": {s: {"run_id": rid, "experiment_id": by_id[rid].info.experiment_id} for s, rid in seeds.items()},
            "paired_table_seed": seed,
            "why": why,
        }
    return {"split": _split(runs, digest), "models": models}


def _split(runs: list[Run], digest: str | None) -> dict[str, Any] | None:
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
    """The split run the compared runs were trained on: the one their ``checkpoint`` param names, when it is a
    split run with this digest; else the earliest split run with the digest in their experiments (a later split
    of the same rows, under another name, has the same digest but another dataset description)."""
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


def _count(counts: dict, key: str) -> str:
    value = counts.get(key)
    return f"{value:,}" if isinstance(value, int) else "?"


def provenance_lines(provenance: dict[str, Any]) -> list[str]:
    """The data and split as plain sentences (no markup; callers escape)."""
    return _split_lines(provenance["split"])


def _split_lines(split: dict[str, Any] | None) -> list[str]:
    """Plain sentences about the data and the split (no markup; callers escape)."""
    if split is None:
        return ["Split: the compared runs carry no split digest."]
    if "parameters" not in split:
        where = (
            f"split run {split['run_id']} has no manifest.json"
            if split.get("run_id")
            else ("no split run with this digest is in the compared runs' experiments")
        )
        return [f"Split digest {split['split_digest']}; {where}."]
    data, params, counts = split.get("dataset", {}), split["parameters"], split.get("counts", {})
    digests = ", ".join(
        f"{k.replace('_sha256', '')} sha256 {data[k]}"
        for k in ("archive_sha256", "file_sha256", "interactions_sha256")
        if data.get(k)
    )
    source = data.get("url") or data.get("file_name") or data.get("source", "")
    threshold = params.get("min_rating")
    kept = (
        "every interaction kept as a positive" if threshold is None else f"ratings >= {threshold:g} kept as positives"
    )
    lines = [
        f"Dataset: {data.get('name', '?')} ({source}; {digests}).",
        f"Preprocessing: {kept}; users with at least {params.get('min_user_interactions')} and items with at least "
        f"{params.get('min_item_interactions')} interactions ({counts.get('kcore_iterations', '?')} k-core passes): "
        f"{_count(counts, 'n_raw_interactions')} raw interactions, {_count(counts, 'n_users')} users and "
        f"{_count(counts, 'n_items_after_pruning')} items after pruning.",
        f"Split: {params.get('split_mode')}, seed {params.get('seed')}, digest {split.get('split_digest')} "
        f"(split run {split['run_id']}).",
        f"Users per stage: {_count(counts, 'n_train_users')} training users x {_count(counts, 'n_items')} items; "
        f"{_count(counts, 'n_val_users')} validation users ({_count(counts, 'n_val_users_dropped')} dropped); "
        f"{_count(counts, 'n_test_users')} test users ({_count(counts, 'n_test_users_dropped')} dropped), "
        f"{_count(counts, 'n_test_rows')} test rows.",
    ]
    return lines


def provenance_markdown(provenance: dict[str, Any]) -> str:
    """A ``## What was compared`` section: data and split sentences, then one table row per model."""
    from mlflow_recsys.report.escaping import escape_markdown

    lines = ["## What was compared", ""]
    lines += [f"- {escape_markdown(line)}" for line in _split_lines(provenance["split"])]
    lines += [
        "",
        "| model | in the paired table | runs compared (seed: run id) | hyper-parameters |",
        "|---|---|---|---|",
    ]
    for model, info in provenance["models"].items():
        runs = ", ".join(f"{s}: {r['run_id']}" for s, r in info["runs"].items())
        params = json.dumps(info["hyperparameters"], sort_keys=True)
        lines.append(
            f"| {escape_markdown(model)} | {escape_markdown(info['why'])} | {escape_markdown(runs)} | "
            f"{escape_markdown(params)} |"
        )
    return "\n".join(lines)


def provenance_html(provenance: dict[str, Any]) -> str:
    """The same section as HTML; each run id links to its page in the MLflow UI (``/#/experiments/<id>/runs/<run>``).

    The links open in the whole window (``target="_top"``), since the UI shows an artifact inside a frame.
    """

    def link(run: dict[str, str]) -> str:
        href = f"/#/experiments/{html.escape(run['experiment_id'])}/runs/{html.escape(run['run_id'])}"
        return f'<a href="{href}" target="_top">{html.escape(run["run_id"])}</a>'

    parts = ["<h2>What was compared</h2>", "<ul>"]
    parts += [f"<li>{html.escape(line)}</li>" for line in _split_lines(provenance["split"])]
    parts += [
        "</ul>",
        '<div class="wide"><table><tr><th>model</th><th>in the paired table</th>'
        "<th>runs compared (seed: run)</th><th>hyper-parameters</th></tr>",
    ]
    for model, info in provenance["models"].items():
        runs = ", ".join(f"{html.escape(s)}: {link(r)}" for s, r in info["runs"].items())
        params = html.escape(json.dumps(info["hyperparameters"], sort_keys=True))
        parts.append(
            f"<tr><td>{html.escape(model)}</td><td>{html.escape(info['why'])}</td><td>{runs}</td><td>{params}</td></tr>"
        )
    parts.append("</table></div>")
    return "\n".join(parts)
