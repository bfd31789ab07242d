"""One flipped bit in the intake log of a real collector costs that batch alone, loudly.

The real ``gpufleet collector`` command takes 50 batches from 50 real agents (one simulated
GPU each, two samples 10 s apart: one interval whose energy the simulator knows) and is
killed with ``kill -9`` before it applies any (its apply interval is 5 minutes). One bit of
the 10th record in the intake segment is flipped, and the collector starts again on the
same ledger. The other 49 batches must be replayed and applied, each GPU's energy as the
simulator's truth, the 10th GPU must have nothing, the 30th agent's resend must be answered
"duplicate" (its ack was in the log only), and the damage must be on /metrics and in the
collector's log, naming the segment and the byte offset.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from agent.config import ShipperSettings
from agent.sampler import Sampler
from agent.shipper import Shipper
from agent.sources.simulated.source import build_fleet
from agent.stats import AgentStats
from collector.ledger.store import Ledger
from gpufleet.cli.demo_fleet import SimClock
from tests.e2e.collector_process import CollectorProcess
from tests.e2e.fleet_rig import TOKEN, free_port

STEP_SECONDS = 10.0
NODES = 50
DAMAGED, RESENT = 9, 29  # the 10th and the 30th batch


class Recorder(httpx.BaseTransport):
    """Real HTTP, keeping each request's headers and body for a resend."""

    def __init__(self) -> None:
        self.real = httpx.HTTPTransport()
        self.sent: list[tuple[dict[str, str], bytes]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((dict(request.headers), request.read()))
        return self.real.handle_request(request)

    def close(self) -> None:
        self.real.close()


def test_a_flipped_bit_in_the_intake_log_loses_one_batch_and_says_where(
    tmp_path: Path,
) -> None:
    start = time.time() - 600.0
    fleet = build_fleet(nodes=NODES, gpus_per_node=1, start_time=start)
    clock = SimClock(start)
    config = tmp_path / "collector.yaml"
    config.write_text("ingest:\n  apply_interval_seconds: 300\n  commit_interval_seconds: 300\n")
    db = tmp_path / "ledger.db"
    collector = CollectorProcess(config, free_port(), db, TOKEN, tmp_path / "collector.log")
    recorders = [Recorder() for _ in fleet.nodes]
    shippers, samplers = [], []
    for node, recorder in zip(fleet.nodes, recorders, strict=True):
        stats = AgentStats()
        settings = ShipperSettings(url=collector.url, token=TOKEN, spool_dir=tmp_path / node.name)
        shipper = Shipper(settings, node.name, stats, transport=recorder, clock=clock)
        shippers.append(shipper)
        samplers.append(Sampler(node, stats, STEP_SECONDS, sink=shipper, clock=clock))
    try:
        collector.start()
        for tick in range(2):
            clock.set(start + tick * STEP_SECONDS)
            for sampler in samplers:
                sampler.tick()
        assert [shipper.flush() for shipper in shippers] == [1] * NODES
        collector.kill()
        segment, offset = flip_a_bit_in_the_record_of(db, fleet.nodes[DAMAGED].name)
        collector.start()
        metrics = httpx.get(collector.url + "/metrics", timeout=10.0).text
        headers, body = recorders[RESENT].sent[-1]
        resent = httpx.post(collector.url + "/v1/batches", content=body, headers=headers)
        assert collector.terminate() == 0  # applies everything acknowledged
    finally:
        collector.stop_if_running()
        for shipper in shippers:
            shipper.close()
    assert resent.status_code == 200 and resent.json()["status"] == "duplicate"
    assert "gpufleet_collector_intake_corrupt_records_total 1.0" in metrics.splitlines()
    assert f"segment {segment} at byte offset {offset} is damaged" in collector.output()
    with Ledger.open(str(db)) as ledger:
        assert not ledger.pending_batches()
        per_gpu = {g.uuid: u for g, u in ledger.usage_totals_by_gpu()}
    [lost] = fleet.nodes[DAMAGED].gpu_uuids
    assert set(per_gpu) == set(fleet.gpu_uuids) - {lost}
    for uuid, usage in per_gpu.items():
        truth = fleet.true_energy_joules(uuid, start, start + STEP_SECONDS)
        assert usage.energy_joules == pytest.approx(truth, rel=0.005), uuid


def flip_a_bit_in_the_record_of(db: Path, node: str) -> tuple[Path, int]:
    """Flip one bit of ``node``'s name in its record (the name is stored as is, the body
    gzipped); returns the segment and the record's offset."""
    [segment] = Path(f"{db}-intake").glob("*.seg")
    data = bytearray(segment.read_bytes())
    at = data.index(node.encode())
    data[at] ^= 0x01
    segment.write_bytes(bytes(data))
    return segment, data.rfind(b"GFB1", 0, at)
