"""MLflow's own servers on 127.0.0.1 for the length of a ``with``: a tracking server and a model server.

Public: the how-to scripts, tests and benchmarks run their steps on one machine with them. Each starts the real
``mlflow`` command in a child process, waits until it answers, yields its address and stops it at the end.
Servers listen on loopback only: for one user's machine, not for serving others.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def loopback_process(argv: list[str], probe_url: str, log_path: Path, env: dict, timeout: float) -> Iterator[None]:
    """Run ``argv`` until the ``with`` ends, once ``probe_url`` answers; RuntimeError with the end of the log if
    it exits or does not answer within ``timeout`` seconds."""
    with open(log_path, "w") as log:  # a file, not a pipe: a pipe nobody reads can fill up and stall the server
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not _answers(probe_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} {argv[1:4]} did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except OSError:
        return False
    return True


@contextmanager
def local_tracking_server(
    backend_store_uri: str,
    artifacts_destination: str | os.PathLike,
    *,
    timeout: float = 120.0,
    port: int | None = None,
    app_name: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Run ``mlflow server`` on 127.0.0.1 (``port``, default a free one) for the duration of a ``with``; yield
    its URL.

    The server serves the UI and proxies artifacts to ``artifacts_destination``.
    Its output goes to ``server.log`` beside the artifacts. ``app_name`` is passed as ``--app-name`` (``"recsys"``
    serves this package's pages). The server's environment is this process's without its ``MLFLOW_`` variables,
    the interpreter's folder first on ``PATH`` (the workers start executables from it), then ``env``.

    Raises
    ------
    RuntimeError
        If the server does not answer ``/health`` within ``timeout`` seconds; the message holds the end of its log.
    """
    port = port or free_port()
    destination = Path(artifacts_destination)
    destination.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    server_env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "_MLFLOW_"))}
    server_env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    server_env.update(env or {})
    argv = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--backend-store-uri", backend_store_uri, "--artifacts-destination", str(destination)]
    argv += ["--app-name", app_name] if app_name else []
    url = f"http://127.0.0.1:{port}"
    with loopback_process(argv, f"{url}/health", destination.parent / "server.log", server_env, timeout):
        yield url


@contextmanager
def local_model_server(model_uri: str, log_path: str | os.PathLike, *, timeout: float = 120.0) -> Iterator[str]:
    """Run ``mlflow models serve`` for ``model_uri`` on 127.0.0.1 (a free port); yield its URL.

    The model is served in this environment (``--env-manager local``); POST
    requests go to ``<url>/invocations``. Output goes to ``log_path``.

    Raises
    ------
    RuntimeError
        If the server does not answer ``/ping`` within ``timeout`` seconds.
    """
    port = free_port()
    bin_dir = Path(sys.executable).parent
    # The scoring server execs `uvicorn` from PATH: make it the one beside this interpreter.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    argv = [str(bin_dir / "mlflow"), "models", "serve", "-m", model_uri, "--env-manager", "local"]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with loopback_process(argv, f"{url}/ping", Path(log_path), env, timeout):
        yield url
