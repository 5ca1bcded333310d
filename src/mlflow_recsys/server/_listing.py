"""What the pages list: experiments with training runs, their runs grouped by split, model and seed, and the
comparison runs made from them.

Training runs are those ``compare --experiment`` takes (:func:`~mlflow_recsys.tracking._runs.search_training_runs`),
read page by page up to :data:`MAX_LISTED`; beyond that the page says they are not all shown and the user narrows
the selection with a compare URL or the command line.
"""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE

from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._naming import logged_metric_keys, mlflow_metric_name
from mlflow_recsys.tracking._runs import FINISHED, RUNNING, search_all, training_runs_filter

#: Most training runs one page lists.
MAX_LISTED = 10_000
#: Comparison runs listed per experiment page, newest first.
MAX_COMPARISONS = 25
#: The metric shown beside each run when no primary metric is chosen and the runs logged it.
DEFAULT_SHOWN_METRIC = "ndcg@100"

#: The runs a page lists: those an experiment selection takes (tracking.runs decides, for the command line too).
TRAIN_FILTER = training_runs_filter()
COMPARISON_FILTER = f"tags.`{tags.ROLE}` = '{tags.ROLE_COMPARISON}'"


@dataclass
class RunRow:
    run_id: str
    name: str
    seed: str
    value: float | None  # the shown metric's aggregate, as the run logged it
    experiment_id: str = ""
    # every listed metric key's aggregate, for the page's primary-metric choice to show without a round trip
    values: dict[str, float] = field(default_factory=dict)


@dataclass
class ModelGroup:
    model: str
    config: str  # the recsys.config tag, shown so that two configurations of one model stay apart
    runs: list[RunRow] = field(default_factory=list)
    config_json: str = ""  # canonical JSON of the configuration ("" when the tag is not a JSON object)
    candidate: str = ""  # the name a comparison of all the split's configurations of this model gives it

    @property
    def mean(self) -> float | None:
        values = [r.value for r in self.runs if r.value is not None]
        return statistics.fmean(values) if values else None

    @property
    def n_values(self) -> int:
        """Runs that logged the shown metric: what :attr:`mean` is over."""
        return sum(r.value is not None for r in self.runs)


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


def metric_keys_of(runs: list[Run]) -> list[str]:
    """Every metric key (``ndcg@100``) any of ``runs`` logged, sorted."""
    return logged_metric_keys({name for r in runs for name in r.data.metrics})  # no timings, counts, curves


def _finite_values(run: Run) -> dict[str, float]:
    values = {k: run.data.metrics[mlflow_metric_name(k)] for k in logged_metric_keys(run.data.metrics)}
    return {k: v for k, v in values.items() if math.isfinite(v)}  # NaN is not JSON


def _protocol(run: Run, digest: str) -> tuple[str, str]:
    """(dataset, protocol) of the run's split, from the dataset input the training run logged."""
    dataset = run.data.tags.get(tags.DATASET, "")
    for d in (entry.dataset for entry in (run.inputs.dataset_inputs if run.inputs else [])):
        if digest and d.digest and digest.startswith(d.digest):
            name = d.name  # "<dataset> <protocol> seed <seed>", as tracking.training.split_dataset names it
            if dataset and name.startswith(dataset + " "):
                return dataset, name[len(dataset) + 1 :]
            return dataset or name, name
    return dataset, "protocol not recorded"


def group_runs(runs: list[Run], *, shown_metric: str | None = None, truncated: bool = False) -> Listing:
    """Group runs by split (digest, dataset, protocol), then model and configuration, then seed."""
    keys = metric_keys_of(runs)
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
            try:
                values: Any = json.loads(config) if config else {}
            except json.JSONDecodeError:
                values = None
            ok = isinstance(values, dict)  # else the tag is shown as it is, and names no candidate
            text = ", ".join(f"{k}={v}" for k, v in sorted(values.items())) if ok else config
            canonical = json.dumps(values, sort_keys=True) if ok else ""
            models[key] = ModelGroup(model=model, config=text, config_json=canonical)
            splits[digest].models.append(models[key])
        models[key].runs.append(
            RunRow(
                run_id=r.info.run_id,
                name=r.info.run_name or r.info.run_id,
                seed=t.get(tags.SEED, tags.NO_SEED),
                value=r.data.metrics.get(name) if name else None,
                experiment_id=r.info.experiment_id,
                values=_finite_values(r),
            )
        )
    for split in splits.values():
        _name_candidates(split.models)
        split.models.sort(key=lambda m: (m.model, m.config))
        for group in split.models:
            group.runs.sort(key=lambda row: tags.seed_order(row.seed))
    return Listing(
        splits=sorted(splits.values(), key=lambda s: (s.dataset, s.protocol, s.digest)),
        metric_keys=keys,
        models=sorted({m.candidate for m in models.values()} | {m.model for m in models.values()}),
        shown_metric=shown_metric,
        n_runs=len(runs),
        truncated=truncated,
    )


def _name_candidates(groups: list[ModelGroup]) -> None:
    """Each group's candidate name, as :func:`~mlflow_recsys.tracking._candidates.configuration_names` gives it
    when all of a model's configurations in the split are compared (the plain model name when it has one)."""
    from mlflow_recsys.errors import RunSelectionError
    from mlflow_recsys.tracking._candidates import configuration_names

    by_model: dict[str, list[ModelGroup]] = {}
    for group in groups:
        group.candidate = group.model
        if group.config_json:
            by_model.setdefault(group.model, []).append(group)
    for model, members in by_model.items():
        try:
            names = configuration_names(model, {g.config_json: json.loads(g.config_json) for g in members})
        except RunSelectionError:
            continue  # configurations no name tells apart: Compare says so
        for group in members:
            group.candidate = names[group.config_json][0]


def _holding(
    client: MlflowClient, experiment_ids: list[str], filter_string: str, view_type=ViewType.ACTIVE_ONLY, page_size=200
) -> set[str]:
    """Which of the experiments hold a run matching the filter: each query asks across every experiment not yet
    found, so experiments without such runs cost nothing beyond the last (empty) query."""
    left, found = list(experiment_ids), set()
    while left:
        page = client.search_runs(left, filter_string=filter_string, run_view_type=view_type, max_results=page_size)
        new = {r.info.experiment_id for r in page}
        found |= new
        if not page.token:
            return found
        left = [e for e in left if e not in new]
    return found


def experiments_with_training_runs(client: MlflowClient) -> list:
    """Active experiments that hold (or, when tagged, held) a FINISHED training run, by name: those tagged
    :data:`~mlflow_recsys.tracking._tags.HAS_TRAINING_RUNS` (training runs tag theirs) with one paged
    ``search_experiments``, the others (runs logged by hand) with a few ``search_runs`` across all of them at once."""

    def experiments(filter_string=None):
        return search_all(
            client.search_experiments, ViewType.ACTIVE_ONLY, filter_string=filter_string, order_by=["name ASC"]
        )

    everything = list(experiments())
    tagged = {e.experiment_id for e in experiments(f"tags.`{tags.HAS_TRAINING_RUNS}` = 'true'")}
    untagged = [e.experiment_id for e in everything if e.experiment_id not in tagged]
    # A tagged experiment is listed on the tag's word: if its training runs were deleted since, its page says so.
    holding = tagged | _holding(client, untagged, TRAIN_FILTER)
    return [e for e in everything if e.experiment_id in holding]


def declared_settings(
    client: MlflowClient, experiment_ids: list[str], metric_keys: list[str]
) -> tuple[str | None, tuple[str, ...] | None]:
    """(primary, metrics) the experiments' study runs agree on, among ``metric_keys``; None where they differ or
    give none, so the page falls back to the ``compare`` command's defaults."""
    query = f"tags.`{tags.ROLE}` = '{tags.ROLE_MAIN}'"
    studies = [r.data.params for r in search_all(client.search_runs, experiment_ids, query)]
    primaries = {p["primary"] for p in studies if p.get("primary")}
    metric_lists = {tuple(k.strip() for k in p["metrics"].split(",") if k.strip()) for p in studies if p.get("metrics")}
    primary = primaries.pop() if len(primaries) == 1 else None
    metrics = metric_lists.pop() if len(metric_lists) == 1 else None
    if metrics is not None:
        metrics = tuple(k for k in dict.fromkeys(metrics) if k in metric_keys) or None
    return (primary if primary in metric_keys and (metrics is None or primary in metrics) else None), metrics


#: A RUNNING comparison run that no job of this server is computing, started this long ago, is marked stale on the
#: page: its process most likely died (a comparison of the page ends within its time limit; see
#: :data:`~mlflow_recsys.server._jobs.TIME_LIMIT_ENV`).
STALE_AFTER_S = 6 * 3600


#: How the comparisons list writes a setting a run has not logged (yet): a comparison run logs its params at its
#: end, so one cut off before has none, and no value may be guessed for it.
NOT_LOGGED = "not logged"


@dataclass
class ComparisonRow:
    """One comparison run as the experiment page lists it: enough to tell two comparisons of one pair apart.

    ``reference``, ``primary``, ``metrics``, ``n_runs`` and ``n_resamples`` are the cells' text: the value, its
    meaning in words for an unset one (``every pair``, ``none``), or :data:`NOT_LOGGED`."""

    run_id: str
    name: str
    status: str
    sentences: list[str]  # every candidate's result on the primary metric, or the error, or the headline
    experiment_id: str
    date: str  # start time, UTC, to the minute
    reference: str
    primary: str
    metrics: str  # the metrics compared, comma-separated
    n_runs: str
    n_resamples: str
    stale: str  # why a RUNNING run is taken for dead ("" when it is not)


def comparisons(
    client: MlflowClient, experiment_ids: list[str], *, live_jobs: frozenset[str] = frozenset()
) -> list[ComparisonRow]:
    """The experiments' newest :data:`MAX_COMPARISONS` comparison runs, newest first (one query), each with its
    start date, reference, primary metric, metrics, runs and B, and its error or every result sentence of its
    primary metric (its ``recsys.result`` headline when the notes hold none). A RUNNING run is marked stale when it
    is a page job's (tag ``recsys.server_job``) not among ``live_jobs``, or started over :data:`STALE_AFTER_S` ago."""
    import datetime
    import time

    now_ms, rows = time.time() * 1000, []
    order = ["attributes.start_time DESC"]
    for r in client.search_runs(experiment_ids, COMPARISON_FILTER, max_results=MAX_COMPARISONS, order_by=order):
        t, p = r.data.tags, r.data.params
        # A result only of a run that ended and logged its settings (the last thing logged): anything else of a run
        # cut off midway (notes, headline) is not its result.
        ended = r.info.status == FINISHED and bool(p)
        results = (note_sentences(t.get(MLFLOW_RUN_NOTE, "")) or [t.get(tags.RESULT, "")]) if ended else []
        stale = ""
        if r.info.status == RUNNING:
            job, age_h = t.get(tags.SERVER_JOB), (now_ms - r.info.start_time) / 3.6e6
            if job and job not in live_jobs:
                stale = "stale: its comparison job on this server is not running"
            elif not job and age_h * 3600 > STALE_AFTER_S:
                stale = f"stale: started {age_h:.0f} h ago and not ended"
        started = datetime.datetime.fromtimestamp(r.info.start_time / 1000, tz=datetime.timezone.utc)
        rows.append(
            ComparisonRow(
                run_id=r.info.run_id,
                name=r.info.run_name or r.info.run_id,
                status=r.info.status,
                sentences=[s for s in ([t[tags.ERROR]] if t.get(tags.ERROR) else results) if s],
                experiment_id=r.info.experiment_id,
                date=started.strftime("%Y-%m-%d %H:%M UTC"),
                reference=_cell(p, "reference", "every pair"),
                primary=t.get(tags.PRIMARY_METRIC) or _cell(p, "primary", "none"),
                metrics=_cell(p, "compared_metrics", "none"),
                n_runs=t.get(tags.N_SOURCE_RUNS) or NOT_LOGGED,
                n_resamples=_cell(p, "n_resamples", "none"),
                stale=stale,
            )
        )
    return rows


def _cell(params: dict[str, str], key: str, unset: str) -> str:
    """A param as its cell shows it: ``unset`` for None (``"None"``), :data:`NOT_LOGGED` when not logged."""
    value = params.get(key)
    return NOT_LOGGED if value is None else unset if value == "None" else value


_MARKDOWN = re.compile(r"\\(.)|\*\*")


def note_sentences(note: str) -> list[str]:
    """The result sentences of a comparison run's notes as plain text (markdown escapes undone): the paragraphs
    after the ``Primary metric`` line that end as every :func:`~mlflow_recsys.report.results_text` sentence
    does, up to the first that does not; none when the notes declare no primary metric or hold no sentence."""
    from mlflow_recsys.report._text import RESULT_SENTENCE_END

    paragraphs = [p.strip() for p in note.split("\n\n") if p.strip()]
    declared = [i for i, p in enumerate(paragraphs) if p.startswith("Primary metric")]
    if not declared:
        return []
    found = []
    for p in paragraphs[declared[0] + 1 :]:
        text = html.unescape(_MARKDOWN.sub(lambda m: m.group(1) or "", p))
        if not text.endswith(RESULT_SENTENCE_END):
            break
        found.append(text)
    return found
