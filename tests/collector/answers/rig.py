"""A collector over a simulated fleet with Slack and Feishu channels whose buttons answer
back, an enforcing auto-release policy against a local Kubernetes API server and a
``scancel`` stand-in, and the presses the services would post, signed the way they sign."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.source import ActivityKind, SimulatedFleet, build_fleet
from collector.config import CollectorSettings
from collector.notify.callbacks import lark_encrypt, lark_signature, slack_signature
from gpufleet.cli.collector import Collector, build_collector, serve
from gpufleet.cli.demo_fleet import SimClock
from gpufleet.settings import load_settings
from tests.collector.actions import fake_scancel
from tests.collector.actions.fake_kubernetes import TOKEN as K8S_TOKEN
from tests.collector.actions.fake_kubernetes import FakeKubernetes, FakePod
from tests.collector.notify.fake_services import FakeService
from tests.e2e.fleet_rig import TOKEN, build_agent, free_port

STEP = 60.0
HOUR = 3600.0
SLACK_SECRET = "slack-signing-secret-for-tests"
FEISHU_TOKEN = "feishu-verification-token"
FEISHU_KEY = "feishu-encrypt-key"
LINK_SECRET = "link-secret-for-tests"
POD = "pod:research/sweep-worker-3283c"  # team search, no user
JOB = "slurm:842992"  # user emeka, team vision


def write_config(tmp: Path, chats: dict[str, FakeService], k8s_host: str) -> Path:
    slack, feishu = chats["slack"], chats["feishu"]
    secrets = {
        "slack-url": slack.url,
        "wecom-url": chats["wecom"].url,
        "feishu-url": feishu.url,
        "feishu-secret": "fs-sign",
        "slack-signing": SLACK_SECRET,
        "feishu-token": FEISHU_TOKEN,
        "feishu-key": FEISHU_KEY,
        "link-secret": LINK_SECRET,
        "k8s-token": K8S_TOKEN,
    }
    for name, value in secrets.items():
        (tmp / name).write_text(value + "\n")
    config = tmp / "gpufleet.yaml"
    config.write_text(f"""
notifications:
  channels:
    - {{name: slack-ml, kind: slack, url_file: {tmp / "slack-url"}}}
    - {{name: feishu-ml, kind: feishu, url_file: {tmp / "feishu-url"},
        secret_file: {tmp / "feishu-secret"}}}
    - {{name: wecom-ml, kind: wecom, url_file: {tmp / "wecom-url"}, digest_interval_seconds: 0}}
  kinds: [release_idle]
  users:
    priya: {{slack: U0PRIYA, feishu: ou_priya, team: search}}
    emeka: {{slack: U0EMEKA, feishu: ou_emeka, team: vision}}
    ops: {{slack: U0OPS, feishu: ou_ops}}
  teams:
    search: {{slack: S0SEARCH, feishu: ou_search}}
answers:
  operators: [ops]
  slack_signing_secret_file: {tmp / "slack-signing"}
  feishu_verification_token_file: {tmp / "feishu-token"}
  feishu_encrypt_key_file: {tmp / "feishu-key"}
  link_secret_file: {tmp / "link-secret"}
actions:
  default: {{mode: enforce, dry_run: false, release_after_seconds: 7200,
             warn_at: [0.5, 0.9], min_runtime_seconds: 3600}}
  policies:
    notebooks: {{mode: notify, release_after_seconds: 7200}}
  max_data_age_seconds: 180
  kubernetes: {{enabled: true, host: "{k8s_host}", token_file: {tmp / "k8s-token"}}}
  slurm:
    enabled: true
    scancel_path: {tmp / "bin" / "scancel"}
    scontrol_path: {tmp / "bin" / "scontrol"}
    reason_option: --reason
""")
    return config


@dataclass
class AnswerRig:
    collector: Collector
    clock: SimClock
    slack: FakeService
    feishu: FakeService
    wecom: FakeService
    cluster: FakeKubernetes
    url: str
    start: float
    agents: list[Any]
    scancel_log: Path
    fleet: SimulatedFleet
    ticks: int = 0

    def fleet_gpus(self) -> list[SimulatedGpu]:
        return [gpu for node in self.fleet.nodes for gpu in node.gpus]

    def run_until(
        self, t: float, ship_every: int = 5, after_pass: Callable[[], None] | None = None
    ) -> None:
        """Simulated time to ``t``: sample every minute, ship, apply, evaluate and alert
        every ``ship_every`` minutes (then ``after_pass``: the world's answer to it)."""
        while self.start + self.ticks * STEP <= t:
            self.clock.set(self.start + self.ticks * STEP)
            for agent in self.agents:
                agent.sampler.tick()
            self.ticks += 1
            if self.ticks % ship_every == 0:
                for agent in self.agents:
                    agent.shipper.flush()
                self.collector.core.applier.tick()
                self.collector.core.recommender.evaluate_if_due()
                self.collector.alert()
                if after_pass is not None:
                    after_pass()

    def slack_press(
        self, user: str, action: str, rec_id: str, secret: str = SLACK_SECRET, age: float = 0
    ) -> httpx.Response:
        payload = {
            "type": "block_actions",
            "user": {"id": user},
            "trigger_id": f"t-{time.time()}",
            "actions": [
                {"action_id": f"gpufleet_{action}", "value": rec_id, "action_ts": str(self.clock())}
            ],
            "response_url": self.slack.url,
            "message": {
                "blocks": [
                    {"type": "header", "text": {"type": "plain_text", "text": "x"}},
                    {"type": "actions", "block_id": "gpufleet_answers", "elements": []},
                ]
            },
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return self.post_slack(body, int(time.time() - age), secret)

    def post_slack(self, body: bytes, ts: int, secret: str = SLACK_SECRET) -> httpx.Response:
        headers = {
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": slack_signature(secret, str(ts), body),
            "Content-Type": "application/x-www-form-urlencoded",
        }
        return httpx.post(f"{self.url}/v1/answers/slack", content=body, headers=headers)

    def feishu_press(self, open_id: str, action: str, rec_id: str) -> httpx.Response:
        event = {
            "schema": "2.0",
            "header": {
                "event_id": f"ev-{time.time()}",
                "token": FEISHU_TOKEN,
                "event_type": "card.action.trigger",
            },
            "event": {
                "operator": {"open_id": open_id},
                "action": {"tag": "button", "value": {"gpufleet": action, "rec": rec_id}},
            },
        }
        plain = json.dumps(event).encode()
        body = json.dumps({"encrypt": lark_encrypt(FEISHU_KEY, plain, b"0123456789abcdef")})
        ts = str(int(time.time()))
        headers = {
            "X-Lark-Request-Timestamp": ts,
            "X-Lark-Request-Nonce": "n1",
            "X-Lark-Signature": lark_signature(ts, "n1", FEISHU_KEY, body.encode()),
            "Content-Type": "application/json",
        }
        return httpx.post(f"{self.url}/v1/answers/feishu", content=body, headers=headers)

    def scancels(self) -> list[list[str]]:
        return fake_scancel.calls(self.scancel_log)


@contextmanager
def answer_rig(tmp_path: Path) -> Iterator[AnswerRig]:
    fleet = build_fleet()
    start = fleet.nodes[0].epoch
    clock = SimClock(start)
    cluster = FakeKubernetes(
        [
            FakePod("research", "sweep-worker-3283c", owner=("Deployment", "sweep")),
            FakePod("research", "sweep-worker-a7271", labels={"gpufleet.io/exempt": "true"}),
            *[
                FakePod(j.workload.namespace or "", j.workload.name or "")
                for k in ActivityKind
                if k is not ActivityKind.STUCK
                for j in fleet.jobs_of_kind(k)
                if j.workload.key.startswith("pod:")
            ],
        ]
    )
    scancel_log = fake_scancel.install(tmp_path / "bin")
    slack = FakeService("slack", now=clock)
    feishu = FakeService("feishu", secret="fs-sign", now=clock)
    wecom = FakeService("wecom", now=clock)
    chats = {"slack": slack, "feishu": feishu, "wecom": wecom}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    loaded = load_settings(
        CollectorSettings,
        write_config(tmp_path, chats, cluster.host),
        environ={},
        overrides={
            "server.port": port,
            "server.tokens": [TOKEN],
            "server.public_url": url,
            "ledger.url": str(tmp_path / "ledger.db"),
            "analysis.stale_after_seconds": 3 * STEP,
        },
    )
    collector = build_collector(loaded, clock, tokens=frozenset([TOKEN]))
    server = serve(collector)
    agents = [
        build_agent(node, url, clock, STEP, tmp_path / "spool" / node.name) for node in fleet.nodes
    ]
    rig = AnswerRig(
        collector, clock, slack, feishu, wecom, cluster, url, start, agents, scancel_log, fleet
    )
    try:
        yield rig
    finally:
        for agent in agents:
            agent.shipper.close()
        server.should_exit = True
        collector.stop()
        cluster.close()
        for chat in chats.values():
            chat.close()
