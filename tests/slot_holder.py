"""A process that takes one of the recsys page's comparison slots and holds it, for
tests/test_server_app.py; a module of its own because each spawned process imports it, and this one imports
only the job folder's code."""

import time
from pathlib import Path

from mlflow_recsys.server import _jobs as jobs


def hold_slot(folder: str, n: int, hold: float, out, start=None) -> None:
    """Take one of ``n`` slots in ``folder``, hold it ``hold`` seconds, then put (slot, taken at, released at,
    seconds waited) on the queue ``out``. With ``start`` (a barrier), every holder asks at once: processes that start
    one after another on a busy machine would otherwise never compete."""
    if start is not None:
        start.wait(timeout=120)
    started = time.time()
    slot = jobs.acquire_slot(Path(folder), n, poll=0.02)
    got = time.time()
    time.sleep(hold)
    out.put((slot, got, time.time(), got - started))
