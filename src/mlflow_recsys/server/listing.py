"""What the pages list: experiments with training runs, their runs grouped by split, model and seed, and the
comparison runs made from them.

Runs are read with ``search_runs`` one page at a time (:data:`PAGE_SIZE` runs a page), following MLflow's page
tokens, up to :data:`MAX_LISTED` runs; beyond that the page says how many more there are not shown and the user
narrows the selection with a compare URL or the command line.
"""

from __future__ import annotations

import html
import json
import re
import statistics
from dataclasses import dataclass, field

from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient

from mlflow_recsys.metrics import parse_metric_keys
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.naming import metric_key, mlflow_metric_name

#: Runs per ``search_runs`` call.
PAGE_SIZE = 1000
#: Most training runs one page lists.
MAX_LISTED = 10_000
#: Comparison runs listed per experiment page, newest first.
MAX_COMPARISONS = 25
#: The metric shown beside each run when no primary metric is chosen and the runs logged it.
DEFAULT_SHOWN_METRIC = "ndcg@100"

TRAIN_FILTER = f"tags.`{tags.ROLE}` = '{tags.ROLE_TRAIN}' and attributes.status = 'FINISHED'"
COMPARISON_FILTER = f"tags.`{tags.ROLE}` = '{tags.ROLE_COMPARISON}'"


@dataclass
class RunRow:
    run_id: str
    name: str
    seed: str
    value: float | None  # the shown metric's aggregate, as the run logged it
    experiment_id: str = ""


@dataclass
class ModelGroup:
    model: str
    config: str  # the recsys.config tag, shown so that two configurations of one model stay apart
    runs: list[RunRow] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        values = [r.value for r in self.runs if r.value is not None]
        return statistics.fmean(values) if values else None


@dataclass
class SplitGroup:
    digest: str
    dataset: str
    protocol: str
    models: list[ModelGroup] = field(default_factory=list)

    @property
    def n_runs(self) -> int:
        return sum(len(m.runs) for m in self.models)


@dataclass
class Listing:
    splits: list[SplitGroup]
    metric_keys: list[str]  # every metric key a listed run logged, sorted
    models: list[str]
    shown_metric: str | None
    n_runs: int
    truncated: bool  # more runs matched than MAX_LISTED


def training_runs(client: MlflowClient, experiment_ids: list[str], *, page_size: int = PAGE_SIZE,
                  limit: int = MAX_LISTED) -> tuple[list[Run], bool]:
    """FINISHED training runs of the experiments, page by page; and whether more than ``limit`` matched."""
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string=TRAIN_FILTER, run_view_type=ViewType.ACTIVE_ONLY,
                                  max_results=min(page_size, limit + 1 - len(runs)), page_token=token,
                                  order_by=["attributes.start_time ASC"])
        runs.extend(page)
        token = page.token
        if not token or len(runs) > limit:
            break
    return runs[:limit], len(runs) > limit


def _metric_keys(run: Run) -> list[str]:
    keys = []
    for name in run.data.metrics:
        try:
            key = metric_key(name)
            parse_metric_keys([key])
        except ValueError:
            continue  # timings, counts and training curves
        keys.append(key)
    return keys


def _protocol(run: Run, digest: str) -> tuple[str, str]:
    """(dataset, protocol) of the run's split, from the dataset input the training run logged."""
    dataset = run.data.tags.get(tags.DATASET, "")
    for entry in getattr(run.inputs, "dataset_inputs", None) or []:
        d = entry.dataset
        if digest and d.digest and digest.startswith(d.digest):
            name = d.name  # "<dataset> <protocol> seed <seed>", as tracking.training.split_dataset names it
            if dataset and name.startswith(dataset + " "):
                return dataset, name[len(dataset) + 1:]
            return dataset or name, name
    return dataset, "protocol not recorded"


def group_runs(runs: list[Run], *, shown_metric: str | None = None, truncated: bool = False) -> Listing:
    """Group runs by split (digest, dataset, protocol), then model and configuration, then seed."""
    keys = sorted({k for r in runs for k in _metric_keys(r)})
    if shown_metric is None or shown_metric not in keys:
        shown_metric = DEFAULT_SHOWN_METRIC if DEFAULT_SHOWN_METRIC in keys else (keys[0] if keys else None)
    name = mlflow_metric_name(shown_metric) if shown_metric else None
    splits: dict[str, SplitGroup] = {}
    models: dict[tuple[str, str, str], ModelGroup] = {}
    for r in runs:
        t = r.data.tags
        digest = t.get(tags.SPLIT_DIGEST, "")
        if digest not in splits:
            dataset, protocol = _protocol(r, digest)
            splits[digest] = SplitGroup(digest=digest, dataset=dataset, protocol=protocol)
        model, config = t.get(tags.MODEL, "(no recsys.model tag)"), t.get(tags.CONFIG, "")
        key = (digest, model, config)
        if key not in models:
            models[key] = ModelGroup(model=model, config=_config_text(config))
            splits[digest].models.append(models[key])
        models[key].runs.append(RunRow(run_id=r.info.run_id, name=r.info.run_name or r.info.run_id,
                                       seed=t.get(tags.SEED, tags.NO_SEED),
                                       value=r.data.metrics.get(name) if name else None,
                                       experiment_id=r.info.experiment_id))
    for split in splits.values():
        split.models.sort(key=lambda m: (m.model, m.config))
        for group in split.models:
            group.runs.sort(key=lambda row: tags.seed_order(row.seed))
    return Listing(splits=sorted(splits.values(), key=lambda s: (s.dataset, s.protocol, s.digest)),
                   metric_keys=keys, models=sorted({m.model for m in models.values()}), shown_metric=shown_metric,
                   n_runs=len(runs), truncated=truncated)


def _config_text(config: str) -> str:
    try:
        values = json.loads(config) if config else {}
    except json.JSONDecodeError:
        return config
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) if isinstance(values, dict) else config


def experiments_with_training_runs(client: MlflowClient) -> list[tuple[object, int | None]]:
    """Active experiments that hold at least one FINISHED training run, each with ``None`` (count not read)."""
    found, token = [], None
    while True:
        page = client.search_experiments(view_type=ViewType.ACTIVE_ONLY, max_results=PAGE_SIZE, page_token=token,
                                         order_by=["name ASC"])
        for exp in page:
            if client.search_runs([exp.experiment_id], filter_string=TRAIN_FILTER, max_results=1):
                found.append(exp)
        token = page.token
        if not token:
            return found


@dataclass
class ComparisonRow:
    run_id: str
    name: str
    status: str
    sentence: str
    start_time: int
    experiment_id: str = ""


def comparisons(client: MlflowClient, experiment_ids: list[str], *, limit: int = MAX_COMPARISONS) -> list[ComparisonRow]:
    """The experiments' comparison runs, newest first, each with its error, its ``recsys.result`` headline, or
    (runs made before that tag) the first result sentence of its notes."""
    runs = client.search_runs(experiment_ids, filter_string=COMPARISON_FILTER, max_results=limit,
                              order_by=["attributes.start_time DESC"])
    rows = []
    for r in runs:
        sentence = (r.data.tags.get(tags.ERROR) or r.data.tags.get(tags.RESULT)
                    or note_sentence(r.data.tags.get("mlflow.note.content", "")))
        rows.append(ComparisonRow(run_id=r.info.run_id, name=r.info.run_name or r.info.run_id, status=r.info.status,
                                  sentence=sentence, start_time=r.info.start_time,
                                  experiment_id=r.info.experiment_id))
    return rows


_MARKDOWN = re.compile(r"\\(.)|\*\*")


def note_sentence(note: str) -> str:
    """The first result sentence of a comparison run's notes, as plain text (markdown escapes undone)."""
    paragraphs = [p.strip() for p in note.split("\n\n") if p.strip()]
    for p in paragraphs:
        if p.startswith(("#", "|", "Primary metric")):
            continue
        return html.unescape(_MARKDOWN.sub(lambda m: m.group(1) or "", p))
    return ""
