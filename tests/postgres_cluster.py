"""A throwaway PostgreSQL cluster from Debian's packages, for the PostgreSQL tests and benchmarks.

``initdb`` and ``pg_ctl`` run in a temporary folder as an unprivileged user (PostgreSQL refuses to run as root:
as root they run as the ``postgres`` user that Debian's package creates, through ``runuser``). The server
listens on 127.0.0.1 only, on a free port, with ``trust`` authentication, and its socket sits in the temporary
folder, so it touches nothing of a system cluster. Install the server with ``apt-get install -y postgresql``
(``make postgres-test`` does it when it is missing); MLflow reaches it through ``psycopg2`` (the ``test`` extra).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mlflow_recsys.tracking._local_server import free_port

#: Where Debian's ``postgresql-<version>`` packages put ``initdb`` and ``pg_ctl`` (not on PATH).
DEBIAN_BINARIES = Path("/usr/lib/postgresql")
#: The account PostgreSQL runs as when the caller is root.
SERVICE_USER = "postgres"
#: The cluster's superuser role; with ``trust`` on 127.0.0.1 any local process may connect as it.
SUPERUSER = "postgres"


def postgres_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: ``$PG_BIN``, the newest Debian version, or PATH; else None."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    versions = sorted(
        (p.parent for p in DEBIAN_BINARIES.glob("*/bin/initdb")),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
    )
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@dataclass(frozen=True)
class PostgresCluster:
    """A running cluster: its port on 127.0.0.1, binaries and folder."""

    port: int
    bin: Path
    root: Path

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy / MLflow backend-store URI for ``database``.

        The driver is named: SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3, 2.0 as psycopg2.
        """
        return f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database ``name``; return its URI."""
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, name],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return self.url(name)

    def log(self) -> str:
        """The end of the server's log (for error messages)."""
        path = self.root / "postgres.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _as_service_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", SERVICE_USER, "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def postgres_cluster(*, durable: bool = False, timeout: float = 60.0) -> Iterator[PostgresCluster]:
    """Initialise and start a PostgreSQL cluster in a temporary folder; stop and remove it when the ``with`` ends.

    ``durable=False`` (tests) turns ``fsync`` and synchronous commits off, which a throwaway cluster does not
    need; ``durable=True`` (benchmarks) keeps PostgreSQL's defaults.

    Raises
    ------
    RuntimeError
        If PostgreSQL is not installed, root has no ``postgres`` account to run it as, or the server does not
        start within ``timeout`` seconds (the message holds the end of its log).
    """
    binaries = postgres_bin()
    if binaries is None or not (binaries / "pg_ctl").exists():
        raise RuntimeError(
            "PostgreSQL: expected initdb and pg_ctl under /usr/lib/postgresql/*/bin, found none; "
            "install them with `apt-get install -y postgresql`"
        )
    # Not pytest's tmp_path: that is private to root (0700), and the cluster runs as another user.
    root = Path(tempfile.mkdtemp(prefix="recsys-pg-"))
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam(SERVICE_USER)
        except KeyError:
            shutil.rmtree(root)
            raise RuntimeError(
                f"PostgreSQL refuses to run as root and there is no {SERVICE_USER!r} account to run "
                "it as; `apt-get install -y postgresql` creates one"
            ) from None
        os.chown(root, account.pw_uid, account.pw_gid)
    data, log = root / "data", root / "postgres.log"
    port = free_port()
    options = [f"-p {port}", "-c listen_addresses=127.0.0.1", f"-k {root}"]
    if not durable:
        options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
    cluster = PostgresCluster(port=port, bin=binaries, root=root)
    started = False
    try:
        _start(cluster, data, log, options, timeout)
        started = True
        yield cluster
    finally:
        if started or (data / "postmaster.pid").exists():
            subprocess.run(
                _as_service_user([str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)


def _start(cluster: PostgresCluster, data: Path, log: Path, options: list[str], timeout: float) -> None:
    initdb = [
        str(cluster.bin / "initdb"),
        "-D",
        str(data),
        "-U",
        SUPERUSER,
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-locale",
        "--no-sync",
    ]
    proc = subprocess.run(_as_service_user(initdb), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"PostgreSQL: initdb failed: {proc.stdout}{proc.stderr}")
    start = [
        str(cluster.bin / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(log),
        "-w",
        "-t",
        str(int(timeout)),
        "-o",
        " ".join(options),
        "start",
    ]
    proc = subprocess.run(_as_service_user(start), capture_output=True, text=True, timeout=timeout + 10)
    if proc.returncode != 0:
        raise RuntimeError(f"PostgreSQL did not start: {proc.stdout}{proc.stderr}\n{cluster.log()}")
