"""The pure parts of answering: who may do what, which messages get which buttons, and when
a report period ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from collector.actions.answers import Answer, AnswerDesk, Desk, refusal
from collector.actions.engine import Executors
from collector.actions.settings import ActionSettings
from collector.ledger.store import Ledger
from collector.notify.answer_phrases import reply_languages
from collector.notify.answer_settings import AnswerSecrets, AnswerSettings
from collector.notify.buttons import Buttons
from collector.notify.callbacks import read_link
from collector.notify.directory import Directory
from collector.notify.links import Links
from collector.notify.messages import Event, Facts, render
from collector.notify.settings import Channel, ContactSettings
from collector.records import (
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)
from gpufleet.cli.report_mail import period_end

POD = WorkloadRef("pod:ml/nb", "kubernetes_pod", "nb", "ml", "vision", "alice")
TEAM_POD = WorkloadRef("pod:ml/sweep", "kubernetes_pod", "sweep", "ml", "vision", "")
USERS = {
    "alice": ContactSettings(team="vision"),
    "bob": ContactSettings(team="vision"),
    "carol": ContactSettings(team="speech"),
    "ops": ContactSettings(),
}


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    with Ledger.open(str(tmp_path / "l.db")) as ledger:
        yield Desk(
            AnswerSettings(operators=["ops"]),
            ActionSettings(),
            ledger,
            Directory(USERS),
            Executors(),
            lambda now: [],
        )


@pytest.mark.parametrize(
    ("who", "ref", "allowed"),
    [
        ("alice", POD, {"keep", "release", "dismiss"}),  # the workload's user
        ("bob", POD, {"keep", "dismiss"}),  # its team: not release
        ("carol", POD, set()),  # another team
        ("ops", POD, {"keep", "release", "dismiss"}),  # an operator
        ("bob", TEAM_POD, {"keep", "dismiss"}),  # a team's workload without a user
        ("alice", TEAM_POD, {"keep", "dismiss"}),
    ],
)
def test_who_may_answer_what(desk: Desk, who: str, ref: WorkloadRef, allowed: set[str]) -> None:
    for action in ("keep", "release", "dismiss"):
        reason = refusal(action, who, ref, desk)
        assert (reason == "") == (action in allowed), (who, action, reason)
        if reason:
            assert reason.startswith(f"{who} may not {action} pod ml/") and "belongs to" in reason


def event(kind: str = "opened", rec_kind: str = "release_idle") -> Event:
    facts = Facts(
        rec_kind=rec_kind,
        rec_id=f"{rec_kind}:{POD.key}",
        workload=POD.key,
        user="alice",
        team="vision",
    )
    return Event(key=f"k-{kind}", source="recommendations", kind=kind, facts=facts)


def channel(kind: str, language: str = "en") -> Channel:
    return Channel(name=kind, kind=kind, url="http://127.0.0.1/x", language=language)  # type: ignore[arg-type]


def test_buttons_for_callbacks_links_for_the_rest_and_none_when_not_asked() -> None:
    secrets = AnswerSecrets(slack_signing_secret="s", link_secret="l")
    buttons = Buttons(AnswerSettings(), secrets, Links("http://gpufleet.example"), lambda: 1e9)
    one = [event()]
    slack = buttons(render(one, "en", Links()), one, channel("slack"))
    assert [(b.action, b.label) for b in slack.answers] == [
        ("keep", "Keep for 4 h"),
        ("release", "Release now"),
        ("dismiss", "Dismiss"),
    ]
    assert buttons(render(one, "zh", Links()), one, channel("feishu")).answers == ()  # no token
    ding = buttons(render(one, "zh", Links()), one, channel("dingtalk", "zh"))
    labels = dict(ding.links)
    assert set(labels) == {"保留 4 小时", "立即释放", "忽略"}
    claim = read_link("l", parse_qs(urlsplit(labels["立即释放"]).query)["t"][0], 1e9)
    assert (claim.action, claim.user, claim.rec_id) == ("release", "alice", one[0].facts.rec_id)
    assert claim.expires_at == 1e9 + 24 * 3600
    for events in ([event("resolved")], [event(rec_kind="scale_down")], [event(), event()]):
        text = render(events, "en", Links())
        assert buttons(text, events, channel("slack")) == text


def test_report_periods_end_at_utc_midnight_and_monday() -> None:
    wednesday_noon = 1_767_182_400.0  # 2025-12-31 12:00 UTC, a Wednesday
    assert period_end(wednesday_noon, "daily") == 1_767_139_200.0  # 2025-12-31 00:00
    assert period_end(wednesday_noon, "weekly") == 1_766_966_400.0  # Monday 2025-12-29 00:00
    assert period_end(1_766_966_400.0, "weekly") == 1_766_966_400.0


def test_replies_are_in_chinese_for_a_service_whose_channels_are_zh(tmp_path: Path) -> None:
    assert reply_languages(
        [("feishu", "zh"), ("lark", "zh"), ("slack", "en"), ("dingtalk", "zh"), ("slack", "zh")]
    ) == {"feishu": "zh", "slack": "en", "dingtalk": "zh"}  # mixed Slack channels: English
    rec = Recommendation(
        id=f"release_idle:{POD.key}",
        kind=RecommendationKind.RELEASE_IDLE,
        subject=POD.key,
        title="Release 1 idle H100",
        evidence={},
        savings=Savings(100.0, 10.0, 4.0, "USD", money_per_hour=0.14),
        status=RecommendationStatus.OPEN,
        opened_at=1e9,
        updated_at=1e9,
        gpu_uuids=("G1",),
        node="n1",
        workload_key=POD.key,
        namespace="ml",
    )
    held = GpuView("G1", "n1", 0, "H100", "NVIDIA H100", GpuState.ALLOCATED_IDLE, 1e9, (POD,))
    users = {**USERS, "alice": ContactSettings(team="vision", feishu="ou_alice")}
    users["carol"] = ContactSettings(team="speech", feishu="ou_carol")
    with Ledger.open(str(tmp_path / "l.db")) as ledger:
        ledger.upsert_recommendations([rec])
        desk = AnswerDesk(
            Desk(
                AnswerSettings(),
                ActionSettings(),
                ledger,
                Directory(users),
                Executors(),
                lambda now: [held],
            )
        )

        def press(id_: str, user: str, action: str, language: str) -> str:
            answer = Answer(id_, "feishu", user, action, rec.id, language=language)
            return desk.answer(answer, 1e9).text

        assert press("1", "ou_carol", "keep", "zh") == (
            "已拒绝：carol 无权对 Pod ml/nb 执行“保留”：它属于用户 alice，"
            "只有其用户、所在组或管理员（answers.operators）可以操作"
        )
        assert press("2", "ou_nobody", "keep", "zh").startswith(
            "已拒绝：Feishu 用户 'ou_nobody' 不在 gpufleet 的用户目录中"
        )
        assert press("3", "ou_alice", "keep", "zh") == (
            "alice 已保留 4 小时：2001-09-09 05:46 UTC 之前不会自动释放 Pod ml/nb"
        )
        assert press("3", "ou_alice", "keep", "zh") == "已收到过这次操作，未再执行。"
        assert press("4", "ou_alice", "release", "en").startswith("Not released: auto-release")
        assert press("5", "ou_alice", "release", "zh").startswith("未释放：ml 未开启自动释放")
