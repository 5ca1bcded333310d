"""The one place where metric keys and model names become MLflow names and texts, one-to-one.

MLflow metric names may not contain ``@``; ``ndcg@100`` is logged as ``ndcg_at_100``. Keys have the form of
:data:`mlflow_recsys.metrics.KEY_PATTERN`. Model names become labels of metric names (:func:`model_label`), and a
pair of models a text (:func:`pair_label`); a comparison run's metric names
(``<candidate>.vs.<baseline>.<metric>.<field>``) are made by :func:`comparison_metric_name` alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from mlflow_recsys._digests import text_digest
from mlflow_recsys.metrics import KEY_PATTERN, parse_metric_keys


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
    head, at, k = name.rpartition("_at_")
    if not at or not KEY_PATTERN.match(f"{head}@{k}"):
        raise ValueError(f"name: expected an MLflow metric name like 'ndcg_at_100', found {name!r}")
    return f"{head}@{k}"


def is_metric_key(key: str) -> bool:
    """Whether ``key`` names a metric this package computes (``ndcg@100``)."""
    try:
        parse_metric_keys([key])
    except ValueError:
        return False
    return True


def logged_metric_keys(names: Iterable[str]) -> list[str]:
    """The metric keys among a run's MLflow metric names, sorted (``ndcg_at_100`` -> ``ndcg@100``); training
    curves, timings and counts are left out."""
    keys = [f"{head}@{k}" for head, at, k in (n.rpartition("_at_") for n in names) if at]
    return sorted(key for key in keys if is_metric_key(key))


#: A model name used as it is in metric names: ASCII letters, digits, ``_`` and ``-``.
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")


def model_label(name: str) -> str:
    """A model name as it appears in MLflow metric names, one-to-one: a plain name as it is, any other with its
    other characters made ``_`` and a hash of the whole name appended (``ELSA+`` -> ``ELSA_-<hash>``, apart from
    ``ELSA_``), so no label holds ``.``, ``/`` or ``..``, which MLflow reads as parts of a path."""
    if not name:
        raise ValueError("name: expected a non-empty model name, found ''")
    if _PLAIN.match(name):
        return name
    return re.sub(r"[^A-Za-z0-9_\-]", "_", name)[:60] + "-" + text_digest(name, 8)


#: What joins a candidate's and a baseline's name in text: ``ELSA vs EASE``.
PAIR_SEPARATOR = " vs "


def pair_label(baseline: str, candidate: str) -> str:
    """A (baseline, candidate) pair as one text, one-to-one: ``"ELSA vs EASE"``; names that would make it
    ambiguous (holding, starting or ending with ``vs``, or starting with ``"``) as JSON strings. For people and
    file columns; code keys structures by the pair itself."""
    if all(not name.startswith('"') and PAIR_SEPARATOR not in f" {name} " for name in (baseline, candidate)):
        return f"{candidate}{PAIR_SEPARATOR}{baseline}"
    return f"{json.dumps(candidate, ensure_ascii=False)}{PAIR_SEPARATOR}{json.dumps(baseline, ensure_ascii=False)}"


def comparison_metric_name(baseline: str, candidate: str, metric: str, field: str) -> str:
    """``<candidate label>.vs.<baseline label>.<metric>.<field>`` (``ELSA.vs.EASE.ndcg_at_100.p_value``), before
    MLflow's length limit; the same with or without a reference, so one query finds a hypothesis in every run. A
    :func:`model_label` holds no ``.``, so no two pairs share a prefix."""
    return f"{model_label(candidate)}.vs.{model_label(baseline)}.{mlflow_metric_name(metric)}.{field}"
