"""What a message says (what, where, who, how much, the action and its deadline, links) in
English and Simplified Chinese; WeCom's 4096-byte limit counted in UTF-8."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from collector.notify import wecom
from collector.notify.changes import facts_of
from collector.notify.messages import Event, render
from collector.notify.settings import resolve_channel
from collector.records import RecommendationKind
from tests.collector.notify.rig import (
    LINKS,
    T0,
    HandClock,
    channel,
    fake,
    index_for,
    notifier_for,
    release_rec,
    simple_event,
)


def release_event() -> Event:
    rec = release_rec(7, money_per_hour=8.4, gpus=2)
    facts = facts_of(rec, index_for(rec), T0 + 600)
    return Event(key="k", source="recommendations", kind="opened", severity="warning", facts=facts)


def test_english_release_message_says_what_where_who_and_how_much() -> None:
    text = render([release_event()], "en", LINKS)
    fields = dict(text.sections[0].fields)
    assert text.title == "2 idle GPU(s) held by pod:ml/notebook-7"
    assert fields == {
        "Workload": "pod:ml/notebook-7",
        "User": "alice",
        "Node": "gpu-node-00",
        "GPUs": "2 x H100",
        "Idle for": "2 h 10 min",  # idle since T0 - 2 h, now T0 + 10 min
        "Cost": "8.40 USD/h, 17-6,132 USD/month",  # 2 h seen: 2 x 8.40 at the low end
        "Evidence": "seen for 2 h, low confidence (low end: it lasts as long again; "
        "high end: it lasts the month)",
        "Energy and CO2": "1,022 kWh and 580 kg CO2e per month",
    }
    assert text.links == (("Open in gpufleet", LINKS.collector_url), ("Grafana", LINKS.grafana_url))


def test_chinese_release_message_reads_naturally() -> None:
    text = render([release_event()], "zh", LINKS, mentions=["13800000000"])
    fields = dict(text.sections[0].fields)
    assert text.title == "pod:ml/notebook-7 占用的 2 张 GPU 一直空闲，建议释放"
    assert fields["GPU"] == "2 张 H100"
    assert fields["已空闲"] == "2 小时 10 分钟"
    assert fields["费用"] == "每小时 8.40 USD，每月约 17～6,132 USD"
    assert fields["依据"] == "已观察 2 小时，置信度低（下限按再持续同样时长计，上限按持续整月计）"
    assert fields["能耗与碳排放"] == "每月约 1,022 千瓦时电，580 千克二氧化碳当量"
    assert text.links[0] == ("在 gpufleet 中查看", LINKS.collector_url)


def test_warning_says_the_deadline_and_how_to_opt_out_in_both_languages() -> None:
    event = simple_event("nb")
    event = Event(
        key=event.key,
        source=event.source,
        kind="warning",
        severity="warning",
        facts=type(event.facts)(
            **{
                **{f: getattr(event.facts, f) for f in event.facts.__struct_fields__},
                "opt_out": "kubectl label pod -n ml nb gpufleet.io/exempt=true",
            }
        ),
    )
    en = dict(render([event], "en", LINKS).sections[0].fields)
    zh_text = render([event], "zh", LINKS)
    zh = dict(zh_text.sections[0].fields)
    assert en["Deadline"] == "2026-09-21 15:13 UTC"  # T0 + 1 h (date -u -d @1790003600)
    assert en["To keep it"] == (
        "run `kubectl label pod -n ml nb gpufleet.io/exempt=true`, or put the GPU back to work"
    )
    assert zh_text.title == "释放预告：pod:ml/nb 的 GPU 将于 2026-09-21 15:13 UTC 自动释放"
    assert zh["如需保留"].startswith("执行 `kubectl label pod -n ml nb gpufleet.io/exempt=true`")


def test_wecom_content_is_cut_by_bytes_never_inside_a_character(tmp_path: Path) -> None:
    long_detail = "空闲" * 2000  # 12,000 bytes of Chinese
    event = simple_event("big")
    event = Event(
        key="big",
        source="actions",
        kind="warning",
        facts=type(event.facts)(workload="pod:ml/big", detail=long_detail),
    )
    text = render([event], "zh", LINKS)
    clock = HandClock()
    with fake("wecom", clock) as robot:
        request = wecom.build(text, resolve_channel(channel(robot)), clock.now)
    content = json.loads(request.body)["markdown"]["content"]
    assert len(content.encode()) <= 4096
    assert len(content.encode()) > 4096 - 3  # as full as it can be
    assert content.endswith("…")
    content.encode().decode("utf-8")  # whole characters only


def test_a_wecom_digest_is_split_into_messages_under_4096_bytes(tmp_path: Path) -> None:
    clock = HandClock()
    with (
        fake("wecom", clock) as robot,
        notifier_for(
            tmp_path, [channel(robot, language="zh", digest_interval_seconds=60)], clock
        ) as n,
    ):
        for i in range(40):
            n.announce(simple_event(f"job-{i:02d}"), clock.now)
        clock.now += 60
        sent = n.deliver()
        assert n.outbox.pending_by_channel() == {}
    sizes = [len(r.json["markdown"]["content"].encode()) for r in robot.received]
    assert all(r.ok for r in robot.received) and sent == len(robot.received) > 2
    assert max(sizes) <= 4096
    carried = sum(r.json["markdown"]["content"].count("作业: pod:ml/job-") for r in robot.received)
    assert carried == 40


def test_consolidate_message_names_the_node_to_free_and_the_evidence() -> None:
    rec = dataclasses.replace(
        release_rec(7, money_per_hour=55.04, gpus=8),
        id="consolidate:gpu-node-06",
        kind=RecommendationKind.CONSOLIDATE,
        subject="gpu-node-06",
        workload_key="",
        namespace="",
        node="gpu-node-06",
        evidence={"idle_since": T0 - 7200.0, "target_nodes": ["gpu-node-00"]},
    )
    facts = facts_of(rec, index_for(rec), T0)
    event = Event(key="k", source="recommendations", kind="opened", facts=facts)
    en, zh = render([event], "en", LINKS), render([event], "zh", LINKS)
    assert en.title == "Consolidate: move the work off gpu-node-06 and release it"
    assert zh.title == "建议整合：把 gpu-node-06 上的作业迁到其他节点的空闲 GPU，释放该节点"
    assert dict(en.sections[0].fields)["Cost"] == "55.04 USD/h, 110-40,179 USD/month"
