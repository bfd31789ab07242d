"""``gpufleet demo --config FILE`` with a Slack and a Feishu channel whose buttons answer
back: each release recommendation's message has the command, the console link and the
owner mention; "Keep for 4 h" pressed in Slack (signed as Slack signs) exempts the stuck
job, the message is updated, and the demo's auto-release (a dry-run enforce policy: the
demo has no cluster to act on) leaves it alone for the 4 h while the other stuck jobs
reach their deadline; "Release now" by someone else is refused, saying why."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import pytest

from collector.notify.callbacks import lark_encrypt, lark_signature, slack_signature
from tests.collector.answers.rig import FEISHU_KEY, FEISHU_TOKEN, HOUR, SLACK_SECRET
from tests.collector.notify.fake_services import FakeService
from tests.e2e.collector_process import ROOT
from tests.ports import free_port_block

pytestmark = pytest.mark.slow
JOB, POD = "slurm:842992", "pod:research/sweep-worker-3283c"


def write_config(tmp: Path, slack: FakeService, feishu: FakeService) -> Path:
    files = {
        "slack-url": slack.url,
        "feishu-url": feishu.url,
        "slack-signing": SLACK_SECRET,
        "feishu-token": FEISHU_TOKEN,
        "feishu-key": FEISHU_KEY,
    }
    for name, value in files.items():
        (tmp / name).write_text(value + "\n")
    config = tmp / "demo.yaml"
    config.write_text(f"""
notifications:
  channels:
    - {{name: slack-ml, kind: slack, url_file: {tmp / "slack-url"}}}
    - {{name: feishu-ml, kind: feishu, url_file: {tmp / "feishu-url"}}}
  kinds: [release_idle]
  users:
    emeka: {{slack: U0EMEKA, feishu: ou_emeka, team: vision}}
    priya: {{slack: U0PRIYA, feishu: ou_priya, team: search}}
  teams:
    search: {{slack: S0SEARCH, feishu: ou_search}}
answers:
  slack_signing_secret_file: {tmp / "slack-signing"}
  feishu_verification_token_file: {tmp / "feishu-token"}
  feishu_encrypt_key_file: {tmp / "feishu-key"}
actions:
  default: {{mode: enforce, dry_run: true, release_after_seconds: 14400, warn_at: [0.5, 0.9],
             min_runtime_seconds: 600}}
  max_data_age_seconds: 900
""")
    return config


def buttons(message: dict[str, object]) -> list[str]:
    blocks = message.get("blocks", [])
    assert isinstance(blocks, list)
    return [
        e["value"] for b in blocks if b.get("block_id") == "gpufleet_answers" for e in b["elements"]
    ]


def press_slack(url: str, user: str, action: str, rec_id: str, response_url: str) -> int:
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "trigger_id": "tr-1",
        "actions": [
            {"action_id": f"gpufleet_{action}", "value": rec_id, "action_ts": str(time.time())}
        ],
        "response_url": response_url,
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    ts = str(int(time.time()))
    headers = {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": slack_signature(SLACK_SECRET, ts, body),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return httpx.post(f"{url}/v1/answers/slack", content=body, headers=headers).status_code


def press_feishu(url: str, open_id: str, action: str, rec_id: str) -> dict[str, object]:
    event = {
        "schema": "2.0",
        "header": {"event_id": "ev-1", "token": FEISHU_TOKEN},
        "event": {
            "operator": {"open_id": open_id},
            "action": {"value": {"gpufleet": action, "rec": rec_id}},
        },
    }
    body = json.dumps({"encrypt": lark_encrypt(FEISHU_KEY, json.dumps(event).encode(), bytes(16))})
    ts = str(int(time.time()))
    headers = {
        "X-Lark-Request-Timestamp": ts,
        "X-Lark-Request-Nonce": "n",
        "X-Lark-Signature": lark_signature(ts, "n", FEISHU_KEY, body.encode()),
    }
    answer: dict[str, object] = httpx.post(
        f"{url}/v1/answers/feishu", content=body, headers=headers
    ).json()
    return answer


def wait_for(check: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not check():  # type: ignore[operator]
        time.sleep(0.1)


def test_demo_buttons_keep_exempts_and_a_stranger_cannot_release(tmp_path: Path) -> None:
    slack, feishu = FakeService("slack"), FakeService("feishu")
    port = free_port_block(5)
    url = f"http://127.0.0.1:{port}"
    db = tmp_path / "demo.db"
    command = [
        sys.executable,
        "-m",
        "gpufleet",
        "--log-level",
        "WARNING",
        "demo",
        "--config",
        str(write_config(tmp_path, slack, feishu)),
        "--duration",
        "45",
        "--plain",
        "--port",
        str(port),
        "--speed",
        "600",
        "--step",
        "60",
        "--history",
        "0.6",
        "--db",
        str(db),
    ]
    demo = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    job_rec = f"release_idle:{JOB}"

    def opened() -> list[dict[str, object]]:
        return [r.json for r in slack.accepted if job_rec in buttons(r.json)]

    try:
        wait_for(lambda: opened() and demo.poll() is None, 60)
        (message,) = opened()[:1]
        text = json.dumps(message)
        assert "scancel 842992" in text and "<@U0EMEKA>" in text
        assert f"{url}/ui/recommendations?id={quote(job_rec, safe='')}" in text
        refused = press_feishu(url, "ou_priya", "release", job_rec)
        assert "priya may not release Slurm job 842992: it belongs to user emeka" in str(refused)
        before = len(slack.received)
        assert press_slack(url, "U0EMEKA", "keep", job_rec, slack.url) == 200
        wait_for(
            lambda: any(
                "Kept for 4 h by emeka" in r.body.decode() for r in slack.received[before:]
            ),
            10,
        )
        out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
        slack.close()
        feishu.close()
    assert demo.returncode == 0, err.decode()[-2000:]
    updated = [r.json for r in slack.received if r.json.get("replace_original")]
    assert updated and updated[0]["text"].startswith("Kept for 4 h by emeka")
    with sqlite3.connect(db) as conn:
        ((kept_at, until),) = conn.execute(
            "SELECT answered_at, kept_until FROM answers WHERE outcome = 'kept'"
        ).fetchall()
        steps = conn.execute("SELECT workload_key, stage, at FROM action_log").fetchall()
    assert until == pytest.approx(kept_at + 4 * HOUR)
    assert not [s for s in steps if s[0] == JOB and kept_at <= s[2] < until], steps
    # the demo's auto-release ran meanwhile: the stuck pod nobody kept reached its deadline
    assert (POD, "act") in {(k, stage) for k, stage, _ in steps}, (steps, out.decode()[-500:])
