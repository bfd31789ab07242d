"""A collector that answers 429 with ``Retry-After``, 413 and 503 (issue 17, defects 5 and
9), to the real agent's shipping loop.

A proxy (proxy.py) in front of the real collector answers some batches itself, in turn:
429 with ``Retry-After: 2``, then 503 twice, then 413 to the first batch carrying more than
a few samples. The agent is the real Sampler and Shipper, each on its own thread on the
wall clock as ``gpufleet agent`` runs them, over a simulated node. It must wait as long as
``Retry-After`` says (no request before), cut a batch refused as too large into smaller
ones, and in the end every sample it produced is in the ledger exactly once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.config import ShipperSettings
from agent.model import GpuInfo, GpuSample
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.source import SimulatedNode, build_fleet
from agent.stats import AgentStats
from collector.config import (
    AnalysisSettings,
    CollectorSettings,
    IngestSettings,
    LedgerSettings,
    ServerSettings,
)
from gpufleet.cli.collector import build_collector, serve
from tests.faults.conftest import Report
from tests.faults.proxy import Fault, FaultyProxy
from tests.faults.rig import TOKEN
from tests.faults.tally import ledger_tally, sender_tally
from tests.faults.wire import Exchange, SampleKey
from tests.ports import free_port_block

pytestmark = pytest.mark.slow  # real collector processes, kill -9, mounts

SAMPLE_EVERY_SECONDS = 0.25
RETRY_AFTER_SECONDS = 2
#: the proxy's body limit while its 413s last, in samples (a batch holds ~2 ticks x 4 GPUs)
TOO_LARGE_OVER = 4
FAULTS = [
    Fault(429, times=1, skip=3, retry_after_seconds=RETRY_AFTER_SECONDS),
    Fault(503, times=2, skip=2),
    # once: after a 413 the agent cuts every later batch at the size that passed, so a
    # second 413 would come only from batches spooled before it (a matter of timing)
    Fault(413, times=1, skip=2, over_samples=TOO_LARGE_OVER),
]
#: wall seconds the faults may take to be used up (a healthy run: ~6)
FAULTS_DEADLINE_SECONDS = 30.0


class ProducedSource:
    """The simulated node, every sample it produced kept (the sender's ground truth)."""

    def __init__(self, node: SimulatedNode) -> None:
        self.node = node
        self.produced: list[GpuSample] = []

    def discover(self) -> list[GpuInfo]:
        return self.node.discover()

    def read(self, now: float) -> list[GpuSample]:
        samples = self.node.read(now)
        self.produced.extend(samples)
        return samples

    def close(self) -> None:
        self.node.close()


def run_agent(source: ProducedSource, url: str, spool: Path, proxy: FaultyProxy) -> AgentStats:
    """Sampler and Shipper on their threads until the proxy's faults are used up and a
    second more, then a clean stop and a drain of what the spool still holds."""
    stats, stop = AgentStats(), threading.Event()
    settings = ShipperSettings(
        url=url,
        token=TOKEN,
        spool_dir=spool,
        batch_interval_seconds=0.5,
        initial_backoff_seconds=0.2,
        max_backoff_seconds=1.0,
        request_timeout_seconds=5.0,
    )
    shipper = Shipper(settings, source.node.name, stats)
    sampler = Sampler(source, stats, SAMPLE_EVERY_SECONDS, sink=shipper)
    threads = [
        threading.Thread(target=t.run, args=(stop,), daemon=True) for t in (sampler, shipper)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + FAULTS_DEADLINE_SECONDS
    while proxy.faults_left and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    shipper.close()
    drainer = Shipper(settings, source.node.name, stats)  # the spool as the next start finds it
    try:
        while stats.snapshot().spool_batches and time.monotonic() < deadline + 10:
            drainer.flush()
    finally:
        drainer.close()
    return stats


def after_retry_after(exchanges: list[Exchange]) -> Iterator[tuple[float, float]]:
    """(seconds asked, seconds until the agent's next request) for each answer with a
    ``Retry-After``."""
    for i, e in enumerate(exchanges[:-1]):
        if e.retry_after is not None:
            yield float(e.retry_after), exchanges[i + 1].at - e.at


def test_429_413_and_503_are_waited_out_split_and_retried_until_all_is_delivered_once(
    tmp_path: Path, fault_report: Report
) -> None:
    port = free_port_block(2)
    db = tmp_path / "ledger.db"
    settings = CollectorSettings(
        server=ServerSettings(port=port, tokens=[TOKEN]),
        ledger=LedgerSettings(url=str(db)),
        analysis=AnalysisSettings(stale_after_seconds=2.0),
        ingest=IngestSettings(apply_interval_seconds=1.0, commit_interval_seconds=1.0),
    )
    fleet = build_fleet(nodes=1, gpus_per_node=4, start_time=time.time())
    source = ProducedSource(fleet.nodes[0])
    collector = build_collector(settings, tokens=frozenset([TOKEN]))
    server = serve(collector)
    try:
        with FaultyProxy(f"http://127.0.0.1:{port}", port + 1, FAULTS) as proxy:
            stats = run_agent(source, proxy.url, tmp_path / "spool", proxy)
    finally:
        server.should_exit = True
        collector.stop()

    produced: list[SampleKey] = [(s.gpu_uuid, s.timestamp) for s in source.produced]
    exchanges = sorted(proxy.exchanges, key=lambda e: e.at)
    sender = sender_tally(produced, exchanges)
    spans = {}
    for uuid, stamp in produced:
        first, last = spans.get(uuid, (stamp, stamp))
        spans[uuid] = (min(first, stamp), max(last, stamp))
    tally = ledger_tally(db, fleet, spans, SAMPLE_EVERY_SECONDS)
    waits = list(after_retry_after(exchanges))
    refused = [e for e in exchanges if e.status == 413]
    split = [
        e
        for e in refused
        if all(
            any(set(e.samples) >= set(o.samples) and len(o.samples) < len(e.samples) and o.accepted
                for o in exchanges if sample in o.samples)
            for sample in e.samples
        )
    ]  # fmt: skip
    fault_report(
        lost=sender.never_accepted + tally.lost_intervals,
        double=sender.accepted_twice + len(tally.double_counted_gpus),
        answered={s: sum(1 for e in exchanges if e.status == s) for s in (429, 413, 503)},
        waited_after_retry_after_s=[round(w, 2) for _, w in waits],
        refused_413_then_split=f"{len(split)} of {len(refused)}",
    )
    assert not proxy.faults_left, "the agent stopped sending before the faults were used up"
    assert waits and all(waited >= asked - 0.05 for asked, waited in waits), waits
    assert refused and len(split) == len(refused)
    assert stats.snapshot().spool_dropped_batches_total == 0
    assert sender.never_accepted == 0 and sender.accepted_twice == 0
    assert tally.lost_intervals == 0 and not tally.double_counted_gpus
    assert max(tally.energy_errors().values()) <= 0.005
