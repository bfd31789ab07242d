"""How write failures are named (the metrics' bounded ``reason``) and how long an intake
failure holds readiness: real SQLite and OS errors, a clock the test moves."""

from __future__ import annotations

import errno
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from collector.health import FailureReason
from collector.ledger.records import LedgerError
from collector.ledger.write_health import (
    INTAKE_FAILURE_HOLD_SECONDS,
    WriteHealth,
    failure_reason,
    write_problems,
)


def sqlite_error(db: Path, setup: str, uri: str = "") -> sqlite3.Error:
    """The error SQLite raises for an insert into ``db`` after ``setup``, wrapped as the
    ledger wraps it."""
    with closing(sqlite3.connect(db)) as conn:
        conn.executescript("CREATE TABLE IF NOT EXISTS t (x BLOB);")
    with closing(sqlite3.connect(uri or db, uri=bool(uri))) as conn:
        conn.executescript(setup)
        with pytest.raises(sqlite3.Error) as caught:
            conn.execute("INSERT INTO t VALUES (zeroblob(1000000))")
            conn.commit()
    return caught.value


def wrapped(err: BaseException) -> LedgerError:
    try:
        raise LedgerError(f"ledger write failed: {err}") from err
    except LedgerError as ledger_error:
        return ledger_error


def test_failures_are_named_by_what_the_operator_must_fix(tmp_path: Path) -> None:
    full = sqlite_error(tmp_path / "full.db", "PRAGMA max_page_count = 2;")
    ro = sqlite_error(tmp_path / "ro.db", "", uri=f"file:{tmp_path / 'ro.db'}?mode=ro")
    assert failure_reason(wrapped(full)) is FailureReason.DISK_FULL
    assert failure_reason(wrapped(ro)) is FailureReason.READ_ONLY
    assert failure_reason(OSError(errno.ENOSPC, "No space left")) is FailureReason.DISK_FULL
    assert failure_reason(OSError(errno.EROFS, "Read-only")) is FailureReason.READ_ONLY
    overflow = OverflowError("Python int too large to convert to SQLite INTEGER")
    assert failure_reason(wrapped(overflow)) is FailureReason.OVERFLOW
    assert failure_reason(ValueError("something else")) is FailureReason.OTHER


def test_an_intake_failure_holds_readiness_a_while_a_commit_failure_until_one_works() -> None:
    now = [1000.0]
    health = WriteHealth(lambda: now[0])
    health.intake_failed(OSError(errno.ENOSPC, "No space left on device"))
    health.commit_failed(wrapped(OverflowError("too large")))
    problems = write_problems(health.state(), None, 60.0, now[0])
    assert len(problems) == 2 and "free space" in problems[1]
    now[0] += INTAKE_FAILURE_HOLD_SECONDS + 1  # no traffic reaches a pod that is not ready
    (problem,) = write_problems(health.state(), None, 60.0, now[0])
    assert problem.startswith("ledger commits fail since 21 s ago (overflow")
    health.commit_ok()
    assert write_problems(health.state(), None, 60.0, now[0]) == []
    assert health.state().commit_failures == {"overflow": 1}
    assert health.state().intake_failures == {"disk_full": 1}


def test_a_commit_overdue_while_applied_samples_wait_is_a_problem() -> None:
    health = WriteHealth(lambda: 1000.0)
    health.commit_ok()
    state = health.state()
    assert write_problems(state, 1000.0, 5.0, 1029.0) == []  # overdue after max(15, 30) s
    (problem,) = write_problems(state, 1000.0, 5.0, 1031.0)
    assert "no ledger commit for 31 s" in problem
