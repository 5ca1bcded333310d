"""Run one comparison job in a process of its own, started by the worker that took the request.

:func:`launch` (in the server worker) starts ``python -m mlflow_recsys.server._runner <folder> <job id>``; that
process (:func:`main`) waits for a comparison slot, calls
:func:`~mlflow_recsys.tracking._comparison.compare_runs` and writes each stage to the job file. A process of its
own keeps the resampling off the worker that answers requests and releases its slot however it ends; it stops
itself (SIGTERM, so the comparison run ends FAILED) when the worker that started it is gone.

The process talks to the server it was started by, over loopback HTTP, so every read and write goes through the
server's own tracking store and artifact proxy, with the permissions of the user who clicked Compare when the
server checks them (``--app-name recsys-auth``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mlflow_recsys.errors import Terminated, sigterm_reason
from mlflow_recsys.server import _jobs as jobs
from mlflow_recsys.tracking import _tags as tags

#: Variables passed on from the server's environment: MLflow's own HTTP settings, and no server internals.
_KEEP = "MLFLOW_HTTP_REQUEST_"


def launch(folder: Path, job: dict, *, tracking_uri: str, auth=None) -> subprocess.Popen:
    """Start the job's process; a thread of this worker reaps it when it ends. ``auth`` (``username`` and
    ``password``) is what the request was authenticated with, for the process to act as its user."""
    from mlflow_recsys.tracking._plugin import SERVER_JOB_ENV  # not at import: the plugin module imports MLflow's

    env = {k: v for k, v in os.environ.items() if k.startswith(_KEEP) or not k.startswith(("MLFLOW_", "_MLFLOW_"))}
    env |= {
        "MLFLOW_TRACKING_URI": tracking_uri,
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        "MLFLOW_RECSYS_COMMAND": "server-compare",
        jobs.MAX_COMPARISONS_ENV: str(jobs.max_comparisons()),
        jobs.TIME_LIMIT_ENV: str(jobs.time_limit()),
        SERVER_JOB_ENV: job["id"],
    }
    if auth is not None:
        env.update(MLFLOW_TRACKING_USERNAME=auth.username, MLFLOW_TRACKING_PASSWORD=auth.password or "")
    command = [sys.executable, "-m", "mlflow_recsys.server._runner", str(folder), job["id"]]
    try:
        with open(folder / f"{job['id']}.log", "wb") as log:
            proc = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=folder
            )
    except BaseException:
        jobs.delete_job(folder, job["id"])  # no process: no job
        raise
    # Recorded now, so a process that dies before it writes the job itself reads as failed.
    jobs.record_launch(folder, job["id"], proc.pid)
    threading.Thread(target=proc.wait, name=f"recsys-job-{job['id'][:8]}", daemon=True).start()
    return proc


def _watch_parent(parent: int, every: float = 1.0) -> None:
    """SIGTERM to this process once the worker that started it is gone (this process is then re-parented)."""
    while os.getppid() == parent:
        time.sleep(every)
    os.kill(os.getpid(), signal.SIGTERM)


def run_job(folder: Path, job_id: str, *, on_start=None, stop: Stop | None = None) -> dict:
    """Wait for a slot, compare, and record every stage in the job file; returns the final job.

    ``on_start`` (no arguments) is called once the slot is held, before the comparison starts. ``stop``, when given,
    is asked at each stage of the comparison whether a signal told the job to stop.
    """
    from mlflow_recsys.report._notes import result_sentences
    from mlflow_recsys.tracking._redact import redact

    job = jobs.read_job(folder, job_id)
    job["pid"] = os.getpid()

    def update(stage: str, **fields) -> None:
        job.update(stage=stage, **fields)
        job["history"].append([stage, time.time()])
        jobs.write_job(folder, job)

    update("queued", waiting_for_slot=False)
    slot = jobs.acquire_slot(folder, jobs.max_comparisons(), on_wait=lambda: update("queued", waiting_for_slot=True))
    job.update(started=time.time(), slot=slot, waiting_for_slot=False)
    try:
        if on_start is not None:
            on_start()
        from mlflow.tracking import MlflowClient

        from mlflow_recsys.stats._settings import ComparisonSettings
        from mlflow_recsys.tracking._comparison import compare_runs

        settings = ComparisonSettings(**job["settings"])

        def on_stage(stage: str) -> None:
            if stop is not None:
                stop.check()
            update(stage)

        outcome = compare_runs(run_ids=job["run_ids"], settings=settings, on_stage=on_stage)
        # The primary metric's result sentences as the run notes give them (the primary analysis' first, each
        # labelled when there are two), then the seed-spread sentences.
        metric = settings.primary or outcome.report.comparisons[0].metric
        sentences = result_sentences(outcome.report, metric, outcome.seed_averaged, outcome.primary_analysis, "plain")
        sentences += [spread.results_text(metric) for spread in outcome.seed_spreads.values()]
        run = MlflowClient().get_run(outcome.run_id)
        update(
            "done",
            finished=time.time(),
            result={
                "run_id": outcome.run_id,
                "experiment_id": run.info.experiment_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "metric": metric,
                "sentences": sentences,
                # what ``primary_analysis`` resolved to, for the Settings table
                "primary_analysis_used": run.data.params.get("primary_analysis_used"),
            },
        )
    except BaseException as raised:  # noqa: BLE001 - every ending is recorded, then re-raised
        exc = _ending(raised, stop)
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        update("failed", finished=time.time(), error=redact(f"{type(exc).__name__}: {first}"))
        if not isinstance(exc, Exception):
            raise exc  # noqa: B904 - the signal's Terminated stands for what it was wrapped in
    return job


#: The signal the pages' Cancel sends a job's process (SIGTERM stays the worker's and the system's).
CANCEL_SIGNAL = signal.SIGUSR1


class Stop:
    """Why the job was told to stop (Cancel, the time limit, SIGTERM), kept as well as raised as
    :class:`~mlflow_recsys.errors.Terminated`: a handler's exception is lost when the signal lands in a finaliser
    (a ``__del__`` or weakref callback, which Python reports as "Exception ignored in ..."), so the job asks
    :meth:`check` again at each stage and the comparison run still ends FAILED with the reason."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def handler(self, reason: Callable[[int], str]) -> Callable:
        """A signal handler that records ``reason(signum)`` and raises it."""

        def handle(signum, frame):
            self.reason = reason(signum)
            raise Terminated(self.reason)

        return handle

    def check(self) -> None:
        """Raise :class:`~mlflow_recsys.errors.Terminated` with the recorded reason, if there is one."""
        if self.reason is not None:
            raise Terminated(self.reason)


def _ending(exc: BaseException, stop: Stop | None) -> BaseException:
    """What ended the job: ``exc``, or :class:`~mlflow_recsys.errors.Terminated` with the reason ``stop`` recorded. A
    handler's exception can come back wrapped by compiled code it landed in (numba: "SystemError: ... returned a result
    with an exception set") or be lost in a finaliser; the job still ends saying why it was stopped."""
    if stop is not None and stop.reason is not None and not isinstance(exc, Terminated):
        return Terminated(stop.reason)
    return exc


def main(argv: list[str]) -> int:
    from mlflow_recsys.tracking._server_errors import use_cli_defaults

    use_cli_defaults()  # bounded HTTP retries: an unresponsive store fails the job in minutes, not many
    folder, job_id, limit = Path(argv[0]), argv[1], jobs.time_limit()

    # Cancel and the time limit raise Terminated with their reason, so the comparison run being logged ends FAILED
    # with it, as on SIGTERM.
    stop = Stop()
    signal.signal(signal.SIGTERM, stop.handler(sigterm_reason))
    signal.signal(
        CANCEL_SIGNAL,
        stop.handler(lambda signum: jobs.cancel_reason(folder, job_id) or "cancelled from the recsys page"),
    )
    signal.signal(
        signal.SIGALRM,
        stop.handler(
            lambda signum: f"stopped after {limit:,} s, the time limit of the page's jobs ({jobs.TIME_LIMIT_ENV})"
        ),
    )
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    job = run_job(folder, job_id, on_start=lambda: signal.alarm(limit), stop=stop)
    return 0 if job["stage"] == "done" else 1


def cancel(folder: Path, job: dict, *, by: str) -> None:
    """Stop a queued or running job: its process ends it, and its comparison run, FAILED, saying ``by`` whom; a
    job whose process is not started yet, or is gone, is written failed here."""
    reason = f"cancelled from the recsys page by {by}"
    jobs.request_cancel(folder, job["id"], reason)
    with contextlib.suppress(ProcessLookupError):
        if job.get("pid"):
            os.kill(job["pid"], CANCEL_SIGNAL)
            return
    jobs.write_job(folder, {**job, "stage": "failed", "error": f"Terminated: {reason}", "finished": time.time()})


def end_if_dead(folder: Path, job: dict, client) -> dict:
    """A job :func:`~mlflow_recsys.server._jobs.read_job` found dead, settled: each RUNNING run its process made
    (tag ``recsys.server_job``) ended KILLED with the reason in ``recsys.error``, and the job written failed.
    Any other job is returned as it is."""
    if not job.get("died"):
        return job
    from mlflow.entities import ViewType

    from mlflow_recsys.tracking._runs import KILLED, RUNNING, all_experiment_ids, search_all

    reason = f"Killed: {jobs.DIED}"
    query = f"tags.`{tags.SERVER_JOB}` = '{job['id']}' and attributes.status = '{RUNNING}'"
    for run in search_all(client.search_runs, all_experiment_ids(client), query, ViewType.ALL):
        client.set_tag(run.info.run_id, tags.ERROR, reason)
        client.set_terminated(run.info.run_id, KILLED)
    settled = {k: v for k, v in job.items() if k != "died"}
    settled.update(error=reason, finished=settled.get("finished") or time.time())
    jobs.write_job(folder, settled)
    return settled


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
