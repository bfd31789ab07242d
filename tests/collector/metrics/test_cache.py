"""/metrics from the cache, over the real core and a real SQLite ledger: a scrape between
two commits reads nothing from the ledger and serves the same cached bytes; a commit
changes them; gzip and OpenMetrics carry the same samples; promtool accepts the body."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

from collector.config import CollectorSettings
from collector.fleet.live import LiveFleet
from collector.http.app import create_app
from collector.metrics import catalogue as cat
from collector.metrics.cache import Exposition, Refresh
from collector.metrics.families import Family
from collector.service import CollectorCore
from gpufleet.cli.collector import build_collector
from tests.collector.http.test_app_fake import AsgiClient
from tests.collector.settings_file import load
from tests.collector.test_core import INFO, T0, WATTS, batch, energy, ingest, open_core

NOW = T0 + 200
OPENMETRICS = "application/openmetrics-text; version=1.0.0"
ENERGY = "gpufleet_workload_energy_joules_total"


@pytest.fixture
def core(tmp_path: Path) -> Iterator[CollectorCore]:
    core = open_core(tmp_path / "ledger.db", NOW)
    yield core
    core.close()
    core.ledger.close()


def wired(core: CollectorCore) -> tuple[Exposition, AsgiClient]:
    """The exposition attached to the core's observers, as gpufleet collector wires it."""
    exposition = Exposition(lambda: NOW, max_age_seconds=15.0)
    core.observers.attach(exposition)
    app = create_app(core.service, CollectorSettings(), ["t"], lambda: NOW, exposition=exposition)
    return exposition, AsgiClient(app)


def values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for metric in text_string_to_metric_families(text):
        for s in metric.samples:
            if s.name == name:
                found[tuple(sorted(s.labels.items()))] = s.value
    return found


def statements(conns: list[sqlite3.Connection]) -> list[str]:
    """Every SQL statement the connections run from now on."""
    seen: list[str] = []
    for conn in conns:
        conn.set_trace_callback(seen.append)
    return seen


def test_a_scrape_between_two_commits_serves_the_cached_part_without_the_ledger(
    core: CollectorCore,
) -> None:
    exposition, client = wired(core)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)  # applied and committed
    first = client.get("/metrics").text
    cached = exposition.cached_part()
    assert sum(values(first, ENERGY).values()) == WATTS * 50 == energy(core)
    ingest(core, batch(2, range(60, 120, 10)))  # stored, not applied: nothing committed
    ledger = core.ledger
    seen = statements([ledger.engine._reader, ledger.engine._writer])
    second = client.get("/metrics").text
    assert seen == []
    assert exposition.cached_part() is cached
    assert sum(values(second, ENERGY).values()) == WATTS * 50
    # the live part is not cached: the second batch is counted
    accepted = values(second, "gpufleet_collector_batches_total")[(("result", "accepted"),)]
    assert accepted == 2


def test_a_commit_changes_the_body_and_applying_the_fleet_part(core: CollectorCore) -> None:
    exposition, client = wired(core)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)
    cached = exposition.cached_part()
    ingest(core, batch(2, range(60, 120, 10)))
    core.applier.tick(flush=True)  # the commit tells the exposition
    after = client.get("/metrics").text
    assert exposition.cached_part() is not cached
    assert sum(values(after, ENERGY).values()) == WATTS * 110 == energy(core)
    applied = exposition.cached_part()
    exposition.changed(Refresh.APPLY)
    assert exposition.cached_part() is not applied
    assert exposition.cached_part() == applied  # the same data, collected again


def test_an_apply_refresh_keeps_the_workload_part_and_age_renews_the_fleet_part(
    core: CollectorCore,
) -> None:
    now = [NOW]
    exposition = Exposition(lambda: now[0], max_age_seconds=15.0)
    core.observers.attach(exposition)
    create_app(core.service, CollectorSettings(), ["t"], lambda: now[0], exposition=exposition)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)
    exposition.cached_part()
    seen = statements([core.ledger.engine._reader])
    exposition.changed(Refresh.APPLY)
    exposition.cached_part()
    reads = len(seen)
    assert reads > 0  # recommendations and the health ping read the ledger...
    assert not any("usage" in s.lower() for s in seen)  # ...the workload totals do not
    now[0] += 14.9
    exposition.cached_part()
    assert len(seen) == reads  # younger than the apply interval: cached
    now[0] += 0.1
    exposition.cached_part()
    assert len(seen) > reads


def test_gzip_and_openmetrics_carry_the_same_samples(core: CollectorCore) -> None:
    exposition, client = wired(core)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)
    plain = exposition.scrape("", "")
    zipped = exposition.scrape("", "br, gzip;q=0.8")
    assert (plain.encoding, zipped.encoding) == (None, "gzip")
    assert gzip.decompress(zipped.body) == plain.body
    assert exposition.scrape("", "gzip;q=0").encoding is None
    response = client.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == plain.body  # httpx decoded the one gzip stream
    om = exposition.scrape(OPENMETRICS, "gzip")
    text = gzip.decompress(om.body).decode()
    assert om.content_type.startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    om_samples = {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for metric in parse_om(text)
        for s in metric.samples
        if "ingest_seconds" not in s.name  # live: grows between the two scrapes
    }
    plain_samples = {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for metric in text_string_to_metric_families(plain.body.decode())
        for s in metric.samples
        if "ingest_seconds" not in s.name
    }
    assert om_samples == plain_samples


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus)")
def test_promtool_accepts_the_body(core: CollectorCore) -> None:
    exposition, _ = wired(core)
    ingest(core, batch(1, range(0, 60, 10)))
    core.applier.tick(flush=True)
    body = exposition.scrape("", "").body
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


class _Reader:
    """An APPLY collector reporting what a shared ``read(now)`` answered."""

    refresh = Refresh.APPLY

    def __init__(self, spec: object, read: object) -> None:
        self.spec, self.read = spec, read

    def describe(self) -> list[object]:
        return []

    def families(self) -> list[Family]:
        return [Family(self.spec, {(): self.read(NOW)})]  # type: ignore[arg-type,operator]


def test_collectors_refreshed_together_share_one_call() -> None:
    calls: list[float] = []

    def count(now: float) -> float:
        calls.append(now)
        return float(len(calls))

    exposition = Exposition(lambda: NOW, max_age_seconds=15.0)
    for spec in (cat.LAG, cat.PENDING_SAMPLES):
        exposition.register(_Reader(spec, exposition.once_per_render(count)))
    first = exposition.cached_part().decode()
    assert calls == [NOW]
    assert "gpufleet_collector_lag_seconds 1.0" in first
    assert "gpufleet_collector_pending_samples 1.0" in first  # the same answer
    exposition.changed(Refresh.APPLY)
    exposition.cached_part()
    assert len(calls) == 2  # once per render, not once ever
    assert exposition.once_per_render(count)(NOW) == 3.0  # outside a render: a plain call


def _calls_of(code: object, action: object) -> int:
    """How many times the function with ``code`` runs during ``action()``."""
    seen = [0]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is code:
            seen[0] += 1

    sys.setprofile(profile)
    try:
        action()  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    return seen[0]


def test_the_collector_reads_the_fleet_views_once_per_render(tmp_path: Path) -> None:
    collector = build_collector(load(tmp_path, ""), lambda: NOW, tokens=frozenset({"t"}))
    try:
        ingest(collector.core, batch(1, range(0, 60, 10)))
        collector.core.applier.tick(flush=True)
        exposition = collector.exposition
        assert exposition is not None
        body = exposition.scrape("", "").body.decode()
        assert f'uuid="{INFO.uuid}"' in body and "gpufleet_fleet_idle_cost_per_hour" in body
        exposition.changed(Refresh.APPLY)  # FleetExporter and the rates render again
        assert _calls_of(LiveFleet.views.__code__, lambda: exposition.scrape("", "")) == 1
    finally:
        collector.core.close()
        collector.ledger.close()
