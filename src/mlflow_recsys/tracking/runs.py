"""Select training runs the way MLflow users pick them, and load their per-user results."""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from concurrent.futures import ThreadPoolExecutor
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
from tqdm.auto import tqdm

from mlflow_recsys._digests import shorten
from mlflow_recsys.errors import RunSelectionError
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.artifacts import (
    EVALUATION_FILE,
    PER_USER_FILE,
    ArtifactError,
    EvaluationArtifacts,
    read_evaluation_artifacts,
)
from mlflow_recsys.tracking.downloads import download_file
from mlflow_recsys.tracking.limits import duplicates
from mlflow_recsys.tracking.redact import redact
from mlflow_recsys.validation import expected

#: Runs asked for per ``search_runs`` call; MLflow returns a page token while more remain.
SEARCH_PAGE_SIZE = 1000
#: Most run ids one message lists; the rest are counted.
SHOWN_IDS = 20
#: MLflow's run states as ``run.info.status`` spells them.
FINISHED, RUNNING, FAILED, KILLED = map(
    RunStatus.to_string, (RunStatus.FINISHED, RunStatus.RUNNING, RunStatus.FAILED, RunStatus.KILLED)
)
#: The state of the runs an experiment selection takes; the command line, the Python API and the server's pages
#: share this rule (:func:`search_training_runs`).
SELECTED_STATUS = FINISHED

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
    query = fragment.split("?", 1)[1] if "?" in fragment else fragment
    fields = parse_qs(query, keep_blank_values=True)
    lists = {}
    for name in ("runs", "experiments"):
        raw = fields.get(name, ["[]"])[0]
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: thousands of nested brackets
            raise ValueError(
                f"compare_url: expected {name}=[...] to be a JSON list, found {shorten(raw, 80)!r}"
            ) from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"compare_url: expected {name}=[...] to list strings, found {shorten(raw, 80)!r}")
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

    Exactly one of ``run_ids``, ``compare_url`` or ``experiment`` (a name or an
    id) must be given; ``filter_string`` is an MLflow search filter used with
    ``experiment``. Only runs tagged ``recsys.role=train`` are training runs.
    An experiment selection takes the FINISHED ones (:func:`search_training_runs`,
    the rule the server's pages follow too): a run still RUNNING (a sweep in
    progress, a killed study's leftover), FAILED or KILLED is left out, and a
    warning on this module's logger says how many were, by state. Runs named by
    id or by a compare URL must all be FINISHED. A search is read page by page
    (``page_size`` runs a page, default :data:`SEARCH_PAGE_SIZE`) until MLflow
    returns no page token, so no match is dropped; deleted runs are never selected.

    Raises
    ------
    RunSelectionError
        If the selection is ambiguous or empty (for an experiment: no FINISHED
        training run matches, the message counting those left out), a run or
        experiment does not exist, a run is deleted or listed twice, a run is not
        a training run, or a run named by id is not FINISHED (the message lists
        every such run with its state).
    MlflowException
        If the tracking server fails for another reason than a missing run or
        experiment (e.g. it cannot be reached); the caller reports it.
    """
    client = client or MlflowClient()
    for name, value in (("compare_url", compare_url), ("experiment", experiment), ("filter_string", filter_string)):
        if value is not None and not isinstance(value, str):
            raise RunSelectionError(expected(name, "a str or None", value))
        if value is not None and not _utf8(value):  # MLflow sends text as UTF-8; bytes of another encoding fail
            raise RunSelectionError(expected(name, "UTF-8 text", value))
    if filter_string and experiment is None:
        raise RunSelectionError("filter_string: a filter selects runs within an experiment; give the experiment too")
    run_ids = run_id_list(run_ids)
    given = [x is not None and x != [] for x in (run_ids, compare_url, experiment)]
    if sum(given) != 1:
        raise RunSelectionError(
            f"runs: expected exactly one of run ids, a compare URL, or an experiment (+ filter), found {sum(given)}"
        )
    hint = ""
    if compare_url is not None:
        run_ids, _ = parse_compare_url(compare_url)
        hint = _url_host_hint(compare_url)
    if run_ids:
        runs = _runs_by_id(client, run_ids, hint)
    else:
        # Exactly one source was given, and it was neither run ids nor a compare URL.
        runs = _runs_in_experiment(client, cast(str, experiment), filter_string, page_size)
    _require_training_runs(runs)
    return runs


def _utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (a lone surrogate, from a command-line byte that is not UTF-8, does not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _url_host_hint(compare_url: str) -> str:
    """Where a pasted compare URL came from, for a run that is not found here ("" when it names no host)."""
    parts = urlsplit(unquote(unquote(compare_url)))  # parse_compare_url has already refused what is not UTF-8
    # The host alone: a pasted URL may carry user:password@, which must not reach a message.
    try:
        host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
    except ValueError:  # a port that is no number
        host = parts.hostname
    return f"; the URL came from {host}: set MLFLOW_TRACKING_URI to that server if it is another store" if host else ""


def run_id_list(run_ids) -> list[str] | None:
    """``run_ids`` as a list (None when not given).

    Raises
    ------
    RunSelectionError
        For a str: it would be read as a list of one-character ids.
    """
    if isinstance(run_ids, (str, bytes)):
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
    """The runs of ``run_ids``; RunSelectionError for a repeated or unknown id (``hint`` ends its advice)."""
    _require_distinct(run_ids)
    found = runs_by_id(client, run_ids)
    for run_id in run_ids:
        if run_id not in found:
            raise RunSelectionError(
                f"run {run_id!r} was not found", hint=f"the tracking store is {redact(mlflow.get_tracking_uri())}{hint}"
            )
    return [found[run_id] for run_id in run_ids]


#: What an MLflow run id may look like (MLflow's own check); anything else names no run.
RUN_ID = re.compile(r"[A-Za-z0-9][\w\-]{0,255}", re.ASCII)


def runs_by_id(client: MlflowClient, run_ids: list[str], *, chunk: int = 100) -> dict[str, Run]:
    """The runs of these ids that exist (deleted ones included), by id: ``search_runs`` across every experiment
    with ``attributes.run_id IN (...)``, ``chunk`` ids a query, each followed through its page tokens; a few
    queries for thousands of ids, not one request per run. An id not shaped like an MLflow run id is absent from
    the result, as a missing run is."""
    wanted = [r for r in dict.fromkeys(run_ids) if RUN_ID.fullmatch(r)]
    if not wanted:
        return {}
    experiment_ids = all_experiment_ids(client)
    found: dict[str, Run] = {}
    for start in range(0, len(wanted), chunk):
        ids = ", ".join(f"'{r}'" for r in wanted[start : start + chunk])
        query = f"attributes.run_id IN ({ids})"
        found.update((r.info.run_id, r) for r in search_all(client.search_runs, experiment_ids, query, ViewType.ALL))
    return found


def all_experiment_ids(client: MlflowClient) -> list[str]:
    """Every experiment's id, deleted ones included (one paged ``search_experiments``)."""
    return [e.experiment_id for e in search_all(client.search_experiments, view_type=ViewType.ALL)]


def find_experiment(client: MlflowClient, experiment: str, *, argument: str = "experiment") -> Experiment:
    """The active experiment named ``experiment``, or whose id it is (a name is looked up first).

    Raises
    ------
    RunSelectionError
        If no experiment has that name or id, or it is deleted; the message starts with ``argument``.
    """
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        try:
            exp = client.get_experiment(experiment)
        except MlflowException as exc:
            if not missing(exc):
                raise
            exp = None
    if exp is None:
        raise RunSelectionError(
            f"{argument}: expected an experiment name or id in {redact(mlflow.get_tracking_uri())}, "
            f"found {experiment!r}"
        )
    if exp.lifecycle_stage != LifecycleStage.ACTIVE:
        raise RunSelectionError(f"{argument}: {exp.name!r} is deleted; restore it to read its runs")
    return exp


def _runs_in_experiment(client: MlflowClient, experiment: str, filter_string: str | None, page_size: int) -> list[Run]:
    """The training runs of ``experiment`` (a name or an id) that ``filter_string`` selects, every page read."""
    exp = find_experiment(client, experiment)
    with parsed_filter(filter_string):
        runs, _ = search_training_runs(client, [exp.experiment_id], filter_string, page_size=page_size)
        left_out = left_out_training_runs(client, [exp.experiment_id], filter_string, page_size=page_size)
    others = _left_out_text(left_out)
    if not runs:
        raise RunSelectionError(
            f"no {SELECTED_STATUS} training runs in experiment {exp.name!r} match filter {filter_string!r}"
            + (f"; {others}" if others else "")
        )
    if others:
        _log.warning(
            "experiment %r: compared its %d %s training runs; %s", exp.name, len(runs), SELECTED_STATUS, others
        )
    return runs


def training_runs_filter(
    filter_string: str | None = None, *, selected: bool = True, role: str = tags.ROLE_TRAIN
) -> str:
    """The MLflow search filter of an experiment selection: training runs (``recsys.role = 'train'``, or the
    ``role`` given) whose status is :data:`SELECTED_STATUS` (with ``selected=False``: any other status), and
    ``filter_string``."""
    status = f"attributes.status {'=' if selected else '!='} '{SELECTED_STATUS}'"
    clause = f"tags.`{tags.ROLE}` = '{role}' and {status}"
    return f"{clause} and {filter_string}" if filter_string else clause


def search_all(search: Callable[..., PagedList[T]], *args, page_size: int = SEARCH_PAGE_SIZE, **kwargs) -> Iterator[T]:
    """Every item of a paged MLflow search (``client.search_runs``, ``client.search_experiments``; ``args`` and
    ``kwargs`` passed on), ``page_size`` a call, MLflow's page tokens followed to the last page. MLflow answers one
    page per call: this is the one loop over them. Lazy: a caller that stops (``itertools.islice``) asks no more."""
    token: str | None = None
    while True:
        page = search(*args, max_results=page_size, page_token=token, **kwargs)
        yield from page
        token = page.token
        if not token:
            return


def paged_runs(
    client: MlflowClient,
    experiment_ids: list[str],
    filter_string: str,
    *,
    page_size: int = SEARCH_PAGE_SIZE,
    limit: int | None = None,
    order_by: list[str] | None = None,
) -> tuple[list[Run], bool]:
    """The active runs of ``experiment_ids`` that ``filter_string`` selects, in ``order_by``'s order, read page by
    page (:func:`search_all`, ``page_size`` a page) to the last page, or to ``limit`` runs; and whether more than
    ``limit`` matched.

    Raises
    ------
    MlflowException
        As MLflow raises it: ``INVALID_PARAMETER_VALUE`` for a filter it cannot parse, others for a server fault.
    """
    found = search_all(
        client.search_runs, experiment_ids, filter_string, ViewType.ACTIVE_ONLY, page_size=page_size, order_by=order_by
    )
    if limit is None:
        return list(found), False
    runs = list(islice(found, limit + 1))
    return runs[:limit], len(runs) > limit


def search_training_runs(
    client: MlflowClient,
    experiment_ids: list[str],
    filter_string: str | None = None,
    *,
    page_size: int = SEARCH_PAGE_SIZE,
    limit: int | None = None,
) -> tuple[list[Run], bool]:
    """The runs an experiment selection takes: active FINISHED training runs of ``experiment_ids`` that
    ``filter_string`` selects, oldest first, read page by page (``page_size`` a page) to the last page, or to
    ``limit`` runs; and whether more than ``limit`` matched.

    The one rule for `compare --experiment`, :func:`select_runs` and the server's run lists.

    Raises
    ------
    MlflowException
        As MLflow raises it: ``INVALID_PARAMETER_VALUE`` for a filter it cannot parse, others for a server fault.
    """
    return paged_runs(
        client,
        experiment_ids,
        training_runs_filter(filter_string),
        page_size=page_size,
        limit=limit,
        order_by=["attributes.start_time ASC"],
    )


def left_out_training_runs(
    client: MlflowClient,
    experiment_ids: list[str],
    filter_string: str | None = None,
    *,
    page_size: int = SEARCH_PAGE_SIZE,
) -> dict[str, int]:
    """Status -> number of active training runs that ``filter_string`` selects but :func:`search_training_runs`
    leaves out, because they are not FINISHED (``{"RUNNING": 2}``); empty when there are none."""
    runs, _ = paged_runs(
        client, experiment_ids, training_runs_filter(filter_string, selected=False), page_size=page_size
    )
    return dict(sorted(Counter(r.info.status for r in runs).items()))


def _left_out_text(left_out: dict[str, int]) -> str:
    """``"left out 3 training runs that are not FINISHED (1 FAILED, 2 RUNNING)"``; "" for none."""
    total = sum(left_out.values())
    if not total:
        return ""
    states = ", ".join(f"{n} {status}" for status, n in left_out.items())
    runs = "run that is" if total == 1 else "runs that are"
    return f"left out {total} training {runs} not {SELECTED_STATUS} ({states})"


def missing(exc: MlflowException) -> bool:
    """MLflow's answer for a run or experiment that does not exist (or an id it cannot parse)."""
    return exc.error_code in (ErrorCode.Name(RESOURCE_DOES_NOT_EXIST), ErrorCode.Name(INVALID_PARAMETER_VALUE))


@contextmanager
def parsed_filter(filter_string: str | None):
    """Around a search with ``filter_string``: MLflow's refusal to parse it becomes a RunSelectionError naming it."""
    try:
        yield
    except MlflowException as exc:
        if exc.error_code != ErrorCode.Name(INVALID_PARAMETER_VALUE):
            raise
        raise RunSelectionError(f"filter_string: MLflow could not parse {filter_string!r}: {exc.message}") from None


def _require_distinct(run_ids: list[str]) -> None:
    """RunSelectionError naming the ids listed more than once (at most :data:`SHOWN_IDS` of them); linear time."""
    repeated = duplicates(run_ids)
    if repeated:
        shown = ", ".join(repeated[:SHOWN_IDS]) + (
            f" and {len(repeated) - SHOWN_IDS} others" if len(repeated) > SHOWN_IDS else ""
        )
        raise RunSelectionError(f"runs: expected distinct run ids, found {shown} more than once")


def _require_training_runs(runs: list[Run]) -> None:
    _require_distinct([r.info.run_id for r in runs])
    deleted = [r.info.run_id for r in runs if r.info.lifecycle_stage != LifecycleStage.ACTIVE]
    if deleted:
        raise RunSelectionError(f"runs: expected active runs, found deleted runs {deleted}; restore them to compare")
    not_train = [
        (r.info.run_id, r.data.tags.get(tags.ROLE)) for r in runs if r.data.tags.get(tags.ROLE) != tags.ROLE_TRAIN
    ]
    if not_train:
        listing = ", ".join(f"{i} ({tags.ROLE}={role})" for i, role in not_train)
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


def load_evaluation_artifacts(run_id: str) -> EvaluationArtifacts:
    """Download and validate the per-user artifacts of one training run.

    Raises
    ------
    ArtifactError
        If ``per_user.parquet`` or ``evaluation.json`` is missing or malformed, or the store fails to serve it,
        naming the run.
    OSError
        If the local copy cannot be written (a full temporary folder: ``ENOSPC`` with its path); that is no fault
        of the run's.
    """
    with tempfile.TemporaryDirectory(prefix="mlflow-recsys-") as tmp:
        for name in (PER_USER_FILE, EVALUATION_FILE):
            try:
                download_file(f"runs:/{run_id}/{name}", tmp)
            except FileNotFoundError:
                raise ArtifactError(f"run {run_id}: expected artifact {name}, found none in the run") from None
            except MlflowException as exc:
                raise ArtifactError(f"run {run_id}: expected artifact {name}, could not download it ({exc})") from None
        return read_evaluation_artifacts(tmp, origin=f"run {run_id}")


def load_evaluation(run_id: str) -> EvaluationResult:
    """The :class:`EvaluationResult` a training run logged, rebuilt from its artifacts."""
    return load_evaluation_artifacts(run_id).result


def load_many(run_ids: list[str], *, threads: int = 4) -> dict[str, EvaluationArtifacts]:
    """Download several runs' artifacts with a few threads and a progress bar."""
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(run_ids)))) as pool:
        loaded = list(
            tqdm(
                pool.map(load_evaluation_artifacts, run_ids),
                total=len(run_ids),
                desc="per-user artifacts",
                unit="run",
                disable=None,
            )
        )
    return dict(zip(run_ids, loaded, strict=True))
