"""The ``mlflow.app`` factories: MLflow's whole server plus the recsys pages under ``/recsys/``.

``mlflow server --app-name recsys`` calls :func:`create_app` in each worker process; ``--app-name recsys-auth``
calls :func:`create_auth_app`, which puts MLflow's ``basic-auth`` in front of everything, the pages included,
and opens the pages to admins only. Both add routes to MLflow's own Flask app (``mlflow.server.app``) and hand
back what ``mlflow server`` would serve without them: the FastAPI app around it under uvicorn (the default),
the Flask app under gunicorn or waitress.
"""

from __future__ import annotations

import logging
import os

_log = logging.getLogger(__name__)

#: Where the pages live, below MLflow's ``--static-prefix`` if one is set.
URL_PREFIX = "/recsys"


def install(flask_app, *, admins_only: bool = False) -> None:
    """Add the recsys pages, and CSRF protection for their form, to ``flask_app`` (once)."""
    from mlflow_recsys.server import jobs
    from mlflow_recsys.server.views import bp, csrf, store_uri, strip_cors, ui_prefix

    flask_app.config["RECSYS_ADMIN_ONLY"] = admins_only
    # Refuse a bad setting or an unsafe job folder now, as the worker starts, not on the first click.
    jobs.max_comparisons()
    folder = jobs.jobs_dir(store_uri())
    if "recsys" in flask_app.blueprints:
        return
    if not flask_app.secret_key:
        # One key for every worker process, or a token made by one worker fails in another.
        flask_app.secret_key = os.environ.get("MLFLOW_FLASK_SERVER_SECRET_KEY") or jobs.secret_key(folder)
    # Only the views that call csrf.protect() are checked: MLflow's REST API takes POSTs without a token.
    flask_app.config["WTF_CSRF_CHECK_DEFAULT"] = False
    if flask_app.config.get("SESSION_COOKIE_SAMESITE") is None:  # Flask's default config has the key (None)
        flask_app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    csrf.init_app(flask_app)
    flask_app.register_blueprint(bp, url_prefix=ui_prefix() + URL_PREFIX)
    # MLflow's CORS handler runs after the blueprint's: strip its headers again, last of all.
    prefix = ui_prefix() + URL_PREFIX + "/"

    def _strip_cors_last(response):
        from flask import request

        return strip_cors(response) if request.path.startswith(prefix) else response

    flask_app.after_request_funcs.setdefault(None, []).insert(0, _strip_cors_last)
    _warm_up(flask_app)


def _warm_up(flask_app) -> None:
    """Open the store and compile the templates as the worker starts, not on its first request (seconds)."""
    from mlflow_recsys.server.views import client

    try:
        import mlflow_recsys.tracking.comparison  # noqa: F401 - the listing names candidates, Compare checks with it

        client().search_experiments(max_results=1)
        for name in ("base", "index", "experiment", "job"):
            flask_app.jinja_env.get_template(f"recsys/{name}.html")
    except Exception as exc:  # the first request reports the same problem with its context
        _log.warning("recsys pages: warm-up failed: %s", exc)


def _served(flask_app):
    """What ``mlflow server`` serves without an app: the FastAPI app around ``flask_app`` under uvicorn."""
    if os.environ.get("_MLFLOW_SGI_NAME") == "uvicorn":
        from mlflow.server.fastapi_app import create_fastapi_app

        return create_fastapi_app(flask_app)
    return flask_app


def protect(served):
    """``served`` with no ``Access-Control-Allow-*`` header on the pages' responses, whichever app built it.

    The Flask app strips them itself (:func:`install`); a FastAPI app (ours or basic-auth's, under uvicorn) adds
    MLflow's CORS middleware outside Flask, so :class:`_StripCors` goes outermost, after it.
    """
    if hasattr(served, "add_middleware"):
        from mlflow_recsys.server.views import ui_prefix

        served.add_middleware(_StripCors, prefix=ui_prefix() + URL_PREFIX + "/")
    return served


class _StripCors:
    """ASGI middleware: no ``Access-Control-Allow-*`` header on responses under ``prefix`` (MLflow's
    CORSMiddleware echoes localhost origins with credentials, which would let another local page read them)."""

    def __init__(self, app, prefix: str):
        self.app, self.prefix = app, prefix

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or not scope.get("path", "").startswith(self.prefix):
            return await self.app(scope, receive, send)

        async def send_stripped(message):
            if message.get("type") == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        (k, v)
                        for k, v in message.get("headers", [])
                        if not k.lower().startswith(b"access-control-allow-")
                    ],
                }
            await send(message)

        return await self.app(scope, receive, send_stripped)


def create_app():
    """``mlflow server --app-name recsys``: MLflow's server with the recsys pages, no authentication."""
    from mlflow.server import app as flask_app

    install(flask_app)
    return protect(_served(flask_app))


def create_auth_app():
    """``mlflow server --app-name recsys-auth``: MLflow's basic-auth in front of the server and the pages.

    The pages answer authenticated admins only (HTTP 403 for other users): they list every experiment's runs
    and write comparison runs without MLflow's per-experiment permission checks on the listing. Needs what
    ``basic-auth`` needs: ``MLFLOW_FLASK_SERVER_SECRET_KEY`` and the admin's credentials.
    """
    from mlflow.server import app as flask_app
    from mlflow.server.auth import create_app as basic_auth

    install(flask_app, admins_only=True)
    return protect(basic_auth(flask_app))
