"""Every error the package raises on purpose, under one base class.

``except RecsysError`` catches them all; each also derives from the built-in exception a caller would expect (a bad
selection is a ``ValueError``, an unreachable server a ``ConnectionError``), so existing handlers keep working.
Programming errors and bad arguments to pure functions stay plain ``TypeError``/``ValueError``.
"""

from __future__ import annotations

import errno
import sqlite3

#: ``errno`` values that say the machine, not the input, failed: a disk full, out of quota or read-only, a file
#: past the size limit, an I/O error, memory or file handles exhausted. Layers above tend to report them as
#: something else (a missing artifact, a database "autoflush"); :func:`root_cause` finds them.
__all__ = [
    "ArtifactError",
    "DeviceMemoryError",
    "DownloadError",
    "GateInvalid",
    "RecsysError",
    "RunOwnershipError",
    "RunSelectionError",
    "SYSTEM_ERRNOS",
    "StudyStepError",
    "Terminated",
    "TrackingPermissionError",
    "TrackingServerError",
    "failure_text",
    "is_system_failure",
    "raise_terminated",
    "root_cause",
    "sigterm_reason",
]

SYSTEM_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.ENOMEM, errno.EMFILE, errno.ENFILE}
)


class RecsysError(Exception):
    """Base of the package's own errors."""


class RunSelectionError(RecsysError, ValueError):
    """The selected runs cannot be compared; the message names the runs and why.

    ``reason`` is that message alone; ``hint``, when given, says how to fix it from the command line and is appended to
    the message. The server page shows ``reason``: its user fixes a selection by unticking runs.
    """

    def __init__(self, reason: str, *, hint: str | None = None):
        super().__init__(f"{reason}; {hint}" if hint else reason)
        self.reason, self.hint = reason, hint


class DeviceMemoryError(RecsysError, RuntimeError):
    """Fitting or scoring ran out of memory on its device (a GPU's, or the host's); the message names the setting to
    lower. A ``RuntimeError``, as torch's own ``OutOfMemoryError`` is."""


class ArtifactError(RecsysError, ValueError):
    """An artifact of a run (per-user values, a comparison's report) is missing or malformed."""


class GateInvalid(RecsysError, ValueError):
    """The launch gate cannot decide: the models are not comparable (another split or targets, a metric not evaluated),
    a registered model, version or alias does not exist, or the alias moved while the gate ran. Exit code 3."""


class RunOwnershipError(RecsysError, ValueError):
    """``MLFLOW_RUN_ID`` names a run this step must not log into; the message names the run, status and role."""


class TrackingServerError(RecsysError, ConnectionError):
    """The tracking server (or its artifact store) did not answer within the bounded wait."""


class TrackingPermissionError(RecsysError, PermissionError):
    """The tracking server refused a write (HTTP 403); the message names where and what to do."""


class DownloadError(RecsysError, OSError):
    """A file could not be fetched; the message says where to place it by hand."""


class StudyStepError(RecsysError, RuntimeError):
    """A step of the study failed; MLflow marked its run FAILED."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised so that the run being logged ends FAILED on the way out.

    A ``KeyboardInterrupt``, so ``except Exception`` does not swallow it and code that stops its work on Ctrl-C stops it
    on SIGTERM too: ``mlflow.projects.run`` then terminates the step it is waiting for.
    """


def root_cause(exc: BaseException) -> BaseException:
    """The failure to report for ``exc``: the innermost system failure in its chain, else ``exc`` itself.

    The chain is followed through ``__cause__``, else ``__context__`` (each exception once; a context hidden by
    ``raise ... from None`` counts too, as such code means to drop detail, not a full disk). A system failure is an
    :class:`OSError` whose ``errno`` is in :data:`SYSTEM_ERRNOS` (``ENOSPC`` with the path it could not write, say), or
    an :mod:`sqlite3` error other than a constraint, API or programming error (``database or disk is full``): what
    MLflow, SQLAlchemy or this package wrapped around it names a consequence, not the cause. Any other exception in the
    chain is left alone: a message this package wrote around a refused connection or a missing file is the one to show.
    """
    found: BaseException = exc
    current: BaseException | None = exc
    seen = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if is_system_failure(current):
            found = current
        current = current.__cause__ or current.__context__
    return found


def failure_text(exc: BaseException) -> str:
    """``Type: message`` of :func:`root_cause` of ``exc``, the form the command line prints and runs record in
    ``recsys.error``. A :mod:`sqlite3` error's type is written ``sqlite3.OperationalError``, apart from SQLAlchemy's
    class of that name; a ``KeyError`` shows its key unquoted; a click refusal is its message with the option's name
    and no type (``format_message``, as the console prints it); an interrupt without a message reads ``interrupted
    (Ctrl-C)``. Not redacted: callers redact what they show.
    """
    cause = root_cause(exc)
    name = type(cause).__name__
    if isinstance(cause, sqlite3.Error):
        name = f"sqlite3.{name}"
    if hasattr(cause, "format_message"):  # click's refusal: its message names the option, as the console shows it
        return cause.format_message()
    message = str(cause.args[0]) if isinstance(cause, KeyError) and cause.args else str(cause)
    if not message and isinstance(cause, KeyboardInterrupt):
        message = "interrupted (Ctrl-C)"
    return f"{name}: {message}"


def is_system_failure(exc: BaseException) -> bool:
    """Whether ``exc`` itself is a system failure in the sense of :func:`root_cause`."""
    if isinstance(exc, sqlite3.Error):
        return not isinstance(exc, (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError))
    return isinstance(exc, OSError) and exc.errno in SYSTEM_ERRNOS


def sigterm_reason(signum: int) -> str:
    """What :class:`Terminated` says when SIGTERM (``signum``) stopped the process."""
    return f"stopped by signal {signum} (SIGTERM)"


def raise_terminated(signum, frame):
    """A SIGTERM handler that raises :class:`Terminated`."""
    raise Terminated(sigterm_reason(signum))
