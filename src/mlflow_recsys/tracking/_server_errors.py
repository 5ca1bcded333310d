"""A tracking server that does not answer: told apart from a missing run, reported in one line.

MLflow's HTTP client retries a failed request ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` times, waiting
``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR * 2**(n - 1)`` seconds before retry ``n`` (urllib3's backoff, plus up to
``MLFLOW_HTTP_REQUEST_BACKOFF_JITTER`` seconds), and each attempt waits at most ``MLFLOW_HTTP_REQUEST_TIMEOUT``
seconds for an answer. MLflow's defaults (7 retries, factor 2, 120 s) let one request to a dead server take about
four minutes; :data:`CLI_DEFAULTS` are what the ``mlflow-recsys`` commands use unless these variables are set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import mlflow

from mlflow_recsys.errors import TrackingServerError

#: Bounded waits for the command line: a refused connection fails after 0 + 2 + 4 seconds of backoff
#: (plus jitter, at most 1 s each); a server that accepts but never answers after 4 x 30 s + the backoff.
CLI_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


def use_cli_defaults() -> None:
    """Set :data:`CLI_DEFAULTS` for each variable the environment leaves unset."""
    for name, value in CLI_DEFAULTS.items():
        os.environ.setdefault(name, value)


def worst_case_wait_seconds() -> float:
    """The longest one request can take against a server that accepts connections but never answers:
    ``(retries + 1) * timeout + sum of backoffs + retries * jitter``, from the current environment."""
    from mlflow import environment_variables as env

    retries, factor = env.MLFLOW_HTTP_REQUEST_MAX_RETRIES.get(), env.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get()
    # urllib3 2 waits nothing before the first retry, then factor * 2**(n - 1), at most 120 s.
    backoff = sum(min(factor * 2 ** (n - 1), 120) for n in range(2, retries + 1))
    jitter = retries * env.MLFLOW_HTTP_REQUEST_BACKOFF_JITTER.get()
    return (retries + 1) * env.MLFLOW_HTTP_REQUEST_TIMEOUT.get() + backoff + jitter


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a failed connection or a time-out."""
    import requests

    failed = (TrackingServerError, requests.ConnectionError, requests.Timeout, requests.exceptions.RetryError)
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:  # a chain set by hand may loop
        if isinstance(current, failed):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@contextmanager
def translated_server_errors() -> Iterator[None]:
    """Re-raise a failed connection to the tracking server as one :class:`TrackingServerError` line."""
    try:
        yield
    except TrackingServerError:
        raise
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        from mlflow_recsys.tracking._redact import redact

        raise TrackingServerError(
            f"the tracking server {redact(mlflow.get_tracking_uri())} did not answer (waited at most "
            f"{worst_case_wait_seconds():.0f} s, as MLFLOW_HTTP_REQUEST_MAX_RETRIES and MLFLOW_HTTP_REQUEST_TIMEOUT "
            f"allow): {redact((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])}"
        ) from exc
