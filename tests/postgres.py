"""A real PostgreSQL 15 for tests: ``initdb`` into a temporary directory and ``pg_ctl start``
on a free loopback port, as an unprivileged process, stopped afterwards. No system service.

Use it through the ``postgres`` fixture (tests/postgres_fixture.py registers it in the
conftest of a test package that needs it)::

    def test_x(postgres: PostgresServer) -> None:
        url = postgres.new_database()   # an empty database of its own
        ...

The server is started once per test session (``initdb`` + start take ~2 s); each test takes
a fresh database from it, so tests never see each other's tables. As root (CI and this
machine run tests as root, and PostgreSQL refuses to run as root) the server runs as the
``nobody`` user through ``setpriv``.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import free_port_block

#: Debian's postgresql-15 puts its server programs here (scripts/debian-packages.txt)
BIN = Path("/usr/lib/postgresql/15/bin")
USER = "gpufleet"


def available() -> bool:
    return (BIN / "initdb").exists() and (BIN / "pg_ctl").exists()


def _as_server_user() -> list[str]:
    """The prefix that runs a command as an unprivileged user when we are root."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam("nobody")
    return [
        "setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
        "--",
    ]


@dataclass
class PostgresServer:
    """A running server; ``url`` names its ``postgres`` database."""

    directory: Path
    port: int
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def url(self) -> str:
        return self.url_of("postgres")

    def url_of(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "t") -> str:
        """The URL of a new, empty database on this server."""
        import psycopg

        name = f"{prefix}{next(self._names)}_{os.getpid()}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_of(name)

    def stop(self) -> None:
        subprocess.run(
            [*_as_server_user(), str(BIN / "pg_ctl"), "-D", str(self.directory / "data"),
             "-m", "immediate", "stop"],
            check=False, capture_output=True, timeout=60,
        )  # fmt: skip
        shutil.rmtree(self.directory, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """initdb + pg_ctl start on a free loopback port; raises with the server's log on failure."""
    directory = Path(tempfile.mkdtemp(prefix="gpufleet-pg-"))
    data, log = directory / "data", directory / "server.log"
    prefix = _as_server_user()
    if prefix:
        nobody = pwd.getpwnam("nobody")
        os.chown(directory, nobody.pw_uid, nobody.pw_gid)
    subprocess.run(
        [*prefix, str(BIN / "initdb"), "-D", str(data), "-U", USER, "--auth=trust",
         "--encoding=UTF8", "--locale=C", "--no-sync"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = free_port_block(1)
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={directory} "
        "-c fsync=off -c synchronous_commit=on -c full_page_writes=off -c max_connections=200"
    )
    started = subprocess.run(
        [*prefix, str(BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
         "-w", "-t", "60", "start"],
        check=False, capture_output=True, timeout=120,
    )  # fmt: skip
    if started.returncode != 0:
        text = log.read_text(errors="replace") if log.exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.decode()}\n{text}")
    return PostgresServer(directory, port)
