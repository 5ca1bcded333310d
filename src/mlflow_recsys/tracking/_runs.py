"""Select training runs the way MLflow users pick them, and load their per-user results."""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from contextlib import contextmanager
from itertools import islice
from typing import TypeVar, cast
from urllib.parse import parse_qs, unquote, urlsplit

import mlflow
from mlflow.entities import Experiment, LifecycleStage, Run, RunStatus, ViewType
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.store.entities.paged_list import PagedList
from mlflow.tracking import MlflowClient

from mlflow_recsys._digests import shorten
from mlflow_recsys._validation import expected
from mlflow_recsys.errors import ArtifactError, RunSelectionError
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.tracking import _artifacts as artifacts
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._downloads import download_each, download_files
from mlflow_recsys.tracking._limits import duplicates
from mlflow_recsys.tracking._redact import redact

#: Runs asked for per ``search_runs`` call; MLflow returns a page token while more remain.
SEARCH_PAGE_SIZE = 1000
#: MLflow's run states as ``run.info.status`` spells them.
FINISHED, RUNNING, FAILED, KILLED = map(
    RunStatus.to_string, (RunStatus.FINISHED, RunStatus.RUNNING, RunStatus.FAILED, RunStatus.KILLED)
)
#: What an MLflow run id may look like (MLflow's own check); anything else names no run, and never reaches a filter.
RUN_ID = re.compile(r"[A-Za-z0-9][\w\-]{0,255}", re.ASCII)

_log = logging.getLogger(__name__)
T = TypeVar("T")


def parse_compare_url(url: str) -> tuple[list[str], list[str]]:
    """Run ids and experiment ids from a pasted MLflow UI compare URL.

    The URL looks like ``http://host/#/compare-runs?runs=["a","b"]&experiments=["1"]``
    and may be percent-encoded any number of times; it is decoded until stable.

    Raises
    ------
    ValueError
        If the URL holds no ``runs=`` list of strings.
    """
    decoded, previous = url.strip(), None
    while decoded != previous:
        try:  # strict: a %-encoded byte that is not UTF-8 would otherwise become U+FFFD, a run id no one wrote
            previous, decoded = decoded, unquote(decoded, errors="strict")
        except UnicodeDecodeError:
            raise ValueError(expected("compare_url", "%-encoded UTF-8", shorten(url, 120))) from None
    fragment = urlsplit(decoded).fragment or decoded
    fields = parse_qs(fragment.split("?", 1)[-1], keep_blank_values=True)
    lists = {}
    for name in ("runs", "experiments"):
        raw = fields.get(name, ["[]"])[0]
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: thousands of nested brackets
            value = None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(
                f"compare_url: expected {name}=[...] to be a JSON list of strings, found {shorten(raw, 80)!r}"
            )
        lists[name] = value
    if not lists["runs"]:
        raise ValueError(f"compare_url: expected a compare-runs URL with runs=[...], found {shorten(url, 120)!r}")
    return lists["runs"], lists["experiments"]


def select_runs(
    *,
    run_ids: list[str] | None = None,
    compare_url: str | None = None,
    experiment: str | None = None,
    filter_string: str | None = None,
    client: MlflowClient | None = None,
    page_size: int = SEARCH_PAGE_SIZE,
) -> list[Run]:
    """Training runs chosen by ids, by a compare URL, or by experiment plus filter.

    Exactly one of ``run_ids``, ``compare_url`` or ``experiment`` (a name or an id) must be given; ``filter_string``
    is an MLflow search filter used with ``experiment``. Only runs tagged ``recsys.role=train`` are training runs.
    An experiment selection takes the FINISHED ones (:func:`search_training_runs`, the rule the server's pages
    follow too): a run still RUNNING (a sweep in progress, a killed study's leftover), FAILED or KILLED is left out,
    and a warning on this module's logger says how many were, by state. Runs named by id or by a compare URL must
    all be FINISHED. A search is read page by page (``page_size`` runs a page, default :data:`SEARCH_PAGE_SIZE`)
    until MLflow returns no page token, so no match is dropped; deleted runs are never selected.

    Raises
    ------
    RunSelectionError
        If the selection is ambiguous or empty (for an experiment: no FINISHED training run matches, the message
        counting those left out), a run or experiment does not exist, a run is deleted or listed twice, a run is not
        a training run, or a run named by id is not FINISHED (the message lists every such run with its state).
    MlflowException
        If the tracking server fails for another reason than a missing run or
        experiment (e.g. it cannot be reached); the caller reports it.
    """
    run_ids = checked_run_ids(run_ids, compare_url, experiment, filter_string)
    client = client or MlflowClient()  # after the checks: a refused selection opens (and creates) no store
    if experiment is not None:
        return _runs_in_experiment(client, experiment, filter_string, page_size)
    hint = _url_host_hint(compare_url) if compare_url is not None else ""
    return _runs_by_id(client, cast(list, run_ids), hint)


def checked_run_ids(run_ids, compare_url, experiment, filter_string) -> list[str] | None:
    """The checks of a selection (:func:`select_runs`) that need no tracking store -> the run ids named, as a list of
    str, by ``run_ids`` or by ``compare_url`` (None for an experiment). RunSelectionError if a value has the wrong
    type, a filter has no experiment, or not exactly one way of selecting is given; ValueError if ``compare_url`` is
    no compare-runs URL (:func:`parse_compare_url`)."""
    for name, value in (("compare_url", compare_url), ("experiment", experiment), ("filter_string", filter_string)):
        if value is not None and not isinstance(value, str):
            raise RunSelectionError(expected(name, "a str or None", value))
        # A command-line byte that is not UTF-8 arrives as a lone surrogate, which MLflow cannot send.
        if value is not None and any("\ud800" <= c <= "\udfff" for c in value):
            raise RunSelectionError(expected(name, "UTF-8 text", value))
    if filter_string and experiment is None:
        raise RunSelectionError("filter_string: a filter selects runs within an experiment; give the experiment too")
    run_ids = _run_id_list(run_ids)
    given = sum(x is not None for x in (run_ids, compare_url, experiment))
    if given != 1:
        raise RunSelectionError(
            f"runs: expected exactly one of run ids, a compare URL or an experiment (+ filter), found {given or 'none'}"
        )
    if compare_url is not None:
        run_ids, _ = parse_compare_url(compare_url)
    return run_ids


def _url_host_hint(compare_url: str) -> str:
    """Where a pasted compare URL came from, for a run not found here; its host alone, never ``user:password@``."""
    parts = urlsplit(unquote(unquote(compare_url)))  # parse_compare_url has already refused what is not UTF-8
    try:
        host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
    except ValueError:  # a port that is no number
        host = parts.hostname
    return f"; the URL came from {host}: set MLFLOW_TRACKING_URI to that server if it is another store" if host else ""


def _run_id_list(run_ids) -> list[str] | None:
    """``run_ids`` as a list of str (None when not given or empty); a str, a set or a mapping is refused."""
    if isinstance(run_ids, (str, bytes)):  # would be read as one-character ids
        raise RunSelectionError(
            expected("run_ids", "a list of run ids (split a comma-separated string first)", run_ids)
        )
    if isinstance(run_ids, (Set, Mapping)):  # no order: the report's order, and the default experiment, would vary
        raise RunSelectionError(f"run_ids: expected a list of run ids (in order), found a {type(run_ids).__name__}")
    if run_ids is not None and not isinstance(run_ids, Iterable):
        raise RunSelectionError(expected("run_ids", "a list of run ids", run_ids))
    listed = [] if run_ids is None else list(run_ids)
    for run_id in listed:
        if not isinstance(run_id, str):
            raise RunSelectionError(expected("run_ids", "run ids as strings", run_id))
    return [str(run_id) for run_id in listed] or None


def _runs_by_id(client: MlflowClient, run_ids: list[str], hint: str) -> list[Run]:
    """The training runs of ``run_ids``, each checked to exist, be active, be a training run and be FINISHED."""
    repeated = duplicates(run_ids)  # before any request: 40,000 ids with one repeat fail at once
    if repeated:
        shown = ", ".join(repeated[:20]) + (f" and {len(repeated) - 20} others" if len(repeated) > 20 else "")
        raise RunSelectionError(f"runs: expected distinct run ids, found {shown} more than once")
    found = runs_by_id(client, run_ids)
    for run_id in run_ids:
        if run_id not in found:
            raise RunSelectionError(
                f"run {run_id!r} was not found", hint=f"the tracking store is {redact(mlflow.get_tracking_uri())}{hint}"
            )
    runs = [found[run_id] for run_id in run_ids]
    deleted = [r.info.run_id for r in runs if r.info.lifecycle_stage != LifecycleStage.ACTIVE]
    if deleted:
        raise RunSelectionError(f"runs: expected active runs, found deleted runs {deleted}; restore them to compare")
    roles = {r.info.run_id: r.data.tags.get(tags.ROLE) for r in runs}
    if any(role != tags.ROLE_TRAIN for role in roles.values()):
        listing = ", ".join(f"{i} ({tags.ROLE}={role})" for i, role in roles.items() if role != tags.ROLE_TRAIN)
        raise RunSelectionError(f"expected training runs only, found {listing}")
    unfinished = [(r.info.run_id, r.info.status) for r in runs if r.info.status != FINISHED]
    if unfinished:
        listing = ", ".join(f"{i} ({s})" for i, s in unfinished)
        hint = (
            "; a run left RUNNING usually means its `mlflow run` was interrupted or missing a parameter"
            if any(s == RUNNING for _, s in unfinished)
            else ""
        )
        raise RunSelectionError(f"expected FINISHED runs only, found {listing}{hint}")
    return runs


def runs_by_id(client: MlflowClient, run_ids: list[str], *, chunk: int = 100) -> dict[str, Run]:
    """The runs of these ids that exist (deleted ones included), by id, with a few ``attributes.run_id IN (...)``
    searches, not a request per run; an id not shaped like :data:`RUN_ID` is absent, as a missing run is."""
    wanted = [r for r in dict.fromkeys(run_ids) if RUN_ID.fullmatch(r)]
    if not wanted:
        return {}
    experiment_ids = all_experiment_ids(client)
    found: dict[str, Run] = {}
    for start in range(0, len(wanted), chunk):
        query = "attributes.run_id IN ({})".format(", ".join(f"'{r}'" for r in wanted[start : start + chunk]))
        found.update((r.info.run_id, r) for r in search_all(client.search_runs, experiment_ids, query, ViewType.ALL))
    return found


def all_experiment_ids(client: MlflowClient) -> list[str]:
    """Every experiment's id, deleted ones included."""
    return [e.experiment_id for e in search_all(client.search_experiments, view_type=ViewType.ALL)]


def lookup_experiment(client: MlflowClient, experiment: str) -> Experiment | None:
    """The experiment named ``experiment``, else the one whose id it is (deleted ones too), else None."""
    try:
        return client.get_experiment_by_name(experiment) or client.get_experiment(experiment)
    except MlflowException as exc:
        if not missing(exc):
            raise
    return None


def find_experiment(client: MlflowClient, experiment: str, *, argument: str = "experiment") -> Experiment:
    """The active experiment :func:`lookup_experiment` finds; else a RunSelectionError starting with ``argument``."""
    exp = lookup_experiment(client, experiment)
    if exp is None:
        raise RunSelectionError(
            f"{argument}: expected an experiment name or id in {redact(mlflow.get_tracking_uri())}, "
            f"found {experiment!r}"
        )
    if exp.lifecycle_stage != LifecycleStage.ACTIVE:
        raise RunSelectionError(f"{argument}: {exp.name!r} is deleted; restore it to read its runs")
    return exp


def _runs_in_experiment(client: MlflowClient, experiment: str, filter_string: str | None, page_size: int) -> list[Run]:
    """The FINISHED training runs of ``experiment`` that ``filter_string`` selects; those left out are counted."""
    exp = find_experiment(client, experiment)
    ids = [exp.experiment_id]
    with parsed_filter(filter_string):
        runs, _ = search_training_runs(client, ids, filter_string, page_size=page_size)
        others, _ = search_training_runs(client, ids, filter_string, selected=False, page_size=page_size)
    total = len(others)
    states = ", ".join(f"{n} {status}" for status, n in sorted(Counter(r.info.status for r in others).items()))
    what = f"left out {total} training {'run that is' if total == 1 else 'runs that are'} not {FINISHED} ({states})"
    if not runs:
        raise RunSelectionError(
            f"no {FINISHED} training runs in experiment {exp.name!r}"
            + (f" match filter {filter_string!r}" if filter_string else "")
            + (f"; {what}" if total else "")
        )
    if total:
        _log.warning("experiment %r: compared its %d %s training runs; %s", exp.name, len(runs), FINISHED, what)
    return runs


def training_runs_filter(
    filter_string: str | None = None, *, selected: bool = True, role: str = tags.ROLE_TRAIN
) -> str:
    """The search filter of an experiment selection: runs of ``role`` that are FINISHED (``selected=False``: that
    are not), and ``filter_string``."""
    clause = f"tags.`{tags.ROLE}` = '{role}' and attributes.status {'=' if selected else '!='} '{FINISHED}'"
    return f"{clause} and {filter_string}" if filter_string else clause


def search_all(search: Callable[..., PagedList[T]], *args, page_size: int = SEARCH_PAGE_SIZE, **kwargs) -> Iterator[T]:
    """Every item of a paged MLflow search (``client.search_runs``, ``client.search_experiments``), ``page_size``
    a call. MLflow answers one page per call: this is the package's one loop over them. Lazy: a caller that stops
    (``itertools.islice``) asks no more."""
    token: str | None = None
    while True:
        page = search(*args, max_results=page_size, page_token=token, **kwargs)
        yield from page
        token = page.token
        if not token:
            return


def search_training_runs(
    client: MlflowClient,
    experiment_ids: list[str],
    filter_string: str | None = None,
    *,
    role: str = tags.ROLE_TRAIN,
    selected: bool = True,
    page_size: int = SEARCH_PAGE_SIZE,
    limit: int | None = None,
) -> tuple[list[Run], bool]:
    """The runs an experiment selection takes: active runs of :func:`training_runs_filter` (``role``, ``selected``,
    ``filter_string``), oldest first, every page read (or the first ``limit``); and whether more than ``limit``
    matched. The one rule for ``compare --experiment``, :func:`select_runs`, the server's run lists and the
    queries. MLflow's ``INVALID_PARAMETER_VALUE`` for a filter it cannot parse goes through."""
    query = training_runs_filter(filter_string, selected=selected, role=role)
    order = ["attributes.start_time ASC", "attributes.run_id ASC"]
    found = search_all(
        client.search_runs, experiment_ids, query, ViewType.ACTIVE_ONLY, page_size=page_size, order_by=order
    )
    runs = list(found if limit is None else islice(found, limit + 1))
    return runs[:limit], limit is not None and len(runs) > limit


def missing(exc: MlflowException) -> bool:
    """MLflow's answer for a run or experiment that does not exist (or an id it cannot parse)."""
    return exc.error_code in (ErrorCode.Name(RESOURCE_DOES_NOT_EXIST), ErrorCode.Name(INVALID_PARAMETER_VALUE))


@contextmanager
def parsed_filter(filter_string: str | None):
    """MLflow's refusal to parse ``filter_string`` becomes a RunSelectionError naming it."""
    try:
        yield
    except MlflowException as exc:
        if exc.error_code != ErrorCode.Name(INVALID_PARAMETER_VALUE):
            raise
        raise RunSelectionError(f"filter_string: MLflow could not parse {filter_string!r}: {exc.message}") from None


def load_evaluation_artifacts(run_id: str, artifact_uri: str | None = None) -> artifacts.EvaluationArtifacts:
    """The per-user artifacts of one training run; an OSError of the local copy (``ENOSPC``) goes through as it is,
    no fault of the run's. ``artifact_uri``, the run's ``info.artifact_uri`` when the caller holds the run, spares
    the request that resolves ``runs:/<run_id>``."""
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-") as tmp:
        try:
            # rankings.parquet is absent from runs logged without their lists: download_files skips it then.
            names = [artifacts.PER_USER_FILE, artifacts.EVALUATION_FILE, artifacts.RANKINGS_FILE]
            download_files(artifact_uri or f"runs:/{run_id}", names, tmp)
        except MlflowException as exc:
            raise ArtifactError(f"run {run_id}: could not download its per-user artifacts ({exc})") from None
        return artifacts.read_evaluation_artifacts(tmp, origin=f"run {run_id}")


def load_evaluation(run_id: str) -> EvaluationResult:
    """The :class:`EvaluationResult` a training run logged, rebuilt from its artifacts.

    Raises
    ------
    ArtifactError
        If ``per_user.parquet`` or ``evaluation.json`` is missing, malformed or cannot be downloaded, naming the run.
    OSError
        If the local copy cannot be written (a full temporary folder: ``ENOSPC`` with its path).
    """
    return load_evaluation_artifacts(run_id).result


def load_many(runs: list[Run], threads: int) -> dict[str, artifacts.EvaluationArtifacts]:
    """Several runs' artifacts by run id, ``threads`` runs at a time
    (:func:`~mlflow_recsys.tracking._downloads.download_threads`)."""
    loaded = download_each(
        lambda run: load_evaluation_artifacts(run.info.run_id, run.info.artifact_uri),
        runs,
        threads=threads,
        desc="per-user artifacts",
    )
    return {run.info.run_id: one for run, one in zip(runs, loaded, strict=True)}


def version_of_run(client: MlflowClient, model: str, run_id: str) -> str | None:
    """The newest version of registered model ``model`` whose source run is ``run_id``, or None. Searched by run id
    (hexadecimal, safe in a filter) and the name compared here: a registered model's name may hold a quote."""
    found = [v for v in client.search_model_versions(f"run_id = '{run_id}'") if v.name == model]
    return str(max(int(v.version) for v in found)) if found else None
