"""Credentials out of anything this package logs to MLflow or prints: :func:`redact`."""

from __future__ import annotations

import os
import re

#: What a redacted secret reads as.
MASK = "***"

# scheme://userinfo@host: greedy up to the authority's last "@" (a password may hold an unencoded "@"), never past
# the first "/", "?", "#" or blank, so a later "@" (an e-mail address, a metric key "ndcg@100") is left alone. One
# slash is enough: a URL that went through pathlib.Path reads "https:/user:pw@host/...". MLflow's model URIs
# "models:/<name>@<alias>" hold no authority: their "@" names an alias.
_USERINFO = re.compile(r"(?P<scheme>\b(?!models:)[A-Za-z][A-Za-z0-9+.-]*:/+)[^\s/?#]*@", re.IGNORECASE)

# name=value where the name says it holds a secret: URL query parameters (?token=, &X-Amz-Signature=, &sig=),
# libpq and ODBC connection strings (password=..., AccountKey=...;). The value runs to the next separator.
_SECRET_NAME = r"[\w.-]*(?:pass|pwd|secret|token|key|sig|credential|auth)[\w.-]*"
_NAMED_VALUE = re.compile(
    rf"(?P<name>(?:(?<=[?&;])|(?<![^\s'\"(,])){_SECRET_NAME})=(?P<value>[^&;#\s'\"]*)", re.IGNORECASE
)

# Databricks personal access tokens ("dapi" and 32 hex digits, sometimes "-2" after) and bearer credentials (16
# characters at least, so prose such as "Bearer tokens" is left alone).
_DATABRICKS_TOKEN = re.compile(r"\bdapi[0-9a-f]{32}(?:-\d+)?\b", re.IGNORECASE)
_BEARER = re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{16,}", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every credential it holds, anywhere in it, replaced by ``***``; idempotent.

    Masked: a URL's whole user information, user name included (often the secret itself: ``https://<token>@...``);
    the value of a ``name=value`` pair whose name holds ``pass``, ``pwd``, ``secret``, ``token``, ``key``, ``sig``,
    ``credential`` or ``auth`` in any case (``X-Amz-Signature``, ``AccountKey``; ``monkey=3`` too, the safe side);
    Databricks tokens (``dapi`` + 32 hex digits) and what follows ``Bearer``. Host, port and path stay, so a message
    still says where the request went. Not recognised: ``user:pw@host`` with no scheme, a bare password.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a str, found {type(text).__name__}")
    if ":/" in text:
        text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    if "=" in text:
        text = _NAMED_VALUE.sub(lambda m: f"{m['name']}={MASK}" if m["value"] else m[0], text)
    text = _DATABRICKS_TOKEN.sub(f"dapi{MASK}", text)
    return _BEARER.sub(f"Bearer {MASK}", text)


#: MLflow's switch for the "View run ... at: <URL>" line it prints when a run on a tracking server ends.
SUPPRESS_RUN_LINKS_ENV = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"


def hide_run_links_with_credentials(tracking_uri: str) -> bool:
    """Stop MLflow printing run links, whose URL holds the tracking URI's ``user:password@``, when ``tracking_uri``
    has credentials; in the environment, so the processes this one starts print none either. Whether it did."""
    if redact(tracking_uri) == tracking_uri:
        return False
    os.environ[SUPPRESS_RUN_LINKS_ENV] = "true"
    return True
