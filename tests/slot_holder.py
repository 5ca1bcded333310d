"""A process that takes one of the recsys page's comparison slots and holds it, for
tests/test_server_app.py; a module of its own because each spawned process imports it, and this one imports
only the job folder's code."""

import time
from pathlib import Path

from mlflow_recsys.server import _jobs as jobs


def hold_slot(folder: str, n: int, hold: float, out) -> None:
    """Take one of ``n`` slots in ``folder``, hold it ``hold`` seconds, then put (slot, taken at, released at,
    seconds waited) on the queue ``out``."""
    started = time.time()
    slot = jobs.acquire_slot(Path(folder), n, poll=0.02)
    got = time.time()
    time.sleep(hold)
    out.put((slot, got, time.time(), got - started))
