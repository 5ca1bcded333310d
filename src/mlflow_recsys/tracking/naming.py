"""The one place where metric keys become MLflow metric names and back.

MLflow metric names may not contain ``@``; ``ndcg@100`` is logged as
``ndcg_at_100``.
"""

from __future__ import annotations

import re

_KEY = re.compile(r"^([a-z_]+)@(\d+)$")
_NAME = re.compile(r"^([a-z_]+)_at_(\d+)$")


def mlflow_metric_name(key: str) -> str:
    """``"ndcg@100"`` -> ``"ndcg_at_100"``.

    Raises
    ------
    ValueError
        If ``key`` is not of the form ``name@k``.
    """
    match = _KEY.match(key)
    if not match:
        raise ValueError(f"key: expected a metric key like 'ndcg@100', found {key!r}")
    return f"{match.group(1)}_at_{match.group(2)}"


def metric_key(name: str) -> str:
    """``"ndcg_at_100"`` -> ``"ndcg@100"`` (the inverse of :func:`mlflow_metric_name`).

    Raises
    ------
    ValueError
        If ``name`` is not of the form ``name_at_k``.
    """
    match = _NAME.match(name)
    if not match:
        raise ValueError(f"name: expected an MLflow metric name like 'ndcg_at_100', found {name!r}")
    return f"{match.group(1)}@{match.group(2)}"


def safe_name(text: str) -> str:
    """Model names and keys made safe for MLflow metric names (letters, digits, ``_-./ ``)."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", text.replace("@", "_at_"))
