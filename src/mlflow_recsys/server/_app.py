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
    """Add the recsys pages, and CSRF protection for their form, to ``flask_app`` (once). RuntimeError if
    ``MLFLOW_FLASK_SERVER_SECRET_KEY`` is unset or empty (as MLflow's ``basic-auth`` refuses to start) or the job
    folder is unsafe; ValueError if ``MLFLOW_RECSYS_MAX_COMPARISONS`` is not a whole number from 1 to 64."""
    from mlflow.environment_variables import MLFLOW_FLASK_SERVER_SECRET_KEY as KEY

    from mlflow_recsys.server import _jobs as jobs
    from mlflow_recsys.server._views import bp, client, csrf, store_uri, ui_prefix

    # Refuse a missing key, a bad setting or an unsafe job folder as the worker starts, not on the first click.
    # (`mlflow server` checks basic-auth's key before it starts workers; it cannot check a plugin's, so uvicorn
    # restarts each failing worker, logging this error, and /health never answers.) A static key, as basic-auth
    # reads it, so that a CSRF token made by one worker (or one server behind the address) is valid in every other.
    if not KEY.get():
        raise RuntimeError(
            f"{KEY.name}: expected the key that signs the recsys pages' CSRF tokens, found it unset; set it before "
            f"starting the server, the same on every server behind one address, e.g. "
            f"export {KEY.name}=\"$(python -c 'import secrets; print(secrets.token_hex(32))')\""
        )
    flask_app.secret_key = KEY.get()
    flask_app.config["RECSYS_ADMIN_ONLY"] = admins_only
    jobs.max_comparisons()
    jobs.jobs_dir(store_uri())
    if "recsys" in flask_app.blueprints:
        return
    # Only the views that call csrf.protect() are checked: MLflow's REST API takes POSTs without a token.
    flask_app.config["WTF_CSRF_CHECK_DEFAULT"] = False
    if flask_app.config.get("SESSION_COOKIE_SAMESITE") is None:
        flask_app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    csrf.init_app(flask_app)
    flask_app.register_blueprint(bp, url_prefix=ui_prefix() + URL_PREFIX)
    # Open the store and compile the templates now, not on the worker's first request (seconds).
    try:
        import mlflow_recsys.tracking._comparison  # noqa: F401 - the listing names candidates, Compare checks with it

        client().search_experiments(max_results=1)
        for name in ("base", "index", "experiment", "job"):
            flask_app.jinja_env.get_template(f"recsys/{name}.html")
    except Exception as exc:  # the first request reports the same problem with its context
        _log.warning("recsys pages: warm-up failed: %s", exc)


#: The headers MLflow's CORS handlers add (Flask-CORS in the Flask app, Starlette's CORSMiddleware around it
#: under uvicorn): they echo localhost origins with credentials, which would let another local page read the pages.
_CORS = "access-control-allow-"


def protect(served):
    """``served`` with no ``Access-Control-Allow-*`` header on the pages' responses, whichever app built it.

    The headers are taken off outermost, after every CORS handler has run: as ASGI middleware around a FastAPI
    app (ours or basic-auth's, under uvicorn), else around the Flask app's WSGI callable (gunicorn, waitress).
    """
    from mlflow_recsys.server._views import ui_prefix

    prefix = ui_prefix() + URL_PREFIX + "/"
    if hasattr(served, "add_middleware"):
        served.add_middleware(_StripCors, prefix=prefix)
    elif not isinstance(served.wsgi_app, _StripCorsWsgi):  # the one Flask app of the process, wrapped once
        served.wsgi_app = _StripCorsWsgi(served.wsgi_app, prefix)
    return served


class _StripCors:
    """ASGI middleware: no ``Access-Control-Allow-*`` header on responses under ``prefix``."""

    def __init__(self, app, prefix: str):
        self.app, self.prefix = app, prefix

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or not scope.get("path", "").startswith(self.prefix):
            return await self.app(scope, receive, send)

        async def send_stripped(message):
            if message.get("type") == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if not k.lower().startswith(_CORS.encode())]
                message = {**message, "headers": headers}
            await send(message)

        return await self.app(scope, receive, send_stripped)


class _StripCorsWsgi:
    """WSGI middleware: no ``Access-Control-Allow-*`` header on responses under ``prefix``."""

    def __init__(self, app, prefix: str):
        self.app, self.prefix = app, prefix

    def __call__(self, environ, start_response):
        if not environ.get("PATH_INFO", "").startswith(self.prefix):
            return self.app(environ, start_response)

        def start_stripped(status, headers, exc_info=None):
            return start_response(status, [(k, v) for k, v in headers if not k.lower().startswith(_CORS)], exc_info)

        return self.app(environ, start_stripped)


def create_app():
    """``mlflow server --app-name recsys``: MLflow's server with the recsys pages, no authentication."""
    from mlflow.server import app as flask_app

    install(flask_app)
    if os.environ.get("_MLFLOW_SGI_NAME") == "uvicorn":  # what `mlflow server` serves there without an app
        from mlflow.server.fastapi_app import create_fastapi_app

        return protect(create_fastapi_app(flask_app))
    return protect(flask_app)


def create_auth_app():
    """``mlflow server --app-name recsys-auth``: MLflow's basic-auth in front of the server and the pages.

    The pages answer authenticated admins only (HTTP 403 for other users): they list every experiment's runs
    and write comparison runs without MLflow's per-experiment permission checks on the listing. Needs what
    ``basic-auth`` needs: ``MLFLOW_FLASK_SERVER_SECRET_KEY`` (which ``recsys`` needs too) and the admin's
    credentials.
    """
    from mlflow.server import app as flask_app
    from mlflow.server.auth import create_app as basic_auth

    install(flask_app, admins_only=True)
    return protect(basic_auth(flask_app))
