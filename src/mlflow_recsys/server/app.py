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
    from mlflow_recsys.server.views import bp, csrf, store_uri, ui_prefix

    flask_app.config["RECSYS_ADMIN_ONLY"] = admins_only
    if "recsys" in flask_app.blueprints:
        return
    if not flask_app.secret_key:
        # One key for every worker process, or a token made by one worker fails in another.
        flask_app.secret_key = os.environ.get("MLFLOW_FLASK_SERVER_SECRET_KEY") or jobs.secret_key(
            jobs.jobs_dir(store_uri()))
    # Only the views that call csrf.protect() are checked: MLflow's REST API takes POSTs without a token.
    flask_app.config["WTF_CSRF_CHECK_DEFAULT"] = False
    flask_app.config.setdefault("SESSION_COOKIE_SAMESITE", "Lax")
    csrf.init_app(flask_app)
    flask_app.register_blueprint(bp, url_prefix=ui_prefix() + URL_PREFIX)
    _warm_up(flask_app)


def _warm_up(flask_app) -> None:
    """Open the store and compile the templates as the worker starts, not on its first request (seconds)."""
    from mlflow_recsys.server.views import client

    try:
        client().search_experiments(max_results=1)
        for name in ("base", "index", "experiment", "job"):
            flask_app.jinja_env.get_template(f"recsys/{name}.html")
    except Exception as exc:  # the first request reports the same problem with its context
        _log.warning("recsys pages: warm-up failed: %s", exc)


def _served(flask_app):
    if os.environ.get("_MLFLOW_SGI_NAME") == "uvicorn":
        from mlflow.server.fastapi_app import create_fastapi_app

        return create_fastapi_app(flask_app)
    return flask_app


def create_app():
    """``mlflow server --app-name recsys``: MLflow's server with the recsys pages, no authentication."""
    from mlflow.server import app as flask_app

    install(flask_app)
    return _served(flask_app)


def create_auth_app():
    """``mlflow server --app-name recsys-auth``: MLflow's basic-auth in front of the server and the pages.

    The pages answer authenticated admins only (HTTP 403 for other users): they list every experiment's runs
    and write comparison runs without MLflow's per-experiment permission checks on the listing. Needs what
    ``basic-auth`` needs: ``MLFLOW_FLASK_SERVER_SECRET_KEY`` and the admin's credentials.
    """
    from mlflow.server import app as flask_app
    from mlflow.server.auth import create_app as basic_auth

    install(flask_app, admins_only=True)
    return basic_auth(flask_app)
