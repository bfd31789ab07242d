"""What the ledger's SQL runs on: the part of a DB-API connection both backends offer.

The ledger's statements are written once, in the SQL that SQLite and PostgreSQL both
accept (``ON CONFLICT ... DO UPDATE`` with the target table's columns qualified, ``CASE``
instead of ``IIF``/scalar ``MIN``, ``CAST(? AS TEXT)`` where a parameter may be NULL),
with SQLite's ``?`` and ``:name`` parameters. ``sqlite3.Connection`` is such a connection;
collector/ledger/postgres.py wraps a psycopg connection as one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgresql"]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...
