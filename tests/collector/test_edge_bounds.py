"""Input the ledger cannot hold, or the decoder cannot follow, through the real HTTP app over
the real core (issue 17, defects 1 and 6): each is a 4xx naming the field and the limit,
decided before the group commit; the ledger keeps committing; and one batch never fails
another that shares its group commit.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from agent.model import GpuInfo
from collector.ingest.rules import INT64_MAX
from tests.collector.edge_rig import (
    AUTH,
    H100,
    WATTS,
    Clock,
    batch,
    edge_rig,
    ledger_energy,
    post,
    raw,
)
from tests.collector.test_core import T0

BIG = 2**63  # one past what SQLite's INTEGER holds

Mutation = Callable[[dict[str, Any]], None]
POISON: dict[str, tuple[Mutation, str]] = {
    "$.samples[0].memory_used_bytes": (
        lambda b: b["samples"][0].update(memory_used_bytes=BIG),
        str(INT64_MAX),
    ),
    "$.gpus[0].index": (lambda b: b["gpus"][0].update(index=BIG), str(INT64_MAX)),
    "$.seq": (lambda b: b.update(seq=BIG), str(INT64_MAX)),
    "$.samples[0].xid_errors": (lambda b: b["samples"][0].update(xid_errors=[BIG]), "INT64"),
    "$.node": (lambda b: b.update(node="n" * 70_000), "253 characters"),
    "$.node_labels": (lambda b: b.update(node_labels={"region": "r" * 5000}), "1024 characters"),
}


def poisoned(field: str, seq: int = 1, node: str = "node-a") -> dict[str, Any]:
    body = raw(batch(seq, range(0, 60, 10), node=node, gpu=gpu_of(node)))
    POISON[field][0](body)
    return body


def gpu_of(node: str) -> GpuInfo:
    return msgspec.structs.replace(H100, uuid=f"GPU-{node}")


@pytest.mark.parametrize("field", POISON)
def test_a_value_the_ledger_cannot_hold_is_422_naming_it_and_the_ledger_keeps_committing(
    tmp_path: Path, field: str
) -> None:
    clock = Clock(T0 + 60)
    with edge_rig(tmp_path / "ledger.db", clock) as (core, http):
        refused = post(http, poisoned(field))
        assert refused.status_code == 422, refused.text
        error = refused.json()
        assert error["field"] == field and error["reason"] == "invalid_value"
        limit = POISON[field][1].replace("INT64", str(INT64_MAX))
        assert error["error"].startswith(field) and limit in error["error"]
        assert len(error["error"]) < 400  # the value is named, not echoed whole

        good = post(http, batch(1, range(0, 60, 10), gpu=gpu_of("node-a")))
        assert good.status_code == 200 and good.json()["samples_accepted"] == 6
        core.applier.tick(flush=True)
        assert ledger_energy(core) == WATTS * 50
        assert core.service.health().ledger_ok


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_json_nested_10000_deep_is_a_422_naming_the_depth_wherever_it_nests(
    tmp_path: Path,
) -> None:
    good = msgspec.json.encode(batch(1, range(0, 60, 10)))
    assert good.endswith(b"}")
    bodies = {
        "a typed field": good.replace(b'"node_labels":{}', b'"node_labels":' + nested(10_000)),
        "an unknown field": good[:-1] + b',"extra":' + nested(10_000) + b"}",
        "an unknown field in a sample": good.replace(
            b'"gpu_uuid":', b'"extra":' + nested(10_000) + b',"gpu_uuid":', 1
        ),
    }
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (_, http):
        for where, body in bodies.items():
            assert body != good, where
            refused = post(http, body)
            assert refused.status_code == 422, (where, refused.text)
            assert "nests JSON arrays or objects deeper than" in refused.json()["error"], where
        top = post(http, nested(10_000))
        assert top.status_code == 422, top.text
        assert post(http, good).status_code == 200


POISON_BODIES: list[bytes] = [
    msgspec.json.encode(poisoned("$.seq", node="poison-seq")),
    msgspec.json.encode(poisoned("$.node", node="poison-node")),
    msgspec.json.encode(poisoned("$.samples[0].memory_used_bytes", node="poison-memory")),
    msgspec.json.encode(batch(1, range(0, 60, 10), node="poison-deep"))[:-1]
    + b',"extra":'
    + nested(10_000)
    + b"}",
    b'{"schema_version": 1, "node": "poison-json", ',
]
GOOD_NODES = 100


async def post_all(url: str, bodies: list[bytes]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        return await asyncio.gather(
            *(client.post("/v1/batches", content=b, headers=AUTH) for b in bodies)
        )


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"waited 30 s for {what}"
        time.sleep(0.005)


def test_poison_batches_sharing_a_group_commit_with_good_ones_fail_alone(
    tmp_path: Path,
) -> None:
    """The ingest thread is held (inside the first group, on the fleet's lock) while every
    request queues, so the next group holds them all: 100 good batches of 100 nodes and
    the poison ones, interleaved."""
    good = [
        msgspec.json.encode(batch(1, range(0, 60, 10), node=f"node-{i}", gpu=gpu_of(f"node-{i}")))
        for i in range(GOOD_NODES)
    ]
    bodies = [*good[:50], *POISON_BODIES, *good[50:]]
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (core, http):
        recorder = core.queue.recorder
        url = str(http.base_url)
        responses: list[httpx.Response] = []
        with core.fleet.lock:
            first = core.service.submit(
                msgspec.json.encode(batch(1, range(0, 60, 10))), None, T0 + 60
            )
            wait_until(lambda: recorder.queued() == 0, "the first group to be taken")
            groups, items = recorder.groups, recorder.items
            poster = threading.Thread(
                target=lambda: responses.extend(asyncio.run(post_all(url, bodies)))
            )
            poster.start()
            wait_until(lambda: recorder.queued() == len(bodies), "every request to queue")
        poster.join(timeout=60)
        assert first.result(timeout=30).status == "accepted"
        assert (recorder.groups - groups, recorder.items - items) == (2, 1 + len(bodies))

        statuses = [r.status_code for r in responses]
        assert statuses == [200] * 50 + [422] * len(POISON_BODIES) + [200] * 50, statuses
        assert all(r.json()["samples_accepted"] == 6 for r in responses if r.status_code == 200)
        core.applier.tick(flush=True)
        assert ledger_energy(core) == WATTS * 50 * (GOOD_NODES + 1)
