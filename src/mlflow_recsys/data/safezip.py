"""Checks that make a zip archive safe to open: no member escapes its folder, bounded size."""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

#: Largest total uncompressed size an archive may unpack to (a zip-bomb guard).
MAX_UNCOMPRESSED_BYTES = 16 * 1024**3


def check_members(zf: zipfile.ZipFile, path: Path, max_bytes: int | None = None) -> None:
    """Refuse archives that could write outside their folder or unpack too large.

    A member is refused when its name is absolute, starts with a drive letter,
    or has a ``..`` component (the "zip slip" of Snyk, 2018), whether or not the
    caller would extract it: such an archive was not made by an honest tool.

    Parameters
    ----------
    zf:
        The open archive.
    path:
        Its path, used in messages.
    max_bytes:
        Bound on the summed uncompressed member sizes; default
        :data:`MAX_UNCOMPRESSED_BYTES` (16 GiB), read at call time.

    Raises
    ------
    ValueError
        Naming ``path`` and the offending member, or the total size found.
    """
    limit = MAX_UNCOMPRESSED_BYTES if max_bytes is None else max_bytes
    total = 0
    for info in zf.infolist():
        name = info.filename.replace("\\", "/")
        parts = PurePosixPath(name).parts
        if name.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
            raise ValueError(f"{path}: refusing zip member {info.filename!r}: it points outside the archive's folder")
        total += info.file_size
    if total > limit:
        raise ValueError(f"{path}: expected at most {limit:,} bytes uncompressed, found {total:,}")
