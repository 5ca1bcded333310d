"""What a comparison compared (:func:`~mlflow_recsys.tracking._provenance.collect_provenance`'s data) in words: plain
sentences, a markdown section and an HTML section."""

from __future__ import annotations

import html
import json
from typing import Any

from mlflow_recsys.report._escaping import escape_markdown


def _count(counts: dict, key: str) -> str:
    value = counts.get(key)
    return f"{value:,}" if isinstance(value, int) else "?"


def provenance_lines(provenance: dict[str, Any]) -> list[str]:
    """The data and split as plain sentences (no markup; callers escape)."""
    split = provenance["split"]
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
    return [
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


def provenance_markdown(provenance: dict[str, Any]) -> str:
    """A ``## What was compared`` section: data and split sentences, then one table row per model."""
    lines = ["## What was compared", ""]
    lines += [f"- {escape_markdown(line)}" for line in provenance_lines(provenance)]
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
    parts += [f"<li>{html.escape(line)}</li>" for line in provenance_lines(provenance)]
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
