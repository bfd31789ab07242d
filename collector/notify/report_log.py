"""Which efficiency-report periods were sent, per subject (a user or a team) and period, in
the ledger (schema V11, table ``reports_sent``).

A period is *claimed* (a row inserted, its primary key the subject and the period's end)
before its report goes out, so two collectors, or one restarted, never send it twice: the
row says it went, even if the process died while sending it. Periods that ended while the
collector was down are due when it starts again, the newest ``MAX_CATCH_UP`` of them. A
subject seen for the first time starts from the period then complete (recorded as
``skipped``: gpufleet was not reporting on it), so a new install or a user added to the
config gets the next report, not a backlog.
"""

from __future__ import annotations

from collector.efficiency_report import PERIOD_SECONDS
from collector.ledger.store import Ledger

#: at most this many missed periods are sent after a long outage (the newest ones)
MAX_CATCH_UP = 7


class ReportLog:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def due(
        self, subject: str, name: str, every: str, newest_end: float, now: float
    ) -> list[float]:
        """The ends of the periods of ``every`` up to ``newest_end`` not yet claimed for the
        subject, oldest first; none (and a ``skipped`` baseline) for a subject never seen."""
        last = self.last_end(subject, name, every)
        if last is None:
            self.claim(subject, name, every, newest_end, now, outcome="skipped")
            return []
        step = PERIOD_SECONDS[every]
        count = round((newest_end - last) / step)
        ends = [last + k * step for k in range(1, count + 1)]
        return ends[-MAX_CATCH_UP:]

    def last_end(self, subject: str, name: str, every: str) -> float | None:
        row = self.ledger.read(
            lambda c: c.execute(
                "SELECT MAX(period_end) FROM reports_sent "
                "WHERE subject = ? AND name = ? AND every = ?",
                (subject, name, every),
            ).fetchone()
        )
        return None if row is None or row[0] is None else float(row[0])

    def claim(
        self, subject: str, name: str, every: str, end: float, now: float, outcome: str = "sent"
    ) -> bool:
        """Record the period as sent; False when it already was (someone else sends it)."""
        with self.ledger.write_transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO reports_sent (subject, name, every, period_end, outcome, "
                "recorded_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (subject, name, every, end, outcome, now),
            )
            return cursor.rowcount == 1

    def sent(self) -> list[tuple[str, str, str, float, str]]:
        """(subject, name, every, period_end, outcome) of every period recorded, in order."""
        rows = self.ledger.read(
            lambda c: c.execute(
                "SELECT subject, name, every, period_end, outcome FROM reports_sent "
                "ORDER BY subject, name, every, period_end"
            ).fetchall()
        )
        return [(str(a), str(b), str(c), float(d), str(e)) for a, b, c, d, e in rows]
