"""Where a tracking server's recsys pages are (``mlflow server --app-name recsys``), for links to them."""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

import mlflow

#: Environment variable: the URL of the server with the recsys pages (the server's own setting as well, for its
#: comparison processes); when set, links go there without asking the server.
SERVER_URL_ENV = "MLFLOW_RECSYS_SERVER_URL"
#: Seconds to wait for a server to say whether it has the pages.
PROBE_TIMEOUT_S = 3.0


def recsys_page_url(experiment_id: str, tracking_uri: str | None = None) -> str | None:
    """The experiment's page under ``/recsys/``, or None when the server has no such pages; without the URL's
    credentials."""
    configured = os.environ.get(SERVER_URL_ENV, "").strip().rstrip("/")
    base = configured or (tracking_uri or mlflow.get_tracking_uri()).rstrip("/")
    if not base.startswith(("http://", "https://")):
        return None
    if not configured and not _answers(base + "/recsys/"):
        return None
    parts = urlsplit(base)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])) + f"/recsys/experiments/{experiment_id}"


def _answers(url: str) -> bool:
    headers = {}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=PROBE_TIMEOUT_S) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False
