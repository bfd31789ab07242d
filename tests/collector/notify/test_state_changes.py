"""One message per recommendation state change and channel route, never a repeat, across
restarts: opened, material update after the cooldown, reminder, resolved."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from collector.notify.settings import RouteSettings
from collector.records import RecommendationStatus
from tests.collector.notify.fake_services import FakeService
from tests.collector.notify.rig import (
    HandClock,
    channel,
    fake,
    index_for,
    notifier_for,
    release_rec,
    simple_event,
)

SECRET = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM="


def kinds_sent(service: FakeService) -> list[str]:
    return [key.split("|")[1] for r in service.accepted for key in r.json["data"]["events"]]


def test_each_state_change_is_one_message_and_nothing_repeats(tmp_path: Path) -> None:
    clock = HandClock()
    rec = release_rec(1)
    with (
        fake("webhook", clock, SECRET) as hook,
        notifier_for(
            tmp_path,
            [channel(hook, digest_interval_seconds=0)],
            clock,
            cooldown_seconds=3600.0,
            renotify_interval_seconds=24 * 3600.0,
        ) as n,
    ):
        index = index_for(rec)
        for _ in range(3):  # evaluated again and again: told once
            n.observe([rec], index, clock.now)
            n.deliver()
        assert kinds_sent(hook) == ["opened"]
        clock.now += 600  # cost doubles, but within the cooldown: nothing yet
        bigger = dataclasses.replace(
            rec,
            savings=dataclasses.replace(rec.savings, money_per_hour=16.8),
            gpu_uuids=rec.gpu_uuids,
        )
        n.observe([bigger], index, clock.now)
        n.deliver()
        assert kinds_sent(hook) == ["opened"]
        clock.now += 3000  # past the cooldown: one update
        n.observe([bigger], index, clock.now)
        n.observe([bigger], index, clock.now + 1)
        n.deliver()
        assert kinds_sent(hook) == ["opened", "updated"]
        clock.now += 3600  # a 10 % change is not material
        slightly = dataclasses.replace(
            bigger, savings=dataclasses.replace(bigger.savings, money_per_hour=18.0)
        )
        n.observe([slightly], index, clock.now)
        n.deliver()
        assert kinds_sent(hook) == ["opened", "updated"]
        clock.now += 24 * 3600  # still standing a day later: a reminder
        n.observe([slightly], index, clock.now)
        n.deliver()
        assert kinds_sent(hook) == ["opened", "updated", "reminder"]
        resolved = dataclasses.replace(
            slightly, status=RecommendationStatus.RESOLVED, resolved_at=clock.now + 5
        )
        clock.now += 10
        n.observe([resolved], index, clock.now)
        n.observe([resolved], index, clock.now + 60)
        n.deliver()
        assert kinds_sent(hook) == ["opened", "updated", "reminder", "resolved"]


def test_dismissed_goes_quiet_and_unwanted_kinds_are_never_sent(tmp_path: Path) -> None:
    clock = HandClock()
    rec = release_rec(2)
    with (
        fake("webhook", clock, SECRET) as hook,
        notifier_for(
            tmp_path, [channel(hook, digest_interval_seconds=0)], clock, kinds=["scale_down"]
        ) as n,
    ):
        n.observe([rec], index_for(rec), clock.now)
        assert n.deliver() == 0 and hook.received == []
    (tmp_path / "b").mkdir()
    with (
        fake("webhook", clock, SECRET) as hook,
        notifier_for(tmp_path / "b", [channel(hook, digest_interval_seconds=0)], clock) as n,
    ):
        n.observe([rec], index_for(rec), clock.now)
        dismissed = dataclasses.replace(rec, status=RecommendationStatus.DISMISSED)
        n.observe([dismissed], index_for(rec), clock.now + 60)
        n.deliver(clock.now + 60)
        assert kinds_sent(hook) == ["opened"]


def test_a_restart_neither_drops_nor_repeats(tmp_path: Path) -> None:
    clock = HandClock()
    recs = [release_rec(i) for i in range(3)]
    with fake("webhook", clock, SECRET) as hook:
        settings = channel(hook, digest_interval_seconds=0)
        with notifier_for(tmp_path, [settings], clock) as first:
            first.observe(recs, index_for(*recs), clock.now)
            hook.script.append((503, {}, b""))  # the first try fails...
            assert first.deliver() == 0  # ...and the process dies before the retry
        clock.now += 30
        with notifier_for(tmp_path, [settings], clock) as second:
            second.observe(recs, index_for(*recs), clock.now)  # same state: nothing new
            assert second.deliver() == 3
        with notifier_for(tmp_path, [settings], clock) as third:
            third.observe(recs, index_for(*recs), clock.now + 60)
            assert third.deliver(clock.now + 60) == 0
        keys = sorted(k for r in hook.accepted for k in r.json["data"]["events"])
        assert keys == sorted(f"{r.id}|opened|{r.opened_at}" for r in recs)
        assert len(hook.received) == 4  # 1 failed + 3 delivered


def test_routes_send_each_change_to_the_matching_channels_once(tmp_path: Path) -> None:
    clock = HandClock()
    ml, cv = release_rec(1, namespace="ml"), release_rec(2, namespace="cv")
    with fake("webhook", clock, SECRET) as everyone, fake("feishu", clock, "fs") as cv_chat:
        channels = [
            channel(everyone, "all", digest_interval_seconds=0),
            channel(cv_chat, "cv-team", language="zh", digest_interval_seconds=0),
        ]
        routes = [
            RouteSettings(channels=["all"]),
            RouteSettings(channels=["cv-team", "all"], namespaces=["cv"], teams=["vision"]),
        ]
        with notifier_for(tmp_path, channels, clock, routes=routes) as n:
            n.observe([ml, cv], index_for(ml, cv, team="vision"), clock.now)
            n.deliver()
        assert sorted(
            k.split("|")[0] for r in everyone.accepted for k in r.json["data"]["events"]
        ) == [cv.id, ml.id]
        assert len(cv_chat.accepted) == 1
        card = cv_chat.accepted[0].json["card"]
        assert (
            card["header"]["title"]["content"]
            == "建议释放 Pod cv/notebook-2 占用的 2 张空闲的 H100"
        )


def test_pruning_drops_old_sent_messages_and_never_pending_ones(tmp_path: Path) -> None:
    clock = HandClock()
    with (
        fake("webhook", clock, SECRET) as hook,
        notifier_for(tmp_path, [channel(hook, digest_interval_seconds=0)], clock) as n,
    ):
        n.observe([release_rec(1)], index_for(release_rec(1)), clock.now)
        n.deliver()
        hook.script.append((503, {}, b""))
        n.announce(simple_event("later"), clock.now + 100)
        n.deliver(clock.now + 100)  # fails: stays pending
        assert n.outbox.prune(clock.now + 50) == 1  # the sent one; the live state stays
        assert n.outbox.sent_events("ops") == []
        assert n.outbox.pending_by_channel() == {"ops": 1}
        n.observe([release_rec(1)], index_for(release_rec(1)), clock.now + 200)
        assert n.outbox.pending_by_channel() == {"ops": 1}  # told state kept: no repeat
