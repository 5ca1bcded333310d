"""A real `mlflow server` on loopback, for tests, benchmarks and the UI check."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def local_tracking_server(
    backend_store_uri: str, artifacts_destination: str | os.PathLike, *, timeout: float = 120.0
) -> Iterator[str]:
    """Run ``mlflow server`` on 127.0.0.1 (a free port) for the duration of a ``with``; yield its URL.

    The server serves the UI and proxies artifacts to ``artifacts_destination``.
    Its output goes to ``server.log`` beside the artifacts, not to a pipe that
    could fill up and stall it.

    Raises
    ------
    RuntimeError
        If the server does not answer ``/health`` within ``timeout`` seconds;
        the message holds the end of its log.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    destination = Path(artifacts_destination)
    destination.mkdir(parents=True, exist_ok=True)
    log_path = destination.parent / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
             "--backend-store-uri", backend_store_uri, "--artifacts-destination", str(destination)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mlflow server did not start: {log_path.read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
