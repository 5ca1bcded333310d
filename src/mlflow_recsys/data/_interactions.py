"""Interaction logs as the one frame every loader returns: ``user`` and ``item`` (int64 when all raw ids are
integers, else str), ``value`` (float64: a rating or a count) and, when the source has times, ``timestamp`` (int64,
Unix seconds). Your own logs enter through :func:`from_interactions` (a frame) or :func:`read_interactions_file`
(a CSV or Parquet file); the registry's archives pass their ratings file through the same :func:`normalise`."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_INT64_MAX = np.iinfo(np.int64).max
#: Unix seconds of 0001-01-01 and 9999-12-31 23:59:59 UTC: timestamps outside are refused, not wrapped.
_FIRST_SECOND, _LAST_SECOND = -62_135_596_800, 253_402_300_799
INTERACTION_COLUMNS = ("user", "item", "value", "timestamp")
#: Columns every interaction frame must have; ``timestamp`` is optional.
REQUIRED_COLUMNS = ("user", "item", "value")


def from_interactions(
    frame: pd.DataFrame,
    *,
    user: str = "user",
    item: str = "item",
    value: str | None = "value",
    timestamp: str | None = "timestamp",
) -> pd.DataFrame:
    """Bring your own interaction log into the form every loader returns: columns ``user``, ``item``, ``value`` and,
    if present, ``timestamp``, in the input's row order.

    Parameters
    ----------
    frame:
        One row per interaction.
    user, item:
        Columns holding the user and item ids (no missing values). Ids become int64 when every one is an integer int64
        can hold (including text like ``"12"`` but not ``"012"``), else text. Defaults ``"user"``, ``"item"``.
    value:
        Column holding a rating or a count (numeric, no missing values). ``None`` reads the log as implicit feedback:
        every row is one observed interaction and gets the value 1.0 (build it with ``min_rating=None``). Default
        ``"value"``.
    timestamp:
        Column holding Unix seconds (integers; fractions are floored), datetimes or ISO 8601 text (converted to Unix
        seconds, UTC; naive times are taken as UTC), within the years 1 to 9999 (seconds in [-62,135,596,800,
        253,402,300,799]). Default ``"timestamp"``; when that default column is absent the result simply has no
        timestamp. ``None`` ignores any timestamp column.

    Raises
    ------
    ValueError
        If ``frame`` is not a DataFrame or has no rows; a named column is missing (the message lists the columns
        found) or present twice; one column is named for two roles; values are missing, non-numeric or infinite; or
        timestamps are not times or fall outside the years 1 to 9999.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame: expected a pandas DataFrame, found {type(frame).__name__}")
    if frame.empty:
        raise ValueError(f"frame: expected at least one interaction, found no rows (columns {list(frame.columns)})")
    names: dict[str, Any] = {"user": user, "item": item, "value": value}
    if timestamp is not None and (timestamp in frame.columns or timestamp != "timestamp"):
        names["timestamp"] = timestamp
    given = {role: column for role, column in names.items() if column is not None}
    check_column_names(given, list(frame.columns))
    picked = frame.iloc[:, [frame.columns.get_loc(column) for column in given.values()]].set_axis(list(given), axis=1)
    if value is None:  # implicit feedback: each row one observed interaction
        picked.insert(2, "value", 1.0)
    return normalise(picked, tuple(names), "frame", given)


#: Column names that usually hold each role in a log, compared ignoring case and ``_``/``-``/blanks: a missing
#: column's refusal names the option that reads the first of them the log has.
LIKELY_COLUMNS = {
    "user": ("user", "user_id", "userid", "uid", "customer_id", "customer", "visitor_id", "member_id"),
    "item": ("item", "item_id", "itemid", "iid", "movie_id", "movie", "product_id", "product", "sku", "book_id"),
    "value": ("value", "rating", "ratings", "score", "stars", "count", "weight", "plays", "clicks"),
    "timestamp": ("timestamp", "time", "ts", "datetime", "date", "event_time", "created_at"),
}


def _column_hint(role: str, found: list, taken: set) -> str:
    """How to read ``role`` from a column of ``found`` that looks like one (none of ``taken``), or ''."""

    def plain(name: object) -> str:
        return "".join(c for c in str(name).lower() if c not in "_- ")

    by_plain = {plain(c): c for c in reversed(found) if c not in taken}
    likely = next((by_plain[plain(n)] for n in LIKELY_COLUMNS[role] if plain(n) in by_plain), None)
    if likely is None:
        return "; for a log without ratings use --value-col none (columns={'value': None})" if role == "value" else ""
    return (
        f"; the log has a column {likely!r}: use --{role}-col {likely} on the command line "
        f"(in Python columns={{{role!r}: {likely!r}}}, or {role}={likely!r} for from_interactions)"
    )


def check_column_names(given: dict[str, Any], found: list) -> None:
    """ValueError unless each role's column in ``given`` is one column of ``found`` (the log's, in order) and no two
    roles share one; a missing column's message names the option that reads a likely column (``LIKELY_COLUMNS``)."""
    for role, column in given.items():
        count = found.count(column)
        if count == 0:
            hint = _column_hint(role, found, set(given.values()))
            raise ValueError(f"{role}: expected a column {column!r} in the interactions, found columns {found}{hint}")
        if count > 1:
            raise ValueError(f"{role}: expected one column named {column!r}, found {count} columns of that name")
    shared = sorted({str(c) for c in given.values() if list(given.values()).count(c) > 1})
    if shared:
        roles = [r for r, c in given.items() if str(c) in shared]
        raise ValueError(f"{'/'.join(roles)}: expected a column of its own for each, found {shared} named twice")


def read_interactions_file(path: str | os.PathLike, **columns) -> pd.DataFrame:
    """Read an interaction log from a ``.csv`` (comma-separated, one header line) or ``.parquet`` file.

    ``columns`` are passed to :func:`from_interactions` (``user``, ``item``, ``value``, ``timestamp``: the column names
    in the file; ``value=None`` for a log without ratings).

    Raises FileNotFoundError if ``path`` does not exist; ValueError if the suffix is neither ``.csv`` nor ``.parquet``,
    the file is empty or holds a header and no rows, or the content fails :func:`from_interactions`'s checks (the
    message names the file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset: no interactions file at {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        # Ids are read as text and made integers only when every one is written as a plain integer: "0012" and "12"
        # stay two different items.
        id_columns = {columns.get("user", "user"): str, columns.get("item", "item"): str}
        frame = _read_csv(path, id_columns)
    elif suffix == ".parquet":
        frame = _read_parquet(path)
    else:
        raise ValueError(f"dataset: expected a .csv or .parquet file, found {path.name!r}")
    if frame.empty:
        raise ValueError(
            f"{path}: expected interactions below the header, found no rows (columns {list(frame.columns)})"
        )
    try:
        return from_interactions(frame, **columns)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def check_frame(frame: pd.DataFrame) -> None:
    """ValueError naming ``frame`` unless it is a DataFrame with the :data:`REQUIRED_COLUMNS`."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame: expected a pandas DataFrame, found {type(frame).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"frame: expected columns {list(REQUIRED_COLUMNS)}, missing {missing}")


def interactions_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of an interaction frame whatever its row order: rows sorted by (user, item, timestamp, value), then each
    column's :func:`column_bytes`."""
    check_frame(frame)
    columns = [c for c in INTERACTION_COLUMNS if c in frame.columns]
    ordered = frame.sort_values(columns[:2] + columns[3:] + ["value"], kind="mergesort")
    h = hashlib.sha256()
    for col in columns:
        h.update(f"{col}:".encode())
        h.update(column_bytes(ordered[col].to_numpy()))
    return h.hexdigest()


def column_bytes(values: np.ndarray) -> bytes:
    """Canonical bytes of an id/value column for hashing (dtype kind, then content)."""
    values = np.asarray(values)
    if values.dtype.kind in "iub":
        return b"i" + values.astype(np.int64).tobytes()
    if values.dtype.kind == "f":
        return b"f" + values.astype(np.float64).tobytes()
    return b"s" + "\x1f".join(map(str, values.tolist())).encode("utf-8")


def normalise(
    frame: pd.DataFrame, columns: tuple[str | None, ...], where: str, labels: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """The loaders' form of ``frame``, whose fields are the roles ``columns``; a message names a role's column as
    ``labels`` gives it (the caller's column names), else by the role."""
    shown = {role: (labels or {}).get(role, role) for role in INTERACTION_COLUMNS}
    if frame.shape[1] != len(columns):
        raise ValueError(
            f"{where}: expected {len(columns)} fields ({', '.join(c or '-' for c in columns)}), found {frame.shape[1]}"
        )
    frame = frame.set_axis([c or f"_skip{i}" for i, c in enumerate(columns)], axis=1)
    for column in (c for c in columns if c):
        if frame[column].isna().any():
            raise ValueError(
                f"{where}: expected no missing values in {shown[column]!r}, found {int(frame[column].isna().sum())}"
            )
    value = _numbers(frame["value"], shown["value"], where)
    out = {"user": _ids(frame["user"]), "item": _ids(frame["item"]), "value": value}
    if "timestamp" in columns:
        out["timestamp"] = _unix_seconds(frame["timestamp"], where, shown["timestamp"])
    return pd.DataFrame(out)


def _ids(column: pd.Series) -> np.ndarray:
    """int64 ids when every id is an integer that int64 holds, else str ids."""
    if pd.api.types.is_integer_dtype(column):
        if column.dtype.kind == "u" and len(column) and int(column.max()) > _INT64_MAX:
            return column.astype(str).to_numpy(dtype=object)  # would wrap to negatives
        return column.to_numpy(dtype=np.int64)
    values = column.to_numpy()
    if (
        pd.api.types.is_float_dtype(column)
        and np.all(np.mod(values, 1) == 0)
        and np.abs(values).max(initial=0) <= 2**53
    ):
        return values.astype(np.int64)  # integers that a reader stored as floats
    text = column.astype(str)
    if len(text) and text.str.fullmatch(r"0|-?[1-9][0-9]{0,17}").all():
        return text.astype(np.int64).to_numpy()
    return text.to_numpy(dtype=object)


def _numbers(column: pd.Series, name: str, where: str) -> np.ndarray:
    if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
        raise ValueError(f"{where}: expected numbers in {name!r}, found dtype {column.dtype}")
    values = column.to_numpy(dtype=np.float64)
    infinite = int(np.isinf(values).sum())
    if infinite:
        raise ValueError(f"{where}: expected finite numbers in {name!r}, found {infinite} infinite value(s)")
    return values


def _read_csv(path: Path, dtype: Mapping[Any, type]) -> pd.DataFrame:
    """The CSV file at ``path`` with its columns named as its header line writes them: pandas would rename a
    repeated name (``user,user`` reads as ``user``, ``user.1``), and a log naming one column twice is refused."""
    try:
        # The header read as a row of text: as pandas finds it (blank lines skipped, BOM removed), names unmangled.
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0].tolist()
        with warnings.catch_warnings():
            # Rows longer than the header: pandas would take the extra leading fields as the index, or with
            # index_col=False drop the trailing ones with a mere warning.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(path, dtype=dtype, index_col=False)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: expected a header line and interactions, found an empty file") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: expected UTF-8 text, found undecodable bytes ({exc.reason})") from None
    except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        raise ValueError(f"{path}: expected comma-separated rows of the header's fields ({str(exc).strip()})") from None
    return frame.set_axis(header, axis=1)


def _read_parquet(path: Path) -> pd.DataFrame:
    """The Parquet file at ``path``; one whose schema names a column twice is refused (pyarrow cannot pick one)."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"{path}: expected each column named once, found {repeated} more than once")
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        if str(exc).startswith(str(path)):
            raise
        raise ValueError(
            f"{path}: expected a Parquet file, found one pyarrow cannot read ({str(exc).splitlines()[0]})"
        ) from None


def _iso_dates(column: pd.Series) -> pd.Series:
    """ISO 8601 text as UTC datetimes. Digits past the microsecond are dropped when pandas cannot hold them (it
    reads nanoseconds only up to 2262); the seconds taken from the result are floored, so nothing changes."""
    try:
        return pd.to_datetime(column, utc=True, format="ISO8601")
    except (ValueError, TypeError):
        micro = column.astype(str).str.replace(r"(\.\d{6})\d+", r"\1", regex=True)
        return pd.to_datetime(micro, utc=True, format="ISO8601")


def _unix_seconds(column: pd.Series, where: str, name: str = "timestamp") -> np.ndarray:
    """Whole Unix seconds from integers, floats (floored), datetimes or ISO 8601 text (naive = UTC)."""
    if not pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_datetime64_any_dtype(column):
        try:
            column = _iso_dates(column)
        except (ValueError, TypeError):
            raise ValueError(
                f"{where}: expected Unix seconds or ISO 8601 dates in {name!r}, found values such as {column.iloc[0]!r}"
            ) from None
    if pd.api.types.is_datetime64_any_dtype(column):
        naive = column.dt.tz_convert("UTC").dt.tz_localize(None) if column.dt.tz is not None else column
        return naive.to_numpy().astype("datetime64[s]").astype(np.int64)  # any unit: ns, us (year 9999), s
    if pd.api.types.is_integer_dtype(column) and not pd.api.types.is_bool_dtype(column):
        # Integers stay integers: through float64 they would lose precision past 2**53.
        seconds = column.to_numpy()
        outside = (seconds < _FIRST_SECOND) | (seconds > _LAST_SECOND)
    else:
        floored = np.floor(_numbers(column, name, where))
        outside = (floored < _FIRST_SECOND) | (floored > _LAST_SECOND)
        seconds = np.where(outside, 0, floored)
    if outside.any():
        raise ValueError(
            f"{where}: expected Unix seconds in [{_FIRST_SECOND:,}, {_LAST_SECOND:,}] (years 1 to 9999) in "
            f"{name!r}, found {int(outside.sum())} value(s) outside, such as {column[outside].tolist()[0]!r}"
        )
    return seconds.astype(np.int64)
