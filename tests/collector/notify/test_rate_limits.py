"""DingTalk allows 20 messages a minute per robot: 30 events for one DingTalk channel
become at most 20 messages in any minute, and the messages (digests) carry all 30.

The fake robot enforces the limit itself from the signed timestamps (the sender's clock)
and answers errcode 130101 over it, as DingTalk does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.collector.notify.fake_services import Received
from tests.collector.notify.rig import HandClock, channel, fake, notifier_for, simple_event

EVENTS = 30


def workloads_in(messages: list[Received]) -> list[str]:
    pattern = re.compile(r"Workload: pod (ml/job-\d\d)")
    return [w for m in messages for w in pattern.findall(m.json["markdown"]["text"])]


def max_in_any_minute(messages: list[Received]) -> int:
    times = sorted(int(m.query["timestamp"]) / 1000 for m in messages)
    return max(sum(1 for t in times if start <= t < start + 60) for start in times)


@pytest.mark.parametrize("digest_seconds", [0.0, 60.0])
def test_thirty_events_become_at_most_twenty_messages_a_minute_carrying_all_thirty(
    digest_seconds: float, tmp_path: Path
) -> None:
    clock = HandClock()
    with (
        fake("dingtalk", clock, "SECrate-limit-test") as robot,
        notifier_for(
            tmp_path, [channel(robot, digest_interval_seconds=digest_seconds)], clock
        ) as notifier,
    ):
        for second in range(240):  # one event a second for 30 s; deliver every second
            if second < EVENTS:
                notifier.announce(simple_event(f"job-{second:02d}"), clock.now)
            notifier.deliver()
            clock.now += 1.0
        refused = [r for r in robot.received if not r.ok]
        assert refused == []  # never over the robot's limit
        sent = robot.accepted
        assert max_in_any_minute(sent) <= 20
        carried = workloads_in(sent)
        assert sorted(carried) == [f"ml/job-{i:02d}" for i in range(EVENTS)]  # each once
        assert notifier.outbox.pending_by_channel() == {}
        if digest_seconds == 0:
            # 20 single messages in the first minute, then one digest with the other 10
            assert len(sent) == 21 and len(workloads_in(sent[-1:])) == 10
            assert "gpufleet: 10 notifications" in sent[-1].json["markdown"]["title"]
        else:
            # the minute's 30 events in two digests (at most 20 events a digest)
            assert [len(workloads_in([m])) for m in sent] == [20, 10]


def test_a_restart_does_not_reset_the_rate_window(tmp_path: Path) -> None:
    clock = HandClock()
    with fake("dingtalk", clock, "SECrestart") as robot:
        settings = channel(robot, digest_interval_seconds=0)
        with notifier_for(tmp_path, [settings], clock) as first:
            for i in range(20):
                first.announce(simple_event(f"job-{i:02d}"), clock.now)
            assert first.deliver() == 20
        clock.now += 10
        with notifier_for(tmp_path, [settings], clock) as second:
            second.announce(simple_event("job-20"), clock.now)
            assert second.deliver() == 0  # the ledger remembers the last minute's 20
            clock.now += 51
            assert second.deliver() == 1
        assert all(r.ok for r in robot.received)
