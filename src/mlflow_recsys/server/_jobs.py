"""Comparison jobs that every worker process of one server sees: job files and comparison slots.

``mlflow server`` runs several worker processes (uvicorn's default is 4), so nothing a request learns may live
in one process's memory. A job is a JSON file in the server's job folder, written whole and renamed into place
(:func:`~mlflow_recsys._atomic.atomic_write`), so a reader never sees half a file. At most
:func:`max_comparisons` comparisons compute at a time: each holds an exclusive ``flock`` on one of that many slot
files for as long as its process lives, and the kernel releases the lock when the process ends, however it ends.

The folder is ``$MLFLOW_RECSYS_JOBS_DIR`` or, by default, one per backend store under the temporary folder
(``mlflow-recsys-jobs-<uid>/<digest of the store URI>``), created with mode ``0o700``. Job ids are 32 hex
digits made here; a request's id is checked against that shape before it names a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import tempfile
import time
import uuid
from pathlib import Path

from mlflow_recsys._atomic import atomic_write
from mlflow_recsys._digests import text_digest
from mlflow_recsys._validation import whole_number_env

#: Environment variable: how many comparisons may compute at once, across all worker processes (default 2).
MAX_COMPARISONS_ENV = "MLFLOW_RECSYS_MAX_COMPARISONS"
#: Environment variable: the job folder (default: one per backend store under the temporary folder).
JOBS_DIR_ENV = "MLFLOW_RECSYS_JOBS_DIR"
#: Environment variable: seconds a job may compute once it holds a slot before it is stopped (default 3600).
TIME_LIMIT_ENV = "MLFLOW_RECSYS_JOB_TIME_LIMIT_S"

#: The stages a job goes through, in order; ``done`` and ``failed`` end it.
STAGES = ("queued", "selecting", "loading artifacts", "comparing", "logging", "done")
FINAL = ("done", "failed")

#: A job with no recorded process this many seconds after it was made never started (its launch failed).
UNLAUNCHED_AFTER_S = 60.0
#: Ended jobs older than this are removed (their comparison runs stay in MLflow); so are all but the newest
#: :data:`KEEP_JOBS` ended ones.
KEEP_JOBS_S = 7 * 24 * 3600.0
KEEP_JOBS = 500

#: The error of a job whose process ended without writing its result.
DIED = "the comparison process ended without a result (killed, or the server stopped)"

_JOB_ID = re.compile(r"[0-9a-f]{32}")
#: The slot files this process holds locked.
_HELD: list[int] = []


class JobNotFound(LookupError):
    """No job has this id in this server's job folder."""


def max_comparisons() -> int:
    """The bound on concurrent comparisons, from :data:`MAX_COMPARISONS_ENV`; ValueError if the variable is set
    to anything but a whole number from 1 to 64."""
    return whole_number_env(MAX_COMPARISONS_ENV, 2, 64, "a whole number")


def time_limit() -> int:
    """Seconds a job may compute (from the moment it holds a slot), from :data:`TIME_LIMIT_ENV`; ValueError if the
    variable is set to anything but a whole number of seconds from 1 to 604,800 (a week)."""
    return whole_number_env(TIME_LIMIT_ENV, 3600, 604_800, "a whole number of seconds")


def jobs_dir(store_uri: str) -> Path:
    """The job folder of the server whose backend store is ``store_uri``; created (mode ``0o700``) if missing."""
    configured = os.environ.get(JOBS_DIR_ENV)
    if configured:
        path = Path(configured)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    else:
        key = text_digest(store_uri, 16)
        path = Path(tempfile.gettempdir()) / f"mlflow-recsys-jobs-{os.getuid()}" / key
        _private_folder(path.parent)
    _private_folder(path)
    return path


def _private_folder(path: Path) -> None:
    """Create ``path`` (mode ``0o700``) if missing; RuntimeError for one that is no folder, another uid owns, or
    its group or others may write to."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        kind = "folder" if stat.S_ISDIR(st.st_mode) else "file, not a folder,"
        raise RuntimeError(
            f"{JOBS_DIR_ENV}: expected a folder of this server's uid {os.getuid()}, not writable by its group or by "
            f"others, found a {kind} of uid {st.st_uid} with mode {oct(st.st_mode & 0o777)} at {path}; refusing to "
            "keep comparison jobs there (chown it, chmod 700 it)"
        )


def _path(folder: Path, job_id: str) -> Path:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise JobNotFound(f"job: expected 32 hex digits, found {job_id!r}")
    return folder / f"{job_id}.json"


def write_job(folder: Path, job: dict) -> None:
    """Replace the job's file with ``job`` in one rename."""
    with atomic_write(_path(folder, job["id"])) as out:
        out.write(json.dumps(job, indent=1).encode())


def read_job(folder: Path, job_id: str) -> dict:
    """The job's last written state; a job whose process died without a word reads as failed (with ``died``).
    JobNotFound if ``job_id`` is not a job id or no such job exists."""
    try:
        job = json.loads(_path(folder, job_id).read_text())
    except FileNotFoundError:
        raise JobNotFound(f"job: no job {job_id} on this server") from None
    if not job.get("pid"):
        pid = _read_beside(folder, job_id, ".pid")
        job["pid"] = int(pid) if pid and pid.isdigit() else None
    if job["stage"] not in FINAL:
        pid = job["pid"]
        if (pid and not _alive(pid)) or (not pid and time.time() - job.get("created", 0) > UNLAUNCHED_AFTER_S):
            job = {**job, "stage": "failed", "error": DIED, "died": True}
    return job


def all_jobs(folder: Path) -> list[dict]:
    """Every job in ``folder`` as :func:`read_job` reads it (unreadable files left out)."""
    found = []
    for path in folder.glob("*.json"):
        try:
            found.append(read_job(folder, path.stem))
        except JobNotFound:  # another file, or a job pruned meanwhile
            continue
    return found


def unfinished_jobs(folder: Path) -> int:
    """How many jobs in ``folder`` are queued or running (with a live process)."""
    return sum(job["stage"] not in FINAL for job in all_jobs(folder))


def record_launch(folder: Path, job_id: str, pid: int) -> None:
    """Record the pid of the job's process as it is started, in a file of its own: the process writes the job
    file from its first moment, and a second writer of that file could put back a stage the process has left."""
    with atomic_write(_path(folder, job_id).with_suffix(".pid")) as out:
        out.write(str(pid).encode())


def request_cancel(folder: Path, job_id: str, reason: str) -> None:
    """Record why the job is being cancelled, for its process to end with (see :func:`cancel_reason`)."""
    with atomic_write(_path(folder, job_id).with_suffix(".cancel")) as out:
        out.write(reason.encode())


def cancel_reason(folder: Path, job_id: str) -> str | None:
    """Why the job was cancelled, or None when it was not."""
    return _read_beside(folder, job_id, ".cancel")


def _read_beside(folder: Path, job_id: str, suffix: str) -> str | None:
    try:
        return _path(folder, job_id).with_suffix(suffix).read_text()
    except FileNotFoundError:
        return None


def delete_job(folder: Path, job_id: str) -> None:
    """Remove the job's files."""
    path = _path(folder, job_id)
    for suffix in (".json", ".pid", ".log", ".cancel"):
        path.with_suffix(suffix).unlink(missing_ok=True)


def prune(folder: Path, *, now: float | None = None, keep_s: float = KEEP_JOBS_S, keep: int = KEEP_JOBS) -> int:
    """Remove ended jobs older than ``keep_s`` seconds, and all but the newest ``keep`` ended jobs; returns how
    many were removed. Queued and running jobs are never removed."""
    now = time.time() if now is None else now

    def ended_at(job: dict) -> float:
        return job.get("finished") or job.get("created") or 0.0

    ended = sorted((job for job in all_jobs(folder) if job["stage"] in FINAL), key=ended_at, reverse=True)
    old = [job["id"] for i, job in enumerate(ended) if i >= keep or now - ended_at(job) > keep_s]
    for job_id in old:
        delete_job(folder, job_id)
    return len(old)


def new_job(
    folder: Path, *, run_ids: list[str], settings: dict, experiment_ids: list[str], owner: str | None = None
) -> dict:
    """Write a queued job and return it (after removing old ended jobs, see :func:`prune`); ``owner`` is the
    user who started it (None without authentication). Its process adds ``pid``, ``started``, ``finished``, and
    ``result`` or ``error``."""
    prune(folder)
    job = {
        "id": uuid.uuid4().hex,
        "owner": owner,
        "stage": "queued",
        "created": time.time(),
        "run_ids": run_ids,
        "settings": settings,
        "experiment_ids": experiment_ids,
        "history": [["queued", time.time()]],
    }
    write_job(folder, job)
    return job


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by the worker that started it) is not alive
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


@contextlib.contextmanager
def admission(folder: Path):
    """Hold the folder's admission lock (an exclusive ``flock``): a worker counts the waiting jobs and adds its
    own under it, so requests arriving together in several workers cannot all pass the bound."""
    fd = os.open(folder / "admission.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def acquire_slot(folder: Path, n: int, *, poll: float = 0.25, on_wait=None) -> int:
    """Block until one of ``n`` slot files is ours (an exclusive ``flock``, held until this process exits); returns
    the slot number. ``on_wait`` is called once if the first try finds every slot taken."""
    waited = False
    while True:
        for slot in range(n):
            fd = os.open(folder / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            _HELD.append(fd)  # kept open: closing it would release the lock
            return slot
        if not waited and on_wait is not None:
            on_wait()
        waited = True
        time.sleep(poll)
