"""A channel configured in a settings file gets real HTTP: a simulated stuck job's release
recommendation arrives at a Feishu-protocol server, correctly signed.

The first test runs the collector the way ``gpufleet demo`` does (simulated agents over
real HTTP, SimClock) from a YAML file read by the real settings loader. The second runs
``gpufleet demo --config FILE`` itself.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from agent.sources.simulated.source import ActivityKind, build_fleet
from collector.config import CollectorSettings, LedgerSettings, ServerSettings
from gpufleet.cli.collector import build_collector, serve
from gpufleet.cli.demo_fleet import SimClock
from gpufleet.settings import load_settings
from tests.collector.notify.fake_services import FakeService
from tests.e2e.collector_process import ROOT
from tests.e2e.fleet_rig import TOKEN, build_agent, free_port
from tests.ports import free_port_block

pytestmark = pytest.mark.slow
SECRET = "demo-feishu-signing-secret"


def write_config(tmp_path: Path, chat: FakeService) -> Path:
    (tmp_path / "feishu-url").write_text(chat.url + "\n")
    (tmp_path / "feishu-secret").write_text(SECRET + "\n")
    config = tmp_path / "gpufleet.yaml"
    config.write_text(f"""
notifications:
  channels:
    - name: ml-team
      kind: feishu
      url_file: {tmp_path / "feishu-url"}
      secret_file: {tmp_path / "feishu-secret"}
      language: en
  kinds: [release_idle]
""")
    return config


def release_titles(chat: FakeService) -> list[str]:
    titles = [r.json["card"]["header"]["title"]["content"] for r in chat.accepted]
    return sorted(t for t in titles if t.startswith("Release 1 idle "))


def in_words(key: str) -> str:
    """How a message names a workload (by hand: pod:NS/NAME, slurm:ID)."""
    kind, _, rest = key.partition(":")
    return f"pod {rest}" if kind == "pod" else f"Slurm job {rest}"


def command_for(key: str) -> str:
    kind, _, rest = key.partition(":")
    namespace, _, name = rest.partition("/")
    return f"kubectl delete pod -n {namespace} {name}" if kind == "pod" else f"scancel {rest}"


def test_a_configured_channel_gets_the_stuck_jobs_release_signed(tmp_path: Path) -> None:
    fleet = build_fleet()
    start = fleet.nodes[0].epoch
    clock = SimClock(start)
    chat = FakeService("feishu", secret=SECRET, now=clock)
    loaded = load_settings(CollectorSettings, write_config(tmp_path, chat), environ={})
    port = free_port()
    settings = dataclasses.replace(
        loaded,
        server=ServerSettings(port=port, tokens=[TOKEN], public_url=f"http://127.0.0.1:{port}"),
        ledger=LedgerSettings(url=str(tmp_path / "demo.db")),
    )
    collector = build_collector(settings, clock, tokens=frozenset([TOKEN]))
    server = serve(collector)
    agents = [
        build_agent(n, f"http://127.0.0.1:{port}", clock, 60.0, tmp_path / n.name)
        for n in fleet.nodes
    ]
    try:
        for tick in range(1, 61):  # one simulated hour, a batch every 5 minutes
            clock.set(start + tick * 60.0)
            for agent in agents:
                agent.sampler.tick()
            if tick % 5 == 0:
                for agent in agents:
                    agent.shipper.flush()
                collector.core.applier.tick()
                collector.core.recommender.evaluate_if_due()
                collector.alert()
    finally:
        for agent in agents:
            agent.shipper.close()
        server.should_exit = True
        collector.stop()
        chat.close()
    stuck = sorted(j.workload.key for j in fleet.jobs_of_kind(ActivityKind.STUCK))
    # every stuck job (idle notebooks get theirs too), each once
    titles = release_titles(chat)
    for key in stuck:  # "Release 1 idle A100 held by pod research/sweep-worker-3283c"
        assert any(t.endswith(f" held by {in_words(key)}") for t in titles), (key, titles)
    assert len(titles) == len(set(titles))
    for key in stuck:  # each stuck job's message: its command and its console link
        (card,) = [
            r.json["card"]
            for r in chat.accepted
            if r.json["card"]["header"]["title"]["content"].endswith(in_words(key))
        ]
        content = card["body"]["elements"][0]["content"]
        assert f"`{command_for(key)}`" in content
        rec_id = quote(f"release_idle:{key}", safe="")
        assert f"http://127.0.0.1:{port}/ui/recommendations?id={rec_id}" in json.dumps(card)
    assert all(r.ok for r in chat.received)  # the fake refuses a wrong signature (19021)
    first = chat.accepted[0].json
    assert {"timestamp", "sign", "msg_type", "card"} <= set(first)
    assert "USD/h" in first["card"]["body"]["elements"][0]["content"]


#: the demo's default fleet
DEMO_NODES = 4


def test_gpufleet_demo_with_a_config_file_sends_to_the_channel(tmp_path: Path) -> None:
    chat = FakeService("feishu", secret=SECRET)
    config = write_config(tmp_path, chat)
    port = free_port_block(1 + DEMO_NODES)  # the collector on P, its agents on P+1..
    command = [
        sys.executable,
        "-m",
        "gpufleet",
        "--log-level",
        "WARNING",
        "demo",
        "--config",
        str(config),
        "--duration",
        "6",
        "--plain",
        "--port",
        str(port),
    ]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
        deadline = time.monotonic() + 5
        while len(release_titles(chat)) < 3 and time.monotonic() < deadline:  # 3 stuck jobs
            time.sleep(0.1)
    finally:
        chat.close()
    assert done.returncode == 0, done.stderr
    titles = release_titles(chat)
    assert sum("sweep-worker" in t or "Slurm job" in t for t in titles) == 3, (titles, done.stderr)
    assert all(r.ok for r in chat.received)
    # the demo sets server.public_url to its own URL: the messages link its console
    assert all(f"http://127.0.0.1:{port}/ui/" in r.body.decode() for r in chat.accepted)
