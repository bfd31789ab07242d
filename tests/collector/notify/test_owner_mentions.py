"""Each service's release message carries the command for its workload, the console link
and the owner's mention in that service's syntax, from the directory; an owner the
directory does not know is mentioned nowhere; routes can pick the owner team's channel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collector.notify.settings import ContactSettings, RouteSettings
from tests.collector.notify.rig import (
    HandClock,
    channel,
    fake,
    index_for,
    notifier_for,
    release_rec,
)
from tests.collector.notify.test_services import KINDS, SECRETS

ALICE = ContactSettings(
    name="Alice Liu",
    slack="U0ALICE",
    teams="29:1alice-aad",
    feishu="ou_7d8a6e6df7621556ce0d21922b676706",
    dingtalk="alice-dt",
    wecom="alice.liu",
    discord="80351110224678912",
)
VISION = ContactSettings(
    name="Vision team", slack="S0VISION", feishu="ou_vision", dingtalk_mobile="13800000000"
)
COMMAND = "kubectl delete pod -n ml notebook-0"
CONSOLE = "http://collector.example:8080/ui/recommendations?id=release_idle%3Apod%3Aml%2Fnotebook-0"


def deliver_release(
    kind: str, tmp_path: Path, user: str = "alice", **settings: Any
) -> dict[str, Any]:
    clock = HandClock()
    rec = release_rec(0)
    with (
        fake(kind, clock, SECRETS.get(kind, "")) as service,
        notifier_for(
            tmp_path,
            [channel(service, digest_interval_seconds=0)],
            clock,
            users={"alice": ALICE},
            teams={"vision": VISION},
            **settings,
        ) as notifier,
    ):
        notifier.observe([rec], index_for(rec, user=user), clock.now)
        assert notifier.deliver() == 1
        assert [r.ok for r in service.received] == [True]  # the service took it
        body: dict[str, Any] = service.received[0].json
        return body


def mention_of(kind: str, body: dict[str, Any]) -> Any:
    """The mention, read where each service reads it."""
    if kind == "slack":
        contexts = [b for b in body["blocks"] if b["type"] == "context"]
        return contexts[0]["elements"][0]["text"], body["text"].split(" ")[0]
    if kind == "teams":
        card = body["attachments"][0]["content"]
        return card["msteams"]["entities"]
    if kind in ("feishu", "lark"):
        return body["card"]["body"]["elements"][0]["content"].rsplit("\n", 1)[-1]
    if kind == "dingtalk":
        return body["at"], body["markdown"]["text"].rsplit("\n\n", 1)[-1]
    if kind == "wecom":
        return body["markdown"]["content"].rsplit("\n", 1)[-1]
    if kind == "discord":
        return body["content"], body["allowed_mentions"]
    return body["data"]["mentions"]


EXPECTED = {
    "slack": ("<@U0ALICE>", "<@U0ALICE>"),
    "teams": [
        {
            "type": "mention",
            "text": "<at>Alice Liu</at>",
            "mentioned": {"id": "29:1alice-aad", "name": "Alice Liu"},
        }
    ],
    "feishu": "<at id=ou_7d8a6e6df7621556ce0d21922b676706></at>",
    "lark": "<at id=ou_7d8a6e6df7621556ce0d21922b676706></at>",
    "dingtalk": (
        {"atMobiles": [], "atUserIds": ["alice-dt"], "isAtAll": False},
        "@alice-dt",  # DingTalk notifies only those named with @ in the text as well
    ),
    "wecom": "<@alice.liu>",
    "discord": ("<@80351110224678912>", {"parse": [], "users": ["80351110224678912"]}),
    "webhook": [],  # the webhook has no mention syntax: the owner is in the item
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_release_message_has_the_command_the_console_link_and_the_owner(
    kind: str, tmp_path: Path
) -> None:
    body = deliver_release(kind, tmp_path)
    raw = json.dumps(body, ensure_ascii=False)
    assert COMMAND in raw
    assert CONSOLE in raw
    assert "GPU(s)" not in raw and "GPU-0-0" not in raw
    if kind == "webhook":
        (item,) = body["data"]["items"]
        assert item["command"] == COMMAND
        assert item["owner"] == {"user": "alice", "team": "vision"}
        assert CONSOLE in item["links"]
        assert item["gpus"] == ["gpu-node-00 #4", "gpu-node-00 #5"]
    assert mention_of(kind, body) == EXPECTED[kind]


TEAM_EXPECTED = {
    "slack": ("<!subteam^S0VISION>", "<!subteam^S0VISION>"),  # a user group
    "feishu": "<at id=ou_vision></at>",
    "dingtalk": ({"atMobiles": ["13800000000"], "atUserIds": [], "isAtAll": False}, "@13800000000"),
}


@pytest.mark.parametrize("kind", sorted(TEAM_EXPECTED))
def test_a_user_not_in_the_directory_gets_the_team_mentioned(kind: str, tmp_path: Path) -> None:
    body = deliver_release(kind, tmp_path, user="bob")
    assert mention_of(kind, body) == TEAM_EXPECTED[kind]


@pytest.mark.parametrize("kind", ["slack", "teams", "feishu", "dingtalk", "wecom", "discord"])
def test_an_owner_nobody_knows_is_mentioned_nowhere(kind: str, tmp_path: Path) -> None:
    clock = HandClock()
    rec = release_rec(0)
    with (
        fake(kind, clock, SECRETS.get(kind, "")) as service,
        notifier_for(
            tmp_path, [channel(service, digest_interval_seconds=0)], clock, users={"alice": ALICE}
        ) as notifier,
    ):
        notifier.observe([rec], index_for(rec, user="bob", team="search"), clock.now)
        assert notifier.deliver() == 1
        raw = service.received[0].body.decode()
    for alice_id in ("U0ALICE", "29:1alice-aad", "ou_7d8a", "alice-dt", "alice.liu", "8035111"):
        assert alice_id not in raw
    assert '"entities"' not in raw and "<@" not in raw and "<at" not in raw


def test_a_route_to_the_owner_team_sends_to_that_team_s_channel(tmp_path: Path) -> None:
    clock = HandClock()
    rec, other = release_rec(0), release_rec(1, namespace="search")
    with (
        fake("slack", clock) as ops,
        fake("feishu", clock, SECRETS["feishu"]) as vision_chat,
        notifier_for(
            tmp_path,
            [
                channel(ops, "ops", digest_interval_seconds=0),
                channel(vision_chat, "vision-chat", digest_interval_seconds=0),
            ],
            clock,
            teams={"vision": ContactSettings(channels=["vision-chat"])},
            routes=[RouteSettings(channels=["ops"], to_owner_team=True)],
        ) as notifier,
    ):
        index = index_for(rec, team="vision")
        search = index_for(other, team="search")
        notifier.observe([rec, other], type(index)(
            {**index.workloads, **search.workloads}, {**index.models, **search.models}
        ), clock.now)  # fmt: skip
        assert notifier.deliver() == 3
        assert len(ops.accepted) == 2  # both workloads reach ops
        (only,) = vision_chat.accepted  # only vision's own workload reaches vision's chat
        assert "ml/notebook-0" in only.json["card"]["header"]["title"]["content"]
