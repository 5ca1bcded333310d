"""Checks that make a zip archive safe to open: no member escapes its folder, bounded size."""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

#: Largest total uncompressed size an archive may unpack to (a zip-bomb guard), read at call time.
MAX_UNCOMPRESSED_BYTES = 16 * 1024**3


def check_members(zf: zipfile.ZipFile, path: Path) -> None:
    """ValueError naming ``path`` unless every member stays in the archive's folder and the total fits.

    A member is refused when its name is absolute, starts with a drive letter or has a ``..`` component (the "zip slip"
    of Snyk, 2018), whether or not the caller would extract it: such an archive was not made by an honest tool."""
    total = 0
    for info in zf.infolist():
        name = info.filename.replace("\\", "/")
        parts = PurePosixPath(name).parts
        if name.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
            raise ValueError(f"{path}: refusing zip member {info.filename!r}: it points outside the archive's folder")
        total += info.file_size
    if total > MAX_UNCOMPRESSED_BYTES:
        raise ValueError(f"{path}: expected at most {MAX_UNCOMPRESSED_BYTES:,} bytes uncompressed, found {total:,}")
