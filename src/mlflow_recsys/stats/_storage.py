"""A :class:`~mlflow_recsys.stats.ComparisonReport` saved to disk and read back, bit for bit.

A saved report is a directory of two files: ``comparisons.parquet``, one row per hypothesis holding every field of
:class:`~mlflow_recsys.stats.PairwiseComparison` (the resampling replicates as ``list<double>`` columns), and
``report.json``, the report-wide fields under a format name and version; a report with slices adds ``slices.parquet``
and ``heterogeneity.parquet`` (:class:`~mlflow_recsys.stats.SliceAnalysis`' two frames), their definitions in
``report.json``. Only the format and version are checked on
reading: the files are this package's own output.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mlflow_recsys import _envelope
from mlflow_recsys._atomic import atomic_directory
from mlflow_recsys.stats._comparison import ComparisonReport, PairwiseComparison
from mlflow_recsys.stats._exposure import ExposureAnalysis, GlobalMetricComparison
from mlflow_recsys.stats._slices import Heterogeneity, SliceAnalysis, StratumComparison

#: File of a saved report holding one row per hypothesis.
COMPARISONS_FILE = "comparisons.parquet"
#: File of a saved report holding the report-wide fields, the format and the package version.
REPORT_FILE = "report.json"
#: Files of a saved report with slices: the stratum rows and the heterogeneity tests.
SLICES_FILE = "slices.parquet"
#: File of a saved report with global metrics: their rows (:data:`~mlflow_recsys.stats.EXPOSURE_COLUMNS`).
GLOBAL_METRICS_FILE = "global_metrics.parquet"
HETEROGENEITY_FILE = "heterogeneity.parquet"
#: Every file a saved report may hold: the first two always, the others with slices or global metrics.
SAVED_FILES = (REPORT_FILE, COMPARISONS_FILE, SLICES_FILE, HETEROGENEITY_FILE, GLOBAL_METRICS_FILE)
#: The ``format`` field of ``report.json``.
FORMAT = "mlflow-recsys-comparison-report"
#: The ``format_version`` this module writes and the only one it reads.
FORMAT_VERSION = 1

#: The Arrow type of each annotation used by PairwiseComparison's fields. ``random_state`` (``int | None``) may exceed
#: int64, so it is stored as decimal text. A field of a new type fails here, at import, not in a user's save.
_ARROW_TYPES = {
    "str": pa.string(),
    "str | None": pa.string(),
    "int": pa.int64(),
    "int | None": pa.string(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "np.ndarray": pa.list_(pa.float64()),
    "np.ndarray | None": pa.list_(pa.float64()),
}
# Postponed annotations: each field's type is its annotation's text.
SCHEMA = pa.schema([(f.name, _ARROW_TYPES[cast(str, f.type)]) for f in dataclasses.fields(PairwiseComparison)])


def save_report(report: ComparisonReport, path: str | os.PathLike) -> Path:
    """Save ``report`` as the directory ``path``: ``comparisons.parquet`` and ``report.json``.

    ``comparisons.parquet`` holds one row per hypothesis, in order, with a column for every field of
    :class:`~mlflow_recsys.stats.PairwiseComparison` (:data:`SCHEMA`): text as ``string``, counts as ``int64``, the
    other numbers as ``float64`` (NaN and infinities kept), flags as ``bool``, ``random_state`` as decimal text (it may
    exceed int64), and the arrays ``unit_differences``, ``null_distribution`` and ``bootstrap_distribution`` as
    ``list<double>``; ``None`` is null. ``report.json`` holds ``format`` (:data:`FORMAT`), ``format_version``
    (:data:`FORMAT_VERSION`), ``package_version``, ``correction``, ``reference``, ``primary`` and ``n_hypotheses``.

    Both files are written into a hidden temporary directory beside ``path``, which is then renamed to ``path``, so a
    failure leaves ``path`` as it was. A directory an earlier ``save_report`` wrote (only its files, in this
    format) is replaced: it is renamed aside, the new one renamed into place, and the old one deleted.

    Parameters
    ----------
    report:
        The report to save.
    path:
        The directory to create or replace; its parent must be an existing directory.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        If ``report`` is not a ComparisonReport or a field holds a value Arrow cannot store as its column's type (naming
        the hypothesis and field); nothing is written then.
    FileNotFoundError, NotADirectoryError
        If the parent of ``path`` does not exist, or is not a directory (naming it); checked before anything is written.
    FileExistsError
        If ``path`` exists and is not a directory written by ``save_report``.
    """
    from mlflow_recsys import __version__

    if not isinstance(report, ComparisonReport):
        raise TypeError(f"report: expected a ComparisonReport, found {type(report).__name__}")
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        error = NotADirectoryError if parent.exists() else FileNotFoundError
        found = "something else" if parent.exists() else "nothing"
        raise error(f"path: expected its parent {str(parent)!r} to be an existing directory, found {found} there")
    table = pa.Table.from_arrays([_column(report, field) for field in SCHEMA], schema=SCHEMA)
    meta: dict[str, Any] = {"package_version": __version__, "correction": report.correction}
    meta |= {"reference": report.reference, "primary": report.primary, "n_hypotheses": len(report.comparisons)}
    if report.slices is not None:
        meta["slice_definitions"] = report.slices.definitions
    if report.global_metrics is not None:
        meta["global_metrics"] = {
            "reference": report.global_metrics.reference,
            "n_items": report.global_metrics.n_items,
        }
    with atomic_directory(path, replace=_replaces_a_report(path)) as tmp:
        pq.write_table(table, tmp / COMPARISONS_FILE)
        if report.slices is not None:
            report.slices.to_frame().to_parquet(tmp / SLICES_FILE, index=False)
            report.slices.heterogeneity_frame().to_parquet(tmp / HETEROGENEITY_FILE, index=False)
        if report.global_metrics is not None:  # the rows without their replicates
            report.global_metrics.to_frame().to_parquet(tmp / GLOBAL_METRICS_FILE, index=False)
        (tmp / REPORT_FILE).write_text(_envelope.dumps(FORMAT, FORMAT_VERSION, meta), encoding="utf-8")
    return path


def load_report(path: str | os.PathLike) -> ComparisonReport:
    """Read a report that :func:`save_report` wrote to the directory ``path``.

    Every field comes back with its declared type: ``str``, Python ``int``, ``float`` (bit-identical to the saved one),
    ``bool``, ``None`` where it was ``None``, and new float64 ``(n,)`` arrays. Only ``report.json``'s ``format`` and
    ``format_version`` are checked: the files are this package's own output, read as written.

    Parameters
    ----------
    path:
        A directory holding ``comparisons.parquet`` and ``report.json``.

    Returns
    -------
    ComparisonReport
        Equal, field by field, to the report that was saved.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Naming the file: if ``path`` is not a directory, a file is missing, or ``report.json`` is not JSON of this
        format or has another ``format_version`` (an integer, not ``true`` or ``1.0``).
    OSError
        If a file exists but cannot be read (e.g. :class:`PermissionError`), raised as the operating system reports it.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: expected a saved comparison report, found nothing at {str(path)!r}")
    if not path.is_dir():
        raise ValueError(f"path: expected a directory written by save_report, found a file at {str(path)!r}")
    for file in (path / REPORT_FILE, path / COMPARISONS_FILE):
        if not file.is_file():
            raise ValueError(f"{file}: expected this file of a saved comparison report, found none")
    meta = _envelope.read_json(path / REPORT_FILE, FORMAT, FORMAT_VERSION)
    with open(path / COMPARISONS_FILE, "rb") as handle:  # an unreadable file raises OSError here, as report.json's
        table = pq.read_table(handle)
    columns: dict[str, list[Any]] = {
        field.name: [None if not v.is_valid else v.values.to_numpy(zero_copy_only=False).copy() for v in column]
        if pa.types.is_list(field.type)
        else column.to_pylist()
        for field in SCHEMA
        if field.name in table.column_names
        for column in [table.column(field.name)]
    }
    # A report saved before a field with a default existed reads back with that default (the comparison never had
    # it); a missing field without one is a file this package did not write.
    for field in dataclasses.fields(PairwiseComparison):
        if field.name not in columns:
            if field.default is dataclasses.MISSING:
                raise ValueError(f"{path / COMPARISONS_FILE}: expected a column {field.name!r}, found none")
            columns[field.name] = [field.default] * table.num_rows
    columns["random_state"] = [None if v is None else int(v) for v in columns["random_state"]]
    comparisons = tuple(
        PairwiseComparison(**{name: values[i] for name, values in columns.items()}) for i in range(table.num_rows)
    )
    return ComparisonReport(
        comparisons, meta["correction"], meta["reference"], meta["primary"], _slices(path, meta), _global(path, meta)
    )


def _slices(path: Path, meta: dict) -> SliceAnalysis | None:
    """The saved slices, or ``None`` when the report had none."""
    if "slice_definitions" not in meta:
        return None
    frames = []
    for file in (path / SLICES_FILE, path / HETEROGENEITY_FILE):
        if not file.is_file():
            raise ValueError(f"{file}: expected this file of a saved report with slices, found none")
        frames.append(pd.read_parquet(file))
    rows = tuple(StratumComparison(**_python(r)) for r in frames[0].to_dict("records"))
    tests = tuple(Heterogeneity(**_python(r)) for r in frames[1].to_dict("records"))
    return SliceAnalysis(rows, tests, dict(meta["slice_definitions"]))


def _global(path: Path, meta: dict) -> ExposureAnalysis | None:
    """The saved global-metric rows (their replicates were not saved: empty arrays), or ``None``."""
    if "global_metrics" not in meta:
        return None
    file = path / GLOBAL_METRICS_FILE
    if not file.is_file():
        raise ValueError(f"{file}: expected this file of a saved report with global metrics, found none")
    records = pd.read_parquet(file).to_dict("records")
    empty: dict[str, Any] = {"bootstrap_distribution": np.empty(0), "null_distribution": np.empty(0)}
    rows = tuple(GlobalMetricComparison(**_python(r), **empty) for r in records)
    return ExposureAnalysis(rows, meta["global_metrics"]["reference"], int(meta["global_metrics"]["n_items"]))


def _python(record: dict) -> dict:
    """A frame record's numpy scalars as the Python values the dataclasses hold."""
    return {k: v.item() if hasattr(v, "item") else v for k, v in record.items()}


def _column(report: ComparisonReport, field: pa.Field) -> pa.Array:
    """One field of every comparison as an Arrow array; TypeError naming the first value Arrow refuses."""
    values = [getattr(c, field.name) for c in report.comparisons]
    if field.name == "random_state":
        values = [None if v is None else str(int(v)) for v in values]
    for i, value in enumerate(values):
        try:
            pa.array([value], type=field.type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            raise TypeError(
                f"report.comparisons[{i}].{field.name}: expected a value stored as {field.type}, "
                f"found {type(value).__name__}"
            ) from None
    return pa.array(values, type=field.type)


def _replaces_a_report(path: Path) -> bool:
    """True when ``path`` is a directory an earlier save_report wrote; False when absent; else FileExistsError."""
    if not os.path.lexists(path):
        return False
    if path.is_symlink() or not path.is_dir():
        kind = "a symbolic link" if path.is_symlink() else "a file"
        raise FileExistsError(
            f"path: expected a new path or a directory written by save_report, found {kind} at {str(path)!r}"
        )
    entries = sorted(os.listdir(path))
    try:
        ours = set(entries) <= set(SAVED_FILES) and bool(
            _envelope.read_json(path / REPORT_FILE, FORMAT, FORMAT_VERSION)
        )
    except (OSError, ValueError):
        ours = False
    if not ours:
        shown = entries[:5] + (["..."] if len(entries) > 5 else [])
        raise FileExistsError(
            f"path: expected a new path or a directory written by save_report, found a directory holding "
            f"{shown} at {str(path)!r}; it is left as it is"
        )
    return True
