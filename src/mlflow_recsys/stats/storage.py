"""A :class:`~mlflow_recsys.stats.ComparisonReport` saved to disk and read back, bit for bit.

A saved report is a directory of two files: ``comparisons.parquet``, one row
per hypothesis holding every field of
:class:`~mlflow_recsys.stats.PairwiseComparison` (the resampling replicates as
``list<double>`` columns), and ``report.json``, the report-wide fields with a
format name and version. :func:`load_report` gives back a report equal to the
saved one field by field, floats bit for bit, and refuses a file whose values
no report could hold.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from mlflow_recsys import _envelope
from mlflow_recsys._atomic import atomic_directory
from mlflow_recsys.stats.comparison import ComparisonReport, PairwiseComparison
from mlflow_recsys.stats.corrections import CORRECTIONS
from mlflow_recsys.stats.settings import ALTERNATIVES, INTERVAL_METHODS, TEST_METHODS, ZERO_METHODS

#: File of a saved report holding one row per hypothesis.
COMPARISONS_FILE = "comparisons.parquet"
#: File of a saved report holding the report-wide fields, the format and the package version.
REPORT_FILE = "report.json"
#: The ``format`` field of ``report.json``.
FORMAT = "mlflow-recsys-comparison-report"
#: The ``format_version`` this module writes and the only one it reads.
FORMAT_VERSION = 1

#: The Arrow type of each annotation used by PairwiseComparison's fields. ``random_state`` (``int | None``) may
#: exceed int64, so it is stored as decimal text. A field of a new type fails here, at import, not in a user's save.
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
_NULLABLE = {f.name for f in dataclasses.fields(PairwiseComparison) if f.type.endswith("| None")}
#: The fields of ``report.json`` besides the format, its version and the package version.
_META_FIELDS = ("correction", "reference", "primary", "n_hypotheses")
_DECIMAL = re.compile(r"-?[0-9]+")


def _one_of(*allowed):
    return (lambda v: v in allowed), f"one of {allowed}"


#: What :func:`load_report` accepts in a column, as read from the file: (test of one value, what it expects). NaN
#: fails every comparison.
_VALID = {
    "direction": _one_of("better", "worse", "inconclusive"),
    "alternative": _one_of(*ALTERNATIVES),
    "test_method": _one_of(*TEST_METHODS, "randomization-exact", "wilcoxon-exact"),
    "interval_method": _one_of(*INTERVAL_METHODS),
    "family": _one_of("primary", "secondary", "all"),
    "zero_method": _one_of(None, *ZERO_METHODS),
    "p_value": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "adjusted_p_value": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "confidence_level": (lambda v: 0 < v < 1, "a number strictly between 0 and 1"),
    "baseline_seeds": (lambda v: v >= 1, "at least 1"),
    "candidate_seeds": (lambda v: v >= 1, "at least 1"),
    "random_state": (lambda v: v is None or _DECIMAL.fullmatch(v) is not None, "decimal integer text"),
}


def save_report(report: ComparisonReport, path: str | os.PathLike) -> Path:
    """Save ``report`` as the directory ``path``: ``comparisons.parquet`` and ``report.json``.

    ``comparisons.parquet`` holds one row per hypothesis, in order, with a
    column for every field of :class:`~mlflow_recsys.stats.PairwiseComparison`
    (:data:`SCHEMA`): text as ``string``, counts as ``int64``, the other
    numbers as ``float64`` (NaN and infinities kept), flags as ``bool``,
    ``random_state`` as decimal text (it may exceed int64), and the arrays
    ``unit_differences``, ``null_distribution`` and ``bootstrap_distribution``
    as ``list<double>``; ``None`` is null. ``report.json`` holds ``format``
    (:data:`FORMAT`), ``format_version`` (:data:`FORMAT_VERSION`),
    ``package_version``, ``correction``, ``reference``, ``primary`` and
    ``n_hypotheses``.

    Both files are written into a hidden temporary directory beside ``path``,
    which is then renamed to ``path``, so a failure leaves ``path`` as it was.
    A directory an earlier ``save_report`` wrote (only those two files, in this
    format) is replaced: it is renamed aside, the new one renamed into place,
    and the old one deleted.

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
        If ``report`` is not a ComparisonReport or a field holds a value Arrow
        cannot store as its column's type (naming the hypothesis and field);
        nothing is written then.
    FileNotFoundError, NotADirectoryError
        If the parent of ``path`` does not exist, or is not a directory (naming
        it); checked before anything is written.
    FileExistsError
        If ``path`` exists and is not a directory written by ``save_report``.
    """
    if not isinstance(report, ComparisonReport):
        raise TypeError(f"report: expected a ComparisonReport, found {type(report).__name__}")
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        error = NotADirectoryError if parent.exists() else FileNotFoundError
        found = "something else" if parent.exists() else "nothing"
        raise error(f"path: expected its parent {str(parent)!r} to be an existing directory, found {found} there")
    table = _comparisons_table(report)
    meta = _envelope.dumps(FORMAT, FORMAT_VERSION, _report_meta(report))
    with atomic_directory(path, replace=_existing_report_iv(path)) as tmp:
        pq.write_table(table, tmp / COMPARISONS_FILE)
        (tmp / REPORT_FILE).write_text(meta, encoding="utf-8")
    return path


def load_report(path: str | os.PathLike) -> ComparisonReport:
    """Read a report that :func:`save_report` wrote to the directory ``path``.

    Every field comes back with its declared type: ``str``, Python ``int``,
    ``float`` (bit-identical to the saved one), ``bool``, ``None`` where it
    was ``None``, and new float64 ``(n,)`` arrays. A loaded report is used as
    a computed one would be, so its values are checked too: each text column
    holds one of the values a comparison writes (``direction``,
    ``alternative``, ``test_method``, ``interval_method``, ``family``,
    ``zero_method``), p-values and adjusted p-values lie in [0, 1] (NaN is
    refused), ``confidence_level`` in (0, 1), seed counts are at least 1,
    ``random_state`` is decimal integer text, and each ``unit_differences``
    holds ``n_units`` values.

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
        Naming the file: if ``path`` is not a directory, a file is missing,
        ``report.json`` is not JSON of this format, has another
        ``format_version`` (an integer, not ``true`` or ``1.0``) or lacks a
        field, ``comparisons.parquet`` is not Parquet, a column is missing or
        of another type, the number of rows disagrees with ``n_hypotheses``, or
        a value fails the checks above (naming the column and the first bad
        row).
    OSError
        If a file exists but cannot be read (e.g. :class:`PermissionError`),
        raised as the operating system reports it.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: expected a saved comparison report, found nothing at {str(path)!r}")
    if not path.is_dir():
        raise ValueError(f"path: expected a directory written by save_report, found a file at {str(path)!r}")
    meta_path, table_path = path / REPORT_FILE, path / COMPARISONS_FILE
    for file in (meta_path, table_path):
        if not file.is_file():
            raise ValueError(f"{file}: expected this file of a saved comparison report, found none")
    meta = _read_meta(meta_path)
    with open(table_path, "rb") as handle:  # an unreadable file raises OSError here, as report.json's does
        try:
            table = pq.read_table(handle)
        except (pa.ArrowException, OSError) as exc:
            raise ValueError(f"{table_path}: expected a Parquet file, could not read it ({exc})") from None
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise ValueError(f"{table_path}: expected columns {missing}, found {table.column_names}")
    for field in SCHEMA:
        found = table.schema.field(field.name).type
        if found != field.type:
            raise ValueError(f"{table_path}: column {field.name!r} expected type {field.type}, found {found}")
        if field.name not in _NULLABLE and table.column(field.name).null_count:
            raise ValueError(
                f"{table_path}: column {field.name!r} expected no nulls, found {table.column(field.name).null_count}"
            )
    if table.num_rows != meta["n_hypotheses"]:
        raise ValueError(
            f"{table_path}: expected {meta['n_hypotheses']} rows (n_hypotheses in {REPORT_FILE}), "
            f"found {table.num_rows}"
        )
    columns: dict[str, list[Any]] = {}
    for field in SCHEMA:
        column = table.column(field.name)
        if pa.types.is_list(field.type):
            columns[field.name] = [
                None if not v.is_valid else v.values.to_numpy(zero_copy_only=False).copy() for v in column
            ]
        else:
            columns[field.name] = column.to_pylist()
    _check_values(columns, table_path)
    columns["random_state"] = [None if v is None else int(v) for v in columns["random_state"]]
    comparisons = tuple(
        PairwiseComparison(**{name: values[i] for name, values in columns.items()}) for i in range(table.num_rows)
    )
    return ComparisonReport(
        comparisons=comparisons, correction=meta["correction"], reference=meta["reference"], primary=meta["primary"]
    )


def _check_values(columns: dict[str, list], table_path: Path) -> None:
    """ValueError naming the file, the column and the first row whose value no comparison writes."""
    for name, (valid, expected) in _VALID.items():
        for row, value in enumerate(columns[name]):
            if not valid(value):
                raise ValueError(f"{table_path}: column {name!r} row {row}: expected {expected}, found {value!r}")
    for row, (d, n) in enumerate(zip(columns["unit_differences"], columns["n_units"], strict=True)):
        if len(d) != n:
            raise ValueError(
                f"{table_path}: column 'unit_differences' row {row}: expected n_units = {n} values, found {len(d)}"
            )


def _comparisons_table(report: ComparisonReport) -> pa.Table:
    """The comparisons as an Arrow table of :data:`SCHEMA`; TypeError naming the hypothesis and field."""
    columns = []
    for field in SCHEMA:
        values = [getattr(c, field.name) for c in report.comparisons]
        if field.name == "random_state":
            values = [None if v is None else str(int(v)) for v in values]
        try:
            columns.append(pa.array(values, type=field.type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            for i, value in enumerate(values):  # name the first value Arrow refuses
                try:
                    pa.array([value], type=field.type)
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    raise TypeError(
                        f"report.comparisons[{i}].{field.name}: expected a value stored as "
                        f"{field.type}, found {type(value).__name__}"
                    ) from None
            raise
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def _report_meta(report: ComparisonReport) -> dict:
    from mlflow_recsys import __version__

    return {
        "package_version": __version__,
        "correction": report.correction,
        "reference": report.reference,
        "primary": report.primary,
        "n_hypotheses": len(report.comparisons),
    }


def _read_meta(meta_path: Path) -> dict:
    meta = _envelope.read_json(meta_path, FORMAT, FORMAT_VERSION)
    missing = [name for name in _META_FIELDS if name not in meta]
    if missing:
        raise ValueError(f"{meta_path}: expected the fields {list(_META_FIELDS)}, found no {missing}")
    if meta["correction"] not in CORRECTIONS:
        raise ValueError(f"{meta_path}: expected correction in {CORRECTIONS}, found {meta['correction']!r}")
    for name in ("reference", "primary"):
        if meta[name] is not None and not isinstance(meta[name], str):
            raise ValueError(f"{meta_path}: expected {name} to be a string or null, found {meta[name]!r}")
    n = meta["n_hypotheses"]
    if type(n) is not int or n < 0:
        raise ValueError(f"{meta_path}: expected n_hypotheses to be a non-negative integer, found {n!r}")
    return meta


def _existing_report_iv(path: Path) -> bool:
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
        ours = set(entries) <= {REPORT_FILE, COMPARISONS_FILE} and bool(_read_meta(path / REPORT_FILE))
    except (OSError, ValueError):
        ours = False
    if not ours:
        shown = entries[:5] + (["..."] if len(entries) > 5 else [])
        raise FileExistsError(
            f"path: expected a new path or a directory written by save_report, found a directory holding "
            f"{shown} at {str(path)!r}; it is left as it is"
        )
    return True
