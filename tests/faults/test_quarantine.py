"""A batch that cannot be applied is quarantined, and every other node's batches are applied.

Issue 17, defect 1: one sample with ``memory_used_bytes`` >= 2**63 made every ledger commit
fail (OverflowError from sqlite3) for the whole fleet, and it was replayed from the intake
log after each restart. Here the poison batch is written straight into the intake log, as a
collector of an older version (or one whose edge let it through) would have stored it,
beside good batches of two other nodes; then the real ``gpufleet collector`` starts on that
ledger: the replay quarantines it. A second poison batch POSTed to it while it runs is
refused at the edge (422 naming the field: the rule table bounds it), never stored.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec

from collector.ledger.batch_log import BatchRecord
from collector.ledger.store import Ledger
from tests.faults.write_rig import (
    WATTS,
    metric,
    node_batch,
    post,
    start_collector,
    wait_for,
    workload_energy,
)

POISON = 2**63


def test_a_stored_poison_batch_is_quarantined_at_replay_a_posted_one_refused_neither_blocks(
    tmp_path: Path,
) -> None:
    db, origin = tmp_path / "ledger.db", time.time() - 600
    good = [node_batch(n, 1, origin, range(0, 310, 10)) for n in ("a", "b")]
    poison = node_batch("bad", 1, origin, range(0, 310, 10), memory=POISON)
    with Ledger.open(str(db)) as ledger:  # stored, acknowledged, not yet applied
        ledger.record_batches(
            [
                BatchRecord(
                    b.node,
                    b.agent_boot_id,
                    b.seq,
                    b.sent_at,
                    msgspec.json.encode(b),
                    len(b.samples),
                )
                for b in (good[0], poison, good[1])
            ]
        )
    collector = start_collector(tmp_path, db)
    try:
        wait_for(
            "the good nodes' energy in the ledger",
            lambda: len(workload_energy(db)) == 2,
            within_seconds=30,
        )
        # while it runs: a second poison batch, and the good nodes go on
        refused = post(collector, node_batch("bad", 2, origin, range(310, 610, 10), POISON))
        assert refused.status_code == 422
        assert refused.json()["field"] == "$.samples[0].memory_used_bytes"

        for i, node in enumerate(("a", "b")):
            assert post(collector, node_batch(node, 2, origin, range(310, 610, 10))).is_success, i
        wait_for(
            "the good nodes' second batches applied",
            lambda: workload_energy(db).get("pod:ml/job-b", 0) >= WATTS * 600,
            within_seconds=30,
        )
        health = collector.health()
        assert metric(collector, "gpufleet_collector_quarantined_batches") == 1
        assert metric(collector, "gpufleet_collector_ready") == 1
        assert metric(collector, "gpufleet_collector_ledger_up") == 1
    finally:
        collector.stop_if_running()
    assert workload_energy(db) == {"pod:ml/job-a": WATTS * 600, "pod:ml/job-b": WATTS * 600}
    write_path = health["write_path"]
    assert isinstance(write_path, dict) and health["ready"] is True
    assert write_path["quarantined_batches"] == 1
    newest = write_path["newest_quarantined"]
    assert (newest["node"], newest["seq"]) == ("bad", 1)
    assert "memory_used_bytes" in newest["error"]
    # kept: each with its reason, and the body as sent, to fix and resend
    aside = tmp_path / "ledger.db-intake" / "quarantine"
    metas = [json.loads(p.read_text()) for p in sorted(aside.glob("*.json"))]
    assert [(m["node"], m["seq"]) for m in metas] == [("bad", 1)]
    bodies = {msgspec.json.decode(p.read_bytes())["seq"] for p in aside.glob("*.batch")}
    assert bodies == {1}
    # and not replayed again: the next start finds nothing pending, the quarantine counted
    with Ledger.open(str(db)) as ledger:
        assert ledger.pending_batches() == []
        assert ledger.quarantined().count == 1
