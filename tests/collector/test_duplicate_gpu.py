"""The same GPU uuid from two nodes (a cloned VM image, a misconfigured replay, a spoofed
agent), over real HTTP against a real core: the second node's claim is refused with a 409
naming the uuid and both nodes, counted, and shown in /v1/fleet; the first node's figures
stay its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from collector.http.app import create_app
from collector.service import CollectorCore
from tests.collector.http.test_app import served, settings
from tests.collector.test_core import T0, open_core

TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
WATTS = 100.0
GPU = GpuInfo(uuid="GPU-cloned", index=0, name="NVIDIA H100 80GB HBM3")
#: each node's NVML counter at T0: the clone's board is another board, its counter too
COUNTER_AT_T0 = {"node-a": 1.0e7, "node-b": 4.0e8}


def node_batch(node: str, seq: int, times: range) -> bytes:
    samples = tuple(
        GpuSample(
            timestamp=T0 + t,
            gpu_uuid=GPU.uuid,
            sm_activity=0.5,
            dram_activity=0.5,
            power_watts=WATTS,
            energy_joules=COUNTER_AT_T0[node] + WATTS * t,
        )
        for t in times
    )
    batch = Batch(schema_version=SCHEMA_VERSION, node=node, agent_boot_id=f"boot-{node}",
                  seq=seq, sent_at=T0 + times[-1], gpus=(GPU,), samples=samples)  # fmt: skip
    return msgspec.json.encode(batch)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[CollectorCore, httpx.Client]]:
    core = open_core(tmp_path / "ledger.db", T0 + 3700)
    app = create_app(core.service, settings(), [TOKEN], clock=lambda: T0 + 3700)
    with served(app) as http:
        yield core, http
    core.close()
    core.ledger.close()


def test_a_second_node_claiming_a_gpu_uuid_is_refused_naming_both_and_counted(
    rig: tuple[CollectorCore, httpx.Client],
) -> None:
    core, http = rig
    first = http.post(
        "/v1/batches", content=node_batch("node-a", 1, range(0, 301, 10)), headers=AUTH
    )
    assert first.status_code == 200
    clone = http.post(
        "/v1/batches", content=node_batch("node-b", 1, range(0, 301, 10)), headers=AUTH
    )
    assert clone.status_code == 409
    error = clone.json()
    assert GPU.uuid in error["error"] and "node-a" in error["error"] and "node-b" in error["error"]
    assert error["reason"] == "duplicate_gpu" and error["field"] == "$.gpus[0].uuid"
    later = http.post(
        "/v1/batches", content=node_batch("node-a", 2, range(310, 601, 10)), headers=AUTH
    )
    assert later.status_code == 200
    core.applier.tick(flush=True)

    # the first node's figures are intact: its own 600 s at WATTS, on its own node
    [(record, usage)] = core.ledger.usage_totals_by_gpu()
    assert record.node == "node-a"
    assert usage.energy_joules == pytest.approx(WATTS * 600, rel=1e-9)

    fleet = http.get("/v1/fleet", headers=AUTH).json()
    assert [g["node"] for g in fleet["gpus"]] == ["node-a"]
    [dup] = fleet["duplicate_gpus"]
    assert (dup["uuid"], dup["node"], dup["claimed_by"]) == (GPU.uuid, "node-a", "node-b")
    assert dup["batches_refused"] == 1

    metrics = http.get("/metrics", headers=AUTH).text
    assert 'gpufleet_collector_rejected_batches_total{reason="duplicate_gpu"} 1.0' in metrics


def test_a_gpu_silent_on_its_node_past_the_hold_may_move_and_no_interval_spans_the_move(
    rig: tuple[CollectorCore, httpx.Client],
) -> None:
    """A GPU moved to another node (its old node quiet for longer than a claim is held)
    is taken, not refused; the hour between the two hosts' counters is no interval."""
    core, http = rig
    before = node_batch("node-a", 1, range(0, 61, 10))
    assert http.post("/v1/batches", content=before, headers=AUTH).status_code == 200
    moved = node_batch("node-b", 1, range(3600, 3661, 10))
    assert http.post("/v1/batches", content=moved, headers=AUTH).status_code == 200
    core.applier.tick(flush=True)
    assert [v.node for v in core.service.fleet(T0 + 3660)] == ["node-b"]
    [(_, usage)] = core.ledger.usage_totals_by_gpu()
    assert usage.energy_joules == pytest.approx(WATTS * 60 * 2, rel=1e-9)  # 60 s on each
