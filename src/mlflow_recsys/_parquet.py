"""Reading the columns of a Parquet file that a reader needs, after its footer says they are the size expected.

A Parquet file is cheap to store and can be dear to read: a 41 KB file whose one string repeats under dictionary
encoding decodes to gigabytes. So a reader of files from others opens the footer first (the row count and each column
chunk's uncompressed size are metadata), refuses a file whose row count or size is not what it expects, and only then
reads, and only the columns it uses.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


class ParquetRefused(ValueError):
    """A Parquet file that cannot be read, or that is not the shape or size its reader expects; the message names the
    file as its reader does, never by a local path."""


def read_columns(
    path: str | os.PathLike,
    columns: Sequence[str],
    *,
    rows: int | None,
    rows_from: str = "",
    max_bytes: int | None = None,
    name: str | None = None,
) -> pa.Table:
    """The ``columns`` of the Parquet file at ``path``, once its footer shows ``rows`` rows (None: any; ``rows_from``
    says whence) and at most ``max_bytes`` decoded; else :class:`ParquetRefused` naming the file as ``name``.

    Text columns are read dictionary-encoded and their decoded size counted from each row's value length before
    decoding: a dictionary's one long value counts once in the footer and once per row decoded."""
    name = name or os.path.basename(path)
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError and more for a damaged file
        raise ParquetRefused(f"{name} is not a readable Parquet file ({_reason(exc, path, name)})") from None
    names = parquet.schema_arrow.names
    missing = [c for c in columns if c not in names]
    if missing:
        raise ParquetRefused(f"{name}: expected columns {missing}, found {names}")
    twice = [c for c in columns if names.count(c) > 1]  # few columns: a count each is cheap
    if twice:
        raise ParquetRefused(f"{name}: expected the columns {twice} once each, found them more than once")
    found = parquet.metadata.num_rows
    if rows is not None and found != rows:
        raise ParquetRefused(f"{name}: expected {rows} rows{f' ({rows_from})' if rows_from else ''}, found {found}")
    texts = {c: kind for c in columns if (kind := _text_type(parquet.schema_arrow.field(c).type)) is not None}
    if max_bytes is not None:
        _check_size(uncompressed_size(parquet, columns), max_bytes, columns, name)
    try:
        # Text stays dictionary-encoded until its decoded size is known: one long string repeated under a
        # dictionary is small in the footer and in memory, and only decoding would multiply it.
        reader = pq.ParquetFile(path, read_dictionary=list(texts))
        table = reader.read(columns=list(columns), use_threads=False)
    except Exception as exc:  # noqa: BLE001 - as above: a footer that reads can sit on pages that do not
        raise ParquetRefused(f"{name} is not a readable Parquet file ({_reason(exc, path, name)})") from None
    if max_bytes is not None and texts:
        kept = [c for c in columns if c not in texts]
        _check_size(
            uncompressed_size(parquet, kept) + sum(_decoded_bytes(table[c]) for c in texts), max_bytes, columns, name
        )
    for c, kind in texts.items():
        table = table.set_column(table.schema.get_field_index(c), c, table[c].cast(kind))
    return table


def _text_type(kind: pa.DataType) -> pa.DataType | None:
    """The dense text type a column of ``kind`` decodes to (its values' for a dictionary), None if not text."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    return kind if text or pa.types.is_binary(kind) or pa.types.is_large_binary(kind) else None


def _check_size(size: int, max_bytes: int, columns: Sequence[str], name: str) -> None:
    if size > max_bytes:
        raise ParquetRefused(
            f"{name}: expected columns {list(columns)} to take at most {max_bytes:,} bytes decoded, found {size:,}"
        )


def _decoded_bytes(column: pa.ChunkedArray) -> int:
    """Bytes a dictionary-encoded text column takes once decoded: each row's value length, plus its 4-byte offset."""
    total = 0
    for chunk in column.chunks:
        lengths = pc.binary_length(chunk.dictionary).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        rows = chunk.indices.fill_null(0).to_numpy(zero_copy_only=False)
        total += int(np.bincount(rows, minlength=len(lengths)).dot(lengths)) + 4 * len(chunk)
    return total


def uncompressed_size(parquet: pq.ParquetFile, columns: Sequence[str]) -> int:
    """Bytes the top-level ``columns`` take uncompressed, from the footer alone (every leaf of a nested column)."""
    schema = parquet.schema_arrow
    wanted, leaf = set(columns), 0
    leaves: list[int] = []  # the leaf column indexes of the wanted fields, in the footer's order
    for field in schema:
        count = _leaf_count(field.type)
        if field.name in wanted:
            leaves.extend(range(leaf, leaf + count))
        leaf += count
    meta = parquet.metadata
    return sum(meta.row_group(g).column(i).total_uncompressed_size for g in range(meta.num_row_groups) for i in leaves)


def _leaf_count(kind: pa.DataType) -> int:
    """Parquet leaf columns of an Arrow type: one for a primitive, its children's for a nested type."""
    if pa.types.is_struct(kind):
        return sum(_leaf_count(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _leaf_count(kind.key_type) + _leaf_count(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaf_count(kind.value_type)
    return 1


def _reason(exc: Exception, path: str | os.PathLike, name: str) -> str:
    """pyarrow's first line, with ``name`` for the local path."""
    text = str(exc).replace(os.fspath(path), name)
    return text.splitlines()[0] if text else type(exc).__name__
