"""Every answer to a recommendation, in the ledger (schema v6, table ``answers``).

An answer is recorded once per press: its id is the service's own (Slack's ``action_ts``,
Feishu's ``event_id``, a signed link's hash), so a replayed request changes nothing. A
"Keep" answer carries ``kept_until``: the auto-release engine asks ``kept_until`` before
every step and does nothing for a kept workload until then.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.ledger.store import Ledger


@dataclass(frozen=True)
class AnswerRecord:
    id: str
    answered_at: float
    service: str  # slack | feishu | lark | link
    service_user: str  # the service's id for the person (a link: the user it was made for)
    who: str  # the directory user, "" when unknown
    action: str  # keep | release | dismiss
    recommendation_id: str
    workload_key: str
    outcome: str  # kept | released | dry_run | dismissed | refused | failed
    detail: str
    kept_until: float | None = None


_COLUMNS = (
    "id, answered_at, service, service_user, who, action, recommendation_id, workload_key, "
    "outcome, detail, kept_until"
)


class AnswerLog:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def record(self, answer: AnswerRecord) -> bool:
        """Store ``answer``; False when an answer with its id was already recorded."""
        with self.ledger.write_transaction() as conn:
            cursor = conn.execute(
                f"INSERT INTO answers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (
                    answer.id,
                    answer.answered_at,
                    answer.service,
                    answer.service_user,
                    answer.who,
                    answer.action,
                    answer.recommendation_id,
                    answer.workload_key,
                    answer.outcome,
                    answer.detail,
                    answer.kept_until,
                ),
            )
            return cursor.rowcount == 1

    def seen(self, answer_id: str) -> bool:
        row = self.ledger.read(
            lambda c: c.execute("SELECT 1 FROM answers WHERE id = ?", (answer_id,)).fetchone()
        )
        return row is not None

    def kept_until(self, workload_key: str, now: float) -> float | None:
        """When the newest running "Keep" of ``workload_key`` ends; None when none runs."""
        row = self.ledger.read(
            lambda c: c.execute(
                "SELECT MAX(kept_until) FROM answers WHERE workload_key = ? "
                "AND outcome = 'kept' AND kept_until > ?",
                (workload_key, now),
            ).fetchone()
        )
        return None if row is None or row[0] is None else float(row[0])

    def answers(self) -> list[AnswerRecord]:
        rows = self.ledger.read(
            lambda c: c.execute(f"SELECT {_COLUMNS} FROM answers ORDER BY answered_at").fetchall()
        )
        return [AnswerRecord(*row) for row in rows]
