"""The command group of the command line, which ends every command the same way: bad input as one line, a SIGTERM as
exit 143, and under ``mlflow run`` the failure recorded on the entry point's run; and the standard streams a command
can always write to."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

import click

from mlflow_recsys.errors import Terminated, failure_text
from mlflow_recsys.tracking import _tags as tags

__all__ = ["Commands", "StdoutGuard", "error_line", "guard_standard_streams", "visible"]


#: The role of the run each command makes; under ``mlflow run``, a failure of one of them is recorded on the
#: entry point's run under that role.
_ROLES = {"split": tags.ROLE_SPLIT, "train": tags.ROLE_TRAIN, "import-run": tags.ROLE_TRAIN}
_ROLES |= {"compare": tags.ROLE_COMPARISON, "main": tags.ROLE_MAIN, "study": tags.ROLE_MAIN, "gate": tags.ROLE_GATE}


class Commands(click.Group):
    """The command group, which ends every command the same way. Bad input (ValueError, TypeError, KeyError,
    OSError, RuntimeError, MlflowException) is reported as ``Error: <Type>: <message>`` (exit 1), redacted so a
    password in a URI is never printed; a bug keeps its traceback; a SIGTERM exits 143. Under ``mlflow run``,
    whatever ended a command with an error (an option click refused, a value, a SIGTERM, a bug) is recorded on
    the entry point's run here, so a failed step's run carries the same tags wherever it was refused."""

    def main(self, *args, **kwargs):
        """Guard the standard streams (:func:`guard_standard_streams`) before click reads an option: ``--help`` and
        ``--version`` write while the options are parsed. A help or version text that could not be written ends with
        that error, exit 1, as a command's lost output does."""
        guard_standard_streams()
        try:
            return super().main(*args, **kwargs)
        except SystemExit as exc:
            unwritten = _unwritten_output()
            if exc.code in (0, None) and unwritten is not None:
                click.echo(f"Error: {error_line(unwritten)}", err=True)
                raise SystemExit(1) from None
            raise

    def invoke(self, ctx: click.Context):
        from mlflow_recsys.tracking._server_errors import translated_server_errors

        try:
            with translated_server_errors():  # every command reports a silent server the same way
                result = super().invoke(ctx)
            unwritten = _unwritten_output()
            if unwritten is not None:  # its runs have ended; the output it owed is lost, and it says so
                raise unwritten
            return result
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.ClickException as exc:  # click's own refusal: shown as click writes it, but never huge
            answer, _ = self._answer(ctx)
            self._record(ctx, exc)
            exc.message = _capped(exc.message)  # type: ignore[misc]  # Final in click's stubs, a plain attribute
            exc.exit_code = answer or exc.exit_code  # type: ignore[misc]  # a plain attribute, as message
            raise
        except BaseException as exc:
            if not (isinstance(exc, SystemExit) and exc.code in (0, None)):
                self._record(ctx, exc)
            if isinstance(exc, Terminated):
                click.echo(f"Error: {exc}", err=True)
                raise SystemExit(143) from None  # 128 + SIGTERM, as a shell reports a process ended by it
            if isinstance(exc, SystemExit):
                raise
            answer, word = self._answer(ctx)
            if answer is not None and isinstance(exc, KeyboardInterrupt):  # Ctrl-C: no decision, in one line
                click.echo(f"Error: {word}: interrupted; no decision", err=True)
                raise SystemExit(answer) from None
            # Commands import MLflow only when they run: if it is not loaded, nothing raised is its exception.
            mlflow_error = getattr(sys.modules.get("mlflow.exceptions"), "MlflowException", ())
            bad_input = isinstance(exc, (ValueError, TypeError, KeyError, OSError, RuntimeError, mlflow_error))
            debug = (ctx.obj or {}).get("debug")
            if answer is not None and (debug or not bad_input):  # the traceback, and still the command's code
                traceback.print_exc()
                raise SystemExit(answer) from None
            if not bad_input or debug:
                raise
            failed = click.ClickException(f"{word}: {error_line(exc)}" if word else error_line(exc))
            failed.exit_code = answer or failed.exit_code  # type: ignore[misc]
            raise failed from None

    def _answer(self, ctx: click.Context) -> tuple[int | None, str]:
        """A command whose exit code is its answer (the gate) exits with its own code on any error, never click's 1
        or 2, and its error line starts with its word (``INVALID``): -> (that code or None, the word)."""
        command = self.commands.get(ctx.invoked_subcommand or "")
        return getattr(command, "error_exit_code", None), getattr(command, "error_word", "")

    @staticmethod
    def _record(ctx: click.Context, exc: BaseException) -> None:
        """Under ``mlflow run``, say on the entry point's run why a command that makes a run failed."""
        role = _ROLES.get(ctx.invoked_subcommand or "")
        if role is not None and os.environ.get("MLFLOW_RUN_ID"):
            from mlflow_recsys.tracking._context import record_failure_on_environment_run

            record_failure_on_environment_run(exc, role)


def _unwritten_output() -> OSError | None:
    """The error that lost some of this command's standard output (not a reader that left), or None."""
    failure = getattr(sys.stdout, "failure", None)
    if failure is None:
        return None
    return OSError(failure.errno, f"{failure.strerror} (writing the standard output)")


#: The most characters of an error line: a value pasted by mistake (a file's content as a path) may be megabytes.
_LONGEST_MESSAGE = 1000


def _capped(text: str) -> str:
    if len(text) <= _LONGEST_MESSAGE:
        return text
    return f"{text[:_LONGEST_MESSAGE]}… ({len(text):,} characters in all; more with --debug)"


def error_line(exc: BaseException) -> str:
    """The one line an error is reported in: the first line of :func:`~mlflow_recsys.errors.failure_text` (the
    innermost system failure, if any), credentials redacted, at most 1,000 characters."""
    from mlflow_recsys.tracking._redact import redact

    # The innermost system failure (a full disk or database) if any: what wraps it names a consequence.
    lines = [line for line in failure_text(exc).splitlines() if line.strip()] or [""]
    # MLflow's messages can run to dozens of lines; the first says what happened.
    more = " (more with --debug)" if len(lines) > 1 else ""
    return _capped(redact(lines[0])) + more


def visible(text) -> str:
    """Text from users (model names) with no raw newline or carriage return to break a table."""
    from mlflow_recsys.report._escaping import visible_text

    return visible_text(text)


class StdoutGuard:
    """``sys.stdout`` for a command that must end its runs whatever becomes of its output.

    The first write or flush that fails (the reader left: ``mlflow-recsys compare ... | head -1``; a full disk:
    ``> /dev/full``) points file descriptor 1 at ``os.devnull``, as Python's documentation advises for a
    ``BrokenPipeError``, and the command carries on. Without it, MLflow's "View run ... at: <URL>" line, printed when a
    run on a tracking server ends but before its status is set, raised there and left the run RUNNING. A reader who
    left chose to; any other failure is kept in ``failure``, and the command reports it once its runs have ended.
    Every other attribute is the wrapped stream's.
    """

    def __init__(self, stream) -> None:
        self._stream = stream
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._to_devnull(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._to_devnull(exc)

    def _to_devnull(self, exc: OSError) -> None:
        if self.failure is None and not isinstance(exc, BrokenPipeError):
            self.failure = exc
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError):  # what the failed write left in the buffer goes to /dev/null
            self._stream.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def guard_standard_streams() -> None:
    """Give a command standard streams it can always write to: a closed one (``2>&-``; Python then sets it to None,
    and progress bars and warnings failed the run) writes to ``os.devnull``, and ``sys.stdout`` is a
    :class:`StdoutGuard`."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - the process's stream
    guard = sys.stdout if isinstance(sys.stdout, StdoutGuard) else StdoutGuard(sys.stdout)
    guard.failure = None  # each command reports its own output's failure
    sys.stdout = guard
