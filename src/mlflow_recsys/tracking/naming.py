"""The one place where metric keys become MLflow metric names and back.

MLflow metric names may not contain ``@``; ``ndcg@100`` is logged as
``ndcg_at_100``. Keys have the form of :data:`mlflow_recsys.metrics.KEY_PATTERN`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mlflow_recsys._digests import text_digest
from mlflow_recsys.metrics import KEY_PATTERN, parse_metric_keys

_NAME = re.compile(r"^([a-z_]+)_at_([0-9]+)$")


def mlflow_metric_name(key: str) -> str:
    """``"ndcg@100"`` -> ``"ndcg_at_100"``.

    Raises
    ------
    ValueError
        If ``key`` is not of the form ``name@k``.
    """
    match = KEY_PATTERN.match(key)
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


def logged_metric_keys(names: Iterable[str]) -> list[str]:
    """The metric keys of this package among a run's MLflow metric names, sorted (``ndcg_at_100`` -> ``ndcg@100``).

    Names that are not an aggregate of a known metric key (training curves, timings, counts) are left out.
    """
    keys = []
    for name in names:
        try:
            key = metric_key(name)
            parse_metric_keys([key])
        except ValueError:
            continue
        keys.append(key)
    return sorted(keys)


#: A model name used as it is in metric names: ASCII letters, digits, ``_`` and ``-``.
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")


def model_label(name: str) -> str:
    """A model name as it appears in MLflow metric names, one-to-one.

    A plain name (ASCII letters, digits, ``_``, ``-``) is kept as it is. Any
    other name has every other character replaced by ``_`` and a hash of the
    whole name appended (``ELSA+`` -> ``ELSA_-<hash>``), so ``ELSA+`` and
    ``ELSA_`` stay apart, and no label holds ``.``, ``/`` or ``..``, which
    MLflow reads as parts of a path.

    Raises
    ------
    ValueError
        If ``name`` is empty.
    """
    if not name:
        raise ValueError("name: expected a non-empty model name, found ''")
    if _PLAIN.match(name):
        return name
    return re.sub(r"[^A-Za-z0-9_\-]", "_", name)[:60] + "-" + text_digest(name, 8)
