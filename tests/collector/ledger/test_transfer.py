"""``gpufleet ledger migrate``: a SQLite ledger with history and a pending intake, copied
into a new PostgreSQL ledger through the command line, answers every query as the source
did (the source's answers are the truth), keeps its pending batches for replay and its acks
for duplicates, and a second run is refused leaving the target as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collector.ledger.store import Ledger, LedgerWrite
from collector.notify.messages import Event
from collector.notify.outbox import Outbox
from collector.records import HOUR_SECONDS, IdleEpisode, Usage
from gpufleet.cli.main import main
from tests.collector.ledger.test_recommendations import rec
from tests.collector.ledger.test_store import POD, T0, registered
from tests.postgres import PostgresServer

DAY = 24 * HOUR_SECONDS


def filled(path: Path) -> tuple[int, int]:
    """A ledger with usage over three days, episodes, a cursor, recommendations, an outbox
    message, two applied batches and two pending ones; returns the pending ids."""
    with Ledger.open(str(path)) as ledger:
        registered(ledger)
        write = LedgerWrite()
        for h in range(0, 72, 5):
            write.gpu_usage[(T0 + h * HOUR_SECONDS, "G1")] = Usage(energy_joules=10.0 + h)
            write.workload_usage[(T0 + h * HOUR_SECONDS, POD.key)] = Usage(idle_cost=h / 2)
        write.episodes_closed = [IdleEpisode("G1", "n1", T0, T0 + 600, POD.key)]
        applied = [ledger.record_batch("n1", "b", s, T0 + s, b"{}", 1) for s in (1, 2)]
        write.batches_done = [i for i in applied if i is not None]
        ledger.commit(write)
        ledger.upsert_recommendations([rec("a", 10.0), rec("b", 99.0)])
        event = Event(key="rec:a:opened", source="recommendations", kind="opened")
        assert Outbox(ledger).enqueue(event, ["chat", "mail"], T0) == 2
        a = ledger.record_batch("n1", "b", 3, T0 + 3, b'{"seq":3}', 4)
        b = ledger.record_batch("n2", "b", 1, T0 + 4, b'{"seq":1}', 2)
        assert a is not None and b is not None
        return a, b


def answers(ledger: Ledger) -> dict[str, Any]:
    span = (T0 - DAY, T0 + 4 * DAY)
    return {
        "gpus": ledger.gpus(),
        "by_gpu": ledger.usage_by_gpu(*span),
        "by_workload": ledger.usage_by_workload(*span),
        "by_team": ledger.usage_by_group(*span, "team"),
        "totals": ledger.usage_totals_by_workload(),
        "episodes": ledger.idle_episodes(*span, include_open=True),
        "recommendations": ledger.recommendations(),
        "pending": [(r.entry.node, r.entry.seq, r.entry.body) for r in ledger.pending_records()],
        "outbox": [(p.id, p.event) for p in Outbox(ledger).due("chat", T0 + 1)],
    }


def test_migrate_copies_history_and_pending_intake_once(
    tmp_path: Path, postgres: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "ledger.db"
    filled(source)
    with Ledger.open(str(source)) as ledger:
        truth = answers(ledger)
    assert len(truth["pending"]) == 2 and truth["by_gpu"] and truth["outbox"]
    url = postgres.new_database()
    assert main(["ledger", "migrate", "--from", str(source), "--to", url]) == 0
    assert "2 pending batches" in capsys.readouterr().out
    with Ledger.open(url) as target:
        assert target.dialect == "postgresql"
        assert answers(target) == truth
        # acks came along: applied and pending batches are duplicates, a new one is not
        assert target.record_batch("n1", "b", 2, T0, b"{}", 1) is None
        assert target.record_batch("n1", "b", 3, T0, b"{}", 1) is None
        assert target.record_batch("n1", "b", 4, T0, b"{}", 1) is not None
        # the outbox numbers new rows after the copied ones
        later = Event(key="rec:b:opened", source="recommendations", kind="opened")
        assert Outbox(target).enqueue(later, ["chat"], T0) == 1
        ids = [p.id for p in Outbox(target).due("chat", T0 + 1)]
        assert len(ids) == 2 and ids[1] > ids[0]
    assert main(["ledger", "migrate", "--from", str(source), "--to", url]) == 1
    assert "not empty" in capsys.readouterr().err
    with Ledger.open(url) as target:
        assert len(target.pending_records()) == 3  # the refused run added nothing


def test_migrate_wants_a_sqlite_source_and_a_postgresql_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["ledger", "migrate", "--from", "postgresql://u:pw@h/db", "--to", str(tmp_path)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "--from takes the SQLite ledger file" in err and "pw" not in err
