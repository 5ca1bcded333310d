"""Atomic writes: a temporary file or folder beside the target, renamed into place when complete, so a reader never
sees a half-written one and a failure leaves the target as it was; the result gets the mode a plain ``open`` or
``mkdir`` would give."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's file-creation mask, e.g. ``0o022``.

    Read from ``/proc/self/status`` (Linux 4.7+) where it can be: elsewhere reading it means setting it for an instant,
    process-wide, so a file another thread creates then gets mode ``0o666``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0)
        os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the umask (temporary files start ``0o600``)."""
    return 0o666 & ~current_umask()


@contextlib.contextmanager
def atomic_write(target: str | os.PathLike, *, suffix: str = ".tmp") -> Iterator[BinaryIO]:
    """Yield a binary file, a hidden ``*suffix`` file in ``target``'s (existing) folder, that replaces ``target`` with
    :func:`new_file_mode` when the ``with`` block ends without error; on an exception it is deleted."""
    target = Path(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            # chmod through the descriptor where the platform has it: no window in which the path could be swapped.
            mode = new_file_mode()
            if os.chmod in os.supports_fd and not handle.closed:
                os.chmod(handle.fileno(), mode)
            else:
                os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Yield an empty hidden folder in ``target``'s parent that becomes ``target`` (mode as ``mkdir`` gives) when the
    ``with`` block ends without error. With ``replace`` an existing ``target`` is renamed aside first and put back if
    the rename into place fails."""
    target = Path(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp gives 0o700
        yield tmp
        if replace:
            aside = tmp.with_name(tmp.name + ".old")
            os.rename(target, aside)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(aside, target)
                raise
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
