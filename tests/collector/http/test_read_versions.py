"""The real core's ReadVersion: what moves it (a batch buffered, samples applied, a
commit, a dismissal) and what does not (a read); the read views follow it over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from collector.config import CollectorSettings
from collector.http.app import create_app
from collector.ledger.store import Ledger
from collector.service import CollectorCore
from tests.collector.http.test_app_fake import AsgiClient
from tests.collector.test_core import T0, batch, example_rates

TOKEN = "t0ken-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}


@pytest.fixture
def core(tmp_path: Path) -> Iterator[CollectorCore]:
    built = CollectorCore.build(
        CollectorSettings(), Ledger.open(str(tmp_path / "ledger.db")), example_rates(),
        lambda: T0 + 100,
    )  # fmt: skip
    yield built
    built.close()
    built.ledger.close()


def test_batches_and_commits_move_the_version_and_reads_do_not(core: CollectorCore) -> None:
    client = AsgiClient(create_app(core.service, CollectorSettings(), [TOKEN], lambda: T0 + 100))
    service = core.service
    empty = client.get("/v1/fleet", headers=AUTH)
    assert empty.json()["gpus"] == []
    before = service.read_version()
    body = msgspec.json.encode(batch(1, range(0, 60, 10), sm=0.0))
    assert client.post("/v1/batches", content=body, headers=JSON).is_success
    after_batch = service.read_version()
    assert after_batch.fleet > before.fleet
    seen = client.get("/v1/fleet", headers={**AUTH, "If-None-Match": empty.headers["etag"]})
    assert seen.status_code == 200 and [g["uuid"] for g in seen.json()["gpus"]] == ["GPU-p"]
    client.get("/v1/recommendations", headers=AUTH)
    assert service.read_version() == after_batch  # reading changes nothing
    core.applier.tick(flush=True)  # applies and commits
    committed = service.read_version()
    assert committed.fleet > after_batch.fleet and committed.ledger > after_batch.ledger
    again = client.get("/v1/fleet", headers={**AUTH, "If-None-Match": seen.headers["etag"]})
    assert again.status_code == 200
    assert client.get("/v1/fleet", headers={**AUTH, "If-None-Match": again.headers["etag"]}
                      ).status_code == 304  # fmt: skip
