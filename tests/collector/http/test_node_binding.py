"""Node-bound agent tokens against the issue's two takeover attacks, over real HTTP (the
app on loopback) into a real core (SQLite ledger): a second node's token posting as the
victim node to claim its GPU, and pre-claiming the victim's next seqs so that its real
batches would be acknowledged "duplicate" and dropped. Both are refused 403 before anything
is stored; the victim's 10 real batches are all accepted (50 of 50 samples)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample
from collector.config import ServerSettings
from collector.http.app import create_app
from collector.http.tokens import load_tokens
from collector.service import CollectorCore
from tests.collector.http.test_app import served, settings
from tests.collector.test_core import T0, open_core

VICTIM, ATTACKER = "gpu-node-b", "gpu-node-a"
TOKENS = {VICTIM: "tok-victim-b-0123", ATTACKER: "tok-attacker-a-4567", "reader": "tok-read-89"}
BATCHES, SAMPLES_PER_BATCH = 10, 5


def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(
        f"{TOKENS[VICTIM]} agent nodes={VICTIM} name=agent-b\n"
        f"{TOKENS[ATTACKER]} agent nodes={ATTACKER} name=agent-a\n"
        f"{TOKENS['reader']} read\n"
    )
    return path


def gpu_of(node: str) -> GpuInfo:
    return GpuInfo(uuid=f"GPU-{node}", index=0, name="NVIDIA H100 80GB HBM3")


def batch(node: str, seq: int, gpu: GpuInfo, boot: str = "") -> bytes:
    first = T0 + (seq - 1) * SAMPLES_PER_BATCH * 10
    samples = tuple(
        GpuSample(timestamp=first + 10 * i, gpu_uuid=gpu.uuid, sm_activity=0.5,
                  power_watts=100.0, energy_joules=1e6 + 1000.0 * (first + 10 * i - T0))
        for i in range(SAMPLES_PER_BATCH)
    )  # fmt: skip
    boot = boot or f"boot-{node}"
    sent_at = samples[-1].timestamp
    return msgspec.json.encode(
        Batch(
            schema_version=SCHEMA_VERSION,
            node=node,
            agent_boot_id=boot,
            seq=seq,
            sent_at=sent_at,
            gpus=(gpu,),
            samples=samples,
        )
    )


def post(http: httpx.Client, token: str, body: bytes) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return http.post("/v1/batches", content=body, headers=headers)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[CollectorCore, httpx.Client]]:
    now = T0 + BATCHES * SAMPLES_PER_BATCH * 10 + 60
    core = open_core(tmp_path / "ledger.db", now)
    tokens = load_tokens(ServerSettings(tokens_file=tokens_file(tmp_path)))
    with served(create_app(core.service, settings(), tokens, clock=lambda: now)) as http:
        yield core, http
    core.close()
    core.ledger.close()


def test_a_token_bound_to_one_node_cannot_claim_another_nodes_gpu_or_seqs(
    rig: tuple[CollectorCore, httpx.Client],
) -> None:
    core, http = rig
    attacker, victim_gpu = TOKENS[ATTACKER], gpu_of(VICTIM)
    # attack 1: post as the victim node, with the victim's GPU, before the victim does
    takeover = post(http, attacker, batch(VICTIM, 1, victim_gpu, boot="boot-evil"))
    # attack 2: pre-claim the victim's next seqs under its own boot id
    preclaims = [post(http, attacker, batch(VICTIM, seq, victim_gpu)) for seq in (1, 2, 10)]
    for refused in (takeover, *preclaims):
        assert refused.status_code == 403
        assert refused.json() == {
            "error": f"token 'agent-a' may post batches for nodes {ATTACKER}, not for node "
            f"{VICTIM!r}; give this agent a token bound to its node",
            "field": "$.node",
            "reason": "node_not_allowed",
        }
        assert attacker not in refused.text
    # the attacker's own node is still its own to post
    assert post(http, attacker, batch(ATTACKER, 1, gpu_of(ATTACKER))).status_code == 200

    acks = [post(http, TOKENS[VICTIM], batch(VICTIM, seq, victim_gpu)) for seq in range(1, 11)]
    assert [a.status_code for a in acks] == [200] * BATCHES
    assert [a.json()["status"] for a in acks] == ["accepted"] * BATCHES
    assert sum(a.json()["samples_accepted"] for a in acks) == BATCHES * SAMPLES_PER_BATCH

    core.applier.tick(flush=True)
    reader = {"Authorization": f"Bearer {TOKENS['reader']}"}
    fleet = http.get("/v1/fleet", headers=reader).json()
    assert {(g["uuid"], g["node"]) for g in fleet["gpus"]} == {
        (victim_gpu.uuid, VICTIM),
        (gpu_of(ATTACKER).uuid, ATTACKER),
    }
    assert fleet["duplicate_gpus"] == []
    metrics = http.get("/metrics").text
    assert 'gpufleet_collector_rejected_batches_total{reason="node_not_allowed"} 4.0' in metrics
    assert 'gpufleet_collector_rejected_samples_total{reason="node_not_allowed"} 20.0' in metrics


def test_a_glob_binds_a_rack_and_a_bare_token_still_posts_as_any_node(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("tok-rack agent nodes=gpu-node-*\ntok-legacy\n")
    core = open_core(tmp_path / "ledger.db", T0 + 600)
    tokens = load_tokens(ServerSettings(tokens_file=path))
    try:
        with served(create_app(core.service, settings(), tokens, clock=lambda: T0 + 600)) as http:
            assert post(http, "tok-rack", batch("gpu-node-7", 1, gpu_of("n7"))).status_code == 200
            assert post(http, "tok-rack", batch("cpu-node-1", 1, gpu_of("c1"))).status_code == 403
            assert post(http, "tok-legacy", batch("cpu-node-1", 1, gpu_of("c1"))).status_code == 200
    finally:
        core.close()
        core.ledger.close()
