"""A damaged intake segment loses only the damaged batch, loudly (issue 17, defect 3).

The collector is killed with ``kill -9`` while every batch it acknowledged still waits in
the intake log (apply and commit intervals far longer than the run), one record of the
newest segment is damaged, and the collector starts again on it. The agents go on
sampling and shipping throughout; afterwards the ledger must hold everything but the
damaged batch, whose samples are known from its record: its GPUs each miss that many
samples plus one sampling step, no other GPU misses any, and nothing is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agent.sources.simulated.source import build_fleet
from tests.e2e.collector_process import CollectorProcess
from tests.faults.conftest import Report
from tests.faults.intake_damage import Record, flip_bit, newest_segment, records, truncate_within
from tests.faults.rig import (
    TOKEN,
    drain,
    metric,
    run_ticks,
    sim_agent,
    write_config,
)
from tests.faults.tally import agents_tally
from tests.faults.wire import decode_batch

pytestmark = pytest.mark.slow  # real collector processes, kill -9, mounts

TICKS_BEFORE_KILL, TICKS_AFTER = 60, 12
SHIP_EVERY_TICKS = 3  # 20 batches per node before the kill
#: long enough that nothing is applied or committed before the kill
HOLD = {"ingest": {"apply_interval_seconds": 300.0, "commit_interval_seconds": 300.0}}
CORRUPT_RECORDS = "gpufleet_collector_intake_corrupt_records_total"


def resend(url: str, record: Record) -> httpx.Response:
    """POST a record's body again, as its agent sent it."""
    gzipped = record.body[:2] == b"\x1f\x8b"
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    return httpx.post(url + "/v1/batches", content=record.body, headers=headers, timeout=10.0)


def bit_flip_in_a_middle_record(segment: Path, found: list[Record]) -> tuple[Record, int, Record]:
    damaged = found[len(found) // 2]
    later = next(r for r in found[len(found) // 2 + 1 :] if r.node == damaged.node)
    return damaged, flip_bit(segment, damaged), later


def cut_off_in_the_last_record(segment: Path, found: list[Record]) -> tuple[Record, int, Record]:
    damaged = found[-1]
    earlier = next(r for r in reversed(found[:-1]) if r.node == damaged.node)
    return damaged, truncate_within(segment, damaged), earlier


@pytest.mark.parametrize(
    "damage", [bit_flip_in_a_middle_record, cut_off_in_the_last_record], ids=["bit-flip", "cut-off"]
)
def test_a_damaged_record_loses_that_batch_alone_and_says_so(
    tmp_path: Path,
    collector_at: Callable[[Path, Path], CollectorProcess],
    fault_report: Report,
    damage: Callable[[Path, list[Record]], tuple[Record, int, Record]],
) -> None:
    start = time.time() - 3600.0
    fleet = build_fleet(nodes=2, gpus_per_node=2, start_time=start)
    config, db = write_config(tmp_path / "collector.yaml", HOLD), tmp_path / "ledger.db"
    collector = collector_at(config, db)
    agents = [sim_agent(n, collector.url, tmp_path / n.name, start) for n in fleet.nodes]
    for agent in agents:
        agent.tick()
    collector.start()
    run_ticks(agents, TICKS_BEFORE_KILL, SHIP_EVERY_TICKS)
    assert not any(a.spooled() for a in agents)  # every batch acknowledged
    collector.kill()

    segment = newest_segment(Path(f"{db}-intake"))
    found = records(segment)
    assert len(found) == 2 * TICKS_BEFORE_KILL // SHIP_EVERY_TICKS
    damaged, offset, other = damage(segment, found)

    collector.start()
    try:
        corrupt = metric(collector.url, CORRUPT_RECORDS)
        again = resend(collector.url, other)
        run_ticks(agents, TICKS_AFTER, SHIP_EVERY_TICKS)
        drain(agents)
        collector.terminate()
    finally:
        for agent in agents:
            agent.shipper.close()
    tally, sender = agents_tally(config, db, fleet, agents)
    log = collector.output()

    hit = {u for u, _ in _samples_of(damaged)}
    per_gpu = damaged.sample_count // len(hit)
    lost = sum(max(0, tally.missing_intervals(u) - 1) for u in tally.gpus)
    fault_report(
        lost=lost,
        double=len(tally.double_counted_gpus) + sender.accepted_twice,
        damaged_batch_samples=damaged.sample_count,
        corrupt_counter=corrupt,
    )
    assert sender.never_accepted == 0  # the agents delivered everything
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    assert corrupt == 1
    assert segment.name in log and (str(damaged.offset) in log or str(offset) in log), log
    assert {u: tally.missing_intervals(u) for u in tally.gpus} == {
        u: per_gpu + 1 if u in hit else 0 for u in tally.gpus
    }
    assert lost == damaged.sample_count
    assert not tally.double_counted_gpus and sender.accepted_twice == 0
    assert max(tally.energy_errors().values()) <= 0.005  # the energy counter spans the gap
    assert tally.pending_batches == 0


def _samples_of(record: Record) -> list[tuple[str, float]]:
    coding = "gzip" if record.body[:2] == b"\x1f\x8b" else None
    return [(s.gpu_uuid, s.timestamp) for s in decode_batch(record.body, coding).samples]
