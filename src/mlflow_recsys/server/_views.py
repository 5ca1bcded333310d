"""The pages under ``/recsys/``: experiments, one experiment's runs with the Compare form, and a job's progress.

Every page reads through the server's own backend store (the URI ``mlflow server`` hands its workers) and
renders Jinja templates with autoescaping, so a run name, tag, param or metric key is shown as text. The one
POST carries a Flask-WTF CSRF token.
"""

from __future__ import annotations

import functools
import os
from urllib.parse import urlsplit

import mlflow
import sqlalchemy.exc
from flask import Blueprint, Response, abort, current_app, redirect, render_template, request, url_for
from flask_wtf.csrf import CSRFError, CSRFProtect
from mlflow.environment_variables import MLFLOW_SERVER_CORS_ALLOWED_ORIGINS
from mlflow.exceptions import MlflowException
from mlflow.server import BACKEND_STORE_URI_ENV_VAR, STATIC_PREFIX_ENV_VAR
from mlflow.tracking import MlflowClient
from werkzeug.exceptions import HTTPException

from mlflow_recsys._digests import shorten
from mlflow_recsys.server import _jobs as jobs
from mlflow_recsys.server import _listing as listing
from mlflow_recsys.server import _runner as runner
from mlflow_recsys.server._selection import RunSelectionError, Selection, form_fields, parse_form, shown_settings
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._redact import redact
from mlflow_recsys.tracking._runs import RUN_ID, parse_compare_url, runs_by_id, search_training_runs
from mlflow_recsys.tracking._server_errors import is_unreachable
from mlflow_recsys.tracking._server_page import SERVER_URL_ENV  # the comparison processes reach this server there

csrf = CSRFProtect()
bp = Blueprint("recsys", __name__, template_folder="templates")


def store_uri() -> str:
    """The server's backend store: what ``mlflow server`` gave its workers, else this process's tracking URI."""
    return os.environ.get(BACKEND_STORE_URI_ENV_VAR) or mlflow.get_tracking_uri()


@functools.cache
def _client(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)


def client() -> MlflowClient:
    return _client(store_uri())


def job_folder():
    return jobs.jobs_dir(store_uri())


def _text(body: str, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status=status, mimetype="text/plain", headers=headers)


def ui_prefix() -> str:
    return os.environ.get(STATIC_PREFIX_ENV_VAR, "").rstrip("/")


def self_url() -> str:
    """Where this server answers, for the comparison processes: the socket of this request, not its Host header."""
    configured = os.environ.get(SERVER_URL_ENV)
    if configured:
        return configured.rstrip("/")
    host, port = request.environ.get("SERVER_NAME", "127.0.0.1"), request.environ.get("SERVER_PORT", "5000")
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "localhost": "127.0.0.1", "::": "::1"}.get(host) or host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}{ui_prefix()}"


@bp.before_request
def _only_admins():
    """On ``recsys-auth``: basic-auth has authenticated the request; the pages are for admins only."""
    if current_app.config.get("RECSYS_ADMIN_ONLY"):
        from mlflow.server.auth import sender_is_admin

        if not sender_is_admin():
            return _text("The recsys pages are open to MLflow admins only on this server.", 403)
    return None


def _missing(exc: MlflowException) -> bool:
    """Whether the store said the thing does not exist, or its id is malformed (not that it could not answer)."""
    return getattr(exc, "error_code", None) in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")


def _store_unavailable(exc: BaseException):
    """503 with the store's (redacted) reason: a locked or unreachable store is not a missing experiment."""
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return _text(f"the tracking store did not answer: {redact(first)}\n", 503)


@bp.errorhandler(MlflowException)
def _mlflow_error(exc: MlflowException):
    return _text("not found on this server\n", 404) if _missing(exc) else _store_unavailable(exc)


@bp.errorhandler(Exception)
def _other_error(exc: Exception):
    """A store error that is not an ``MlflowException`` (a database driver's, a refused connection, a
    :class:`~mlflow_recsys.errors.TrackingServerError`): 503."""
    if isinstance(exc, HTTPException):
        return exc
    if isinstance(exc, sqlalchemy.exc.OperationalError) or is_unreachable(exc):
        return _store_unavailable(exc)
    raise exc


def _origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url`` as a browser writes an origin (no default port); None without one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname  # urlsplit lower-cases the host
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + (f":{port}" if port and port != {"http": 80, "https": 443}.get(scheme) else "")


def allowed_origins() -> set[str]:
    """The origins a Compare may be posted from: this request's own (its ``Host``), each origin of
    ``MLFLOW_SERVER_CORS_ALLOWED_ORIGINS`` (``mlflow server --cors-allowed-origins``, comma-separated; ``*`` is not
    taken, it names no site) and the origin of :data:`SERVER_URL_ENV`. A reverse proxy that rewrites ``Host``
    (nginx's default) needs one of the last two."""
    listed = [o.strip() for o in (MLFLOW_SERVER_CORS_ALLOWED_ORIGINS.get() or "").split(",")]
    listed += [os.environ.get(SERVER_URL_ENV, ""), request.host_url]
    return {origin for origin in map(_origin_of, listed) if origin}


def _refused(what: str) -> Response | None:
    """403 saying ``what`` was refused when the POST came from a page of an origin not in
    :func:`allowed_origins` (``Origin``, else ``Referer``), None when it did not; then the CSRF token's check."""
    origin = request.headers.get("Origin", request.headers.get("Referer") or None)
    if origin is not None and (origin == "null" or _origin_of(origin) not in allowed_origins()):
        return _text(f"{what} was refused: the form was posted from another site.", 403)
    csrf.protect()
    return None


@bp.context_processor
def _common():
    return {"ui": ui_prefix()}


@bp.route("/")
def index():
    return render_template("recsys/index.html", experiments=listing.experiments_with_training_runs(client()))


#: Most experiments one page lists (an address or a form naming more is refused; the UI's compare page names
#: the experiments of its runs, a handful).
MAX_EXPERIMENTS = 100
_INT64_MAX = 2**63 - 1


def _experiments(ids: list[str], *, strict: bool = True) -> list:
    """The active experiments of ``ids``, each once; a missing or deleted one is a 404 naming it when ``strict``,
    else left out. More than :data:`MAX_EXPERIMENTS` distinct ids are a 400."""
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_EXPERIMENTS:
        abort(400, f"experiments: expected at most {MAX_EXPERIMENTS} experiment ids, found {len(ids):,}")
    found = []
    for experiment_id in ids:
        exp = None
        if not (experiment_id.isdigit() and int(experiment_id) > _INT64_MAX):  # SQLite would raise an overflow
            try:
                exp = client().get_experiment(experiment_id)
            except MlflowException as exc:
                if not _missing(exc):
                    raise
        if exp is not None and exp.lifecycle_stage == "active":
            found.append(exp)
        elif strict:
            abort(404, f"experiment {shorten(experiment_id, 40)!r} was not found on this server, or is deleted")
    return found


def _experiments_of(run_ids: list[str]) -> list:
    """The active experiments the runs belong to, in the order the runs name them (a few queries in all)."""
    runs = runs_by_id(client(), run_ids)
    return _experiments([runs[r].info.experiment_id for r in run_ids if r in runs], strict=False)


def _listing_page(experiments: list, ticked: list[str], selection: Selection | None = None, error: str | None = None):
    """The experiments' runs with the Compare form, ``ticked`` runs ticked; with ``error`` a 400 saying it."""
    ids = [e.experiment_id for e in experiments]
    runs, truncated = search_training_runs(client(), ids, limit=listing.MAX_LISTED)
    if selection is None:  # a fresh page: the study's declared primary metric and metrics are its defaults
        primary, metrics = listing.declared_settings(client(), ids, listing.metric_keys_of(runs))
        selection = Selection(
            run_ids=ticked, chosen={"primary": primary, "metrics": list(metrics) if metrics else None}
        )
    shown = selection.chosen["primary"] or request.args.get("metric") or None
    lst = listing.group_runs(runs, shown_metric=shown, truncated=truncated)
    listed = {row.run_id for s in lst.splits for m in s.models for row in m.runs}
    unlisted = [r for r in ticked if r not in listed]
    found = runs_by_id(client(), unlisted)
    extra = []
    for run_id in unlisted:
        run = found.get(run_id)
        if run is None:  # a hand-made address may hold anything: shown short, as text
            extra.append(dict(run_id=shorten(run_id, 256), name=shorten(run_id, 60), status="not found", role=""))
        else:
            state = run.info.status if run.info.lifecycle_stage == "active" else f"deleted ({run.info.status})"
            name, role = run.info.run_name or run_id, run.data.tags.get(tags.ROLE, "")
            extra.append(dict(run_id=run_id, name=name, status=state, role=role))
    body = render_template(
        "recsys/experiment.html",
        experiments=experiments,
        listing=lst,
        ticked=set(ticked),
        extra=extra,
        settings=selection.chosen,
        form=form_fields(),
        error=error,
        comparisons=listing.comparisons(client(), ids, live_jobs=_live_jobs()),
    )
    return Response(body, status=400 if error else 200, mimetype="text/html")


@bp.route("/experiments/<experiment_id>")
def experiment(experiment_id: str):
    return _listing_page(_experiments([experiment_id]), [])


@bp.route("/compare", methods=["GET"])
def compare_from_url():
    """``/recsys/compare?runs=[...]&experiments=[...]``: the UI's compare-runs parameters, runs pre-ticked."""
    query = request.query_string.decode("utf-8", "replace")
    try:
        run_ids, experiment_ids = parse_compare_url("?" + query)
    except ValueError as exc:
        abort(400, str(exc))
    # A hand-made address may repeat ids: each is looked up and shown once.
    run_ids, experiment_ids = list(dict.fromkeys(run_ids)), list(dict.fromkeys(experiment_ids))
    experiments = _experiments(experiment_ids) if experiment_ids else _experiments_of(run_ids)
    if not experiments:
        abort(404, "none of the runs in the address was found in an active experiment on this server")
    return _listing_page(experiments, run_ids)


def page_message(exc: Exception) -> str:
    """What the page says about a refused selection: the reason without the command line's hint, and no store
    address (the page's user reaches the store only through this server)."""
    text = f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
    for uri in {store_uri(), mlflow.get_tracking_uri()}:
        text = text.replace(uri, "this server's store").replace(redact(uri), "this server's store")
    return redact(text)


@bp.route("/compare", methods=["POST"])
def compare():
    """Check the selection as the command line does, then start the comparison job and show its page.

    The checks are :func:`~mlflow_recsys.tracking._comparison.compare_runs`'s own, in its order and with its
    messages, but read no artifact, so a refusal is immediate and leaves nothing behind.
    """
    from mlflow_recsys.tracking._comparison import check_selection

    if refused := _refused("Compare"):
        return refused
    selection = None
    try:
        selection = parse_form(request.form)
        check_selection(run_ids=list(selection.run_ids), settings=selection.settings(), client=client())
    except (RunSelectionError, ValueError) as exc:
        ids = (selection.experiment_ids if selection else request.form.getlist("experiment")) or []
        ticked = selection.run_ids if selection else [r for r in request.form.getlist("run") if RUN_ID.fullmatch(r)]
        # The refusal is what the user needs: experiments deleted since the page was loaded are left out.
        experiments = _experiments(ids, strict=False) or _experiments_of(ticked)
        return _listing_page(experiments, ticked, selection, page_message(exc))
    folder, auth = job_folder(), _auth()
    with jobs.admission(folder):
        if (waiting := jobs.unfinished_jobs(folder)) >= 4 * jobs.max_comparisons():
            message = f"{waiting} comparisons are already waiting; try again when one finishes."
            return _text(message, 503, {"Retry-After": "30"})
        job = jobs.new_job(
            folder,
            run_ids=selection.run_ids,
            settings=selection.chosen,
            experiment_ids=selection.experiment_ids,
            owner=getattr(auth, "username", None),
        )
    try:
        runner.launch(folder, job, tracking_uri=self_url(), auth=auth)
    except OSError as exc:
        return _text(f"the comparison process could not be started: {redact(str(exc))}", 503)
    return redirect(url_for("recsys.job_page", job_id=job["id"]), code=303)


def _live_jobs() -> frozenset[str]:
    """Ids of this server's queued and running jobs; each job found dead on the way is settled (its comparison
    run ended KILLED, see :func:`~mlflow_recsys.server._runner.end_if_dead`)."""
    folder = job_folder()
    settled = [runner.end_if_dead(folder, job, client()) for job in jobs.all_jobs(folder)]
    return frozenset(job["id"] for job in settled if job["stage"] not in jobs.FINAL)


def _job(job_id: str) -> dict:
    try:
        return runner.end_if_dead(job_folder(), jobs.read_job(job_folder(), job_id), client())
    except jobs.JobNotFound as exc:
        abort(404, str(exc))


def _auth():
    """The credentials basic-auth authenticated this request with (``recsys-auth``), else None."""
    return request.authorization if current_app.config.get("RECSYS_ADMIN_ONLY") else None


@bp.route("/jobs/<job_id>/cancel", methods=["POST"])
def cancel_job(job_id: str):
    """Cancel a queued or running job (its owner, or an admin): it ends FAILED, its comparison run too."""
    if refused := _refused("Cancel"):
        return refused
    job = _job(job_id)
    user = getattr(_auth(), "username", None)
    if current_app.config.get("RECSYS_ADMIN_ONLY") and user != job.get("owner"):
        from mlflow.server.auth import sender_is_admin

        if not sender_is_admin():
            return _text("Only the job's owner or an admin may cancel it.", 403)
    if job["stage"] in jobs.FINAL:
        return _text(f"The job has already ended ({job['stage']}).", 409)
    runner.cancel(job_folder(), job, by=user or "a user of this server")
    return redirect(url_for("recsys.job_page", job_id=job_id), code=303)


@bp.route("/jobs/<job_id>")
def job_page(job_id: str):
    job = _job(job_id)
    used = (job.get("result") or {}).get("primary_analysis_used")
    return render_template(
        "recsys/job.html",
        job=job,
        stages=jobs.STAGES,
        final=job["stage"] in jobs.FINAL,
        max_comparisons=jobs.max_comparisons(),
        settings=shown_settings(job["settings"], primary_analysis_used=used),
    )


#: What ``/recsys/jobs/<id>.json`` answers of a job (not its owner, pid or experiments).
_JOB_STATE = "id stage history created started finished result error run_ids settings waiting_for_slot".split()


@bp.route("/jobs/<job_id>.json")
def job_state(job_id: str):
    job = _job(job_id)
    return {k: job.get(k) for k in _JOB_STATE}


@bp.errorhandler(CSRFError)
def _csrf_error(exc: CSRFError):
    return _text(f"Compare was refused: {exc.description} Reload the page and try again.", 400)
