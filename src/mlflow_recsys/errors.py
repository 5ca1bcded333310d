"""Every error the package raises on purpose, under one base class.

``except RecsysError`` catches them all; each also derives from the built-in
exception a caller would expect (a bad selection is a ``ValueError``, an
unreachable server a ``ConnectionError``), so existing handlers keep working.
Programming errors and bad arguments to pure functions stay plain
``TypeError``/``ValueError``.
"""

from __future__ import annotations


class RecsysError(Exception):
    """Base of the package's own errors."""


class RunSelectionError(RecsysError, ValueError):
    """The selected runs cannot be compared; the message names the runs and why.

    ``reason`` is that message alone; ``hint``, when given, says how to fix it from the command line and is
    appended to the message. The server page shows ``reason``: its user fixes a selection by unticking runs.
    """

    def __init__(self, reason: str, *, hint: str | None = None):
        super().__init__(f"{reason}; {hint}" if hint else reason)
        self.reason, self.hint = reason, hint


class ArtifactError(RecsysError, ValueError):
    """A per-user artifact is missing or malformed."""


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

    A ``KeyboardInterrupt``, so ``except Exception`` does not swallow it and code that stops its work on Ctrl-C
    stops it on SIGTERM too: ``mlflow.projects.run`` then terminates the step it is waiting for.
    """


def raise_terminated(signum, frame):
    """A SIGTERM handler that raises :class:`Terminated`."""
    raise Terminated(f"stopped by signal {signum} (SIGTERM)")
