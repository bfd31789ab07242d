"""Buttons that answer back, end to end: a simulated fleet's release recommendations reach
Slack and Feishu with the command, the console link, the owner mention and the buttons;
"Keep for 4 h" pressed in Slack (signed as Slack signs) exempts the workload, the message
is updated in place, and auto-release leaves it alone for the 4 h while the other stuck
job is released on time; "Release now" from someone who may not is refused, saying why;
forged, replayed and unknown presses change nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from collector.actions.answer_log import AnswerLog
from collector.savings_report import savings_report
from tests.collector.answers.rig import HOUR, JOB, POD, answer_rig
from tests.collector.notify.fake_services import Received

pytestmark = pytest.mark.slow


def slack_messages_about(received: list[Received], words: str) -> list[dict[str, object]]:
    return [r.json for r in received if words in json.dumps(r.json)]


def answer_values(message: dict[str, object]) -> list[str]:
    blocks = message.get("blocks", [])
    assert isinstance(blocks, list)
    return [
        e["value"] for b in blocks if b.get("block_id") == "gpufleet_answers" for e in b["elements"]
    ]


def test_keep_from_slack_exempts_for_4_h_and_a_stranger_cannot_release(tmp_path: Path) -> None:
    with answer_rig(tmp_path) as rig:
        rig.run_until(rig.start + 40 * 60)  # the recommendations open after 30 idle minutes
        pod_rec, job_rec = f"release_idle:{POD}", f"release_idle:{JOB}"
        (opened,) = [
            m
            for m in slack_messages_about(rig.slack.accepted, "sweep-worker-3283c")
            if answer_values(m)
        ]
        body = json.dumps(opened)
        # the message says what to do, where to look and whom it concerns; the pod is its
        # Deployment's, so what frees the GPU is scaling that to zero (not deleting the pod)
        assert "kubectl scale deployment -n research sweep --replicas=0" in body
        assert "kubectl delete pod" not in body
        assert f"{rig.url}/ui/recommendations?id={quote(pod_rec, safe='')}" in body
        assert "<!subteam^S0SEARCH>" in body
        assert answer_values(opened) == [pod_rec] * 3
        feishu_cards = [
            r.json["card"] for r in rig.feishu.accepted if "Slurm job 842992" in json.dumps(r.json)
        ]
        assert any("<at id=ou_emeka></at>" in json.dumps(c) for c in feishu_cards)
        callbacks = [
            b["behaviors"][0]["value"]
            for c in feishu_cards
            for b in c["body"]["elements"]
            if b.get("tag") == "button" and b["behaviors"][0]["type"] == "callback"
        ]
        assert {"gpufleet": "release", "rec": job_rec} in callbacks

        # refused, and nothing recorded as done: forged, replayed (6 minutes old), unknown user
        assert rig.slack_press("U0PRIYA", "keep", pod_rec, secret="wrong").status_code == 401
        assert rig.slack_press("U0PRIYA", "keep", pod_rec, age=360).status_code == 401
        sent_before = len(rig.slack.received)
        assert rig.slack_press("U0NOBODY", "keep", pod_rec).status_code == 200
        (stranger,) = [r.json for r in rig.slack.received[sent_before:]]
        assert stranger["response_type"] == "ephemeral" and not stranger["replace_original"]
        assert "'U0NOBODY' is not in gpufleet's directory" in stranger["text"]

        # "Release now" on emeka's job from priya (another team) is refused, saying why
        answer = rig.feishu_press("ou_priya", "release", job_rec).json()
        assert answer["toast"]["type"] == "error" and "card" not in answer
        assert (
            "priya may not release Slurm job 842992: it belongs to user emeka"
            in (answer["toast"]["content"])
        )

        # priya (team search) keeps the pod: the message is replaced, without its buttons
        kept_at = rig.clock()
        sent_before = len(rig.slack.received)
        assert rig.slack_press("U0PRIYA", "keep", pod_rec).status_code == 200
        updates = [r.json for r in rig.slack.received[sent_before:]]
        (update,) = [u for u in updates if u.get("replace_original")]
        assert update["text"].startswith("Kept for 4 h by priya: no auto-release of pod ")
        assert answer_values(update) == []
        keeps = [a for a in AnswerLog(rig.collector.ledger).answers() if a.outcome == "kept"]
        assert [(a.who, a.service, a.workload_key) for a in keeps] == [("priya", "slack", POD)]
        assert keeps[0].kept_until == pytest.approx(kept_at + 4 * HOUR)

        rig.run_until(rig.start + 5 * HOUR)
        rig.collector.core.applier.tick(flush=True)
        saved = savings_report(rig.collector.ledger, rig.start, rig.clock(), "USD")
        entries = rig.collector.alerting.engine.log.entries()  # type: ignore[union-attr]
        answers = AnswerLog(rig.collector.ledger).answers()

    refused = [(a.who, a.action, a.outcome) for a in answers if a.outcome == "refused"]
    assert ("priya", "release", "refused") in refused and ("", "keep", "refused") in refused
    # the job nobody kept: released at its deadline (2 h idle), once
    job_steps = [(e.stage, e.decision, e.at - rig.start) for e in entries if e.workload_key == JOB]
    assert [(s, d) for s, d, _ in job_steps][-1] == ("act", "acted")
    assert 2 * HOUR <= job_steps[-1][2] < 2 * HOUR + 300
    assert len(rig.scancels()) == 1
    # the kept pod: no step at all during the 4 h (kept before its first warning); after
    # them the last warning, then the release the time that warning promises later (12 min)
    pod_steps = [(e.stage, e.decision, e.at) for e in entries if e.workload_key == POD]
    assert not [s for s in pod_steps if kept_at <= s[2] < kept_at + 4 * HOUR]
    (warn, warned_at), (act, acted_at) = [(s[:2], s[2]) for s in pod_steps]
    assert warn == ("warn:0.9", "warned") and act == ("act", "acted")
    assert kept_at + 4 * HOUR <= warned_at < kept_at + 4 * HOUR + 300
    assert warned_at + 0.1 * 2 * HOUR <= acted_at < warned_at + 0.1 * 2 * HOUR + 300
    # what the keep came to: the stuck pod's GPU stayed idle for all of its 4 hours
    (keep,) = saved.kept
    assert (keep.workload_key, keep.who, keep.gpus) == (POD, "priya", 1)
    assert keep.idle_gpu_hours_while_kept == pytest.approx(4.0, rel=0.01)
    # the channels heard the keep, once each
    kept_news = [r for r in rig.feishu.accepted if "Kept for 4 h by priya" in r.body.decode()]
    assert len(kept_news) == 1


def signed_links(received: list[Received], words: str) -> dict[str, str]:
    """Label -> URL of the confirm-page links in the WeCom messages about ``words``."""
    out = {}
    for r in received:
        content = r.json["markdown"]["content"]
        if words in content:
            out.update(re.findall(r"\[([^\]]+)\]\((http[^)]+/ui/answer\?t=[^)]+)\)", content))
    return out


def test_signed_links_confirm_on_get_act_on_post_once(tmp_path: Path) -> None:
    with answer_rig(tmp_path) as rig:
        rig.run_until(rig.start + 40 * 60)
        links = signed_links(rig.wecom.accepted, "Slurm job 842992")
        assert set(links) == {"Keep for 4 h", "Release now", "Dismiss"}
        log = AnswerLog(rig.collector.ledger)
        # GET shows what the link would do, and does nothing (a link preview only GETs)
        page = httpx.get(links["Release now"])
        assert page.status_code == 200 and 'method="post"' in page.text
        assert "emeka" in page.text and log.answers() == []
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["referrer-policy"] == "no-referrer"
        token = parse_qs(urlsplit(links["Release now"]).query)["t"][0]
        forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        assert httpx.post(f"{rig.url}/ui/answer", data={"t": forged}).status_code == 403
        # POST: emeka, the job's user, releases it now (policy enforce, not a dry run)
        done = httpx.post(f"{rig.url}/ui/answer", data={"t": token})
        assert done.status_code == 200 and "Released by emeka: scancel 842992" in done.text
        again = httpx.post(f"{rig.url}/ui/answer", data={"t": token})
        assert "already received" in again.text
        assert len(rig.scancels()) == 1
        assert [(a.service, a.who, a.action, a.outcome) for a in log.answers()] == [
            ("link", "emeka", "release", "released")
        ]
        # an operator's "Release now" on a notebook under a dry-run policy: what would be done
        notebook = next(
            v for m in rig.slack.accepted for v in answer_values(m.json) if "notebooks/" in v
        )
        sent_before = len(rig.slack.received)
        assert rig.slack_press("U0OPS", "release", notebook).status_code == 200
        (update,) = [r.json for r in rig.slack.received[sent_before:]]
        assert "Dry run (actions.policies.notebooks.dry_run): would " in update["text"]
        assert "nothing was released" in update["text"]
    assert [(c.method, c.path) for c in rig.cluster.mutations()] == []
