"""What a message says (what, where, who, how much, the action and its deadline, links) in
English and Simplified Chinese; WeCom's 4096-byte limit counted in UTF-8."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import msgspec

from collector.notify import wecom
from collector.notify.changes import ReleasePlan, facts_of
from collector.notify.commands import owned_release_command, release_command
from collector.notify.messages import Event, Facts, Text, render
from collector.notify.phrases import ENGLISH
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


def release_event(plans: dict[str, ReleasePlan] | None = None, team: str = "vision") -> Event:
    rec = release_rec(7, money_per_hour=8.4, gpus=2)
    facts = facts_of(rec, index_for(rec, plans=plans, team=team), T0 + 600)
    return Event(key="k", source="recommendations", kind="opened", severity="warning", facts=facts)


CONSOLE = "http://collector.example:8080/ui/recommendations?id=release_idle%3Apod%3Aml%2Fnotebook-7"
GRAFANA = (
    "http://grafana.example:3000/d/gpufleet-workload"
    "?var-workload=pod%3Aml%2Fnotebook-7&var-namespace=ml"
)
#: enforce in ml, idle since T0 - 2 h, released after 4 h: T0 + 2 h at the earliest
ENFORCE = {"pod:ml/notebook-7": ReleasePlan("enforce", False, T0 + 7200, "gpufleet.io/exempt")}


def test_english_release_message_says_what_to_do_where_who_and_how_much() -> None:
    text = render([release_event()], "en", LINKS)
    fields = dict(text.sections[0].fields)
    assert text.title == "Release 2 idle H100s held by pod ml/notebook-7"
    assert fields == {
        "Workload": "pod ml/notebook-7",
        "Owner": "alice, team vision",
        "GPUs": "gpu-node-00 #4, #5 (2 x H100)",  # GPU-7-0 and GPU-7-1 (index_for)
        "Idle for": "2 h 10 min",  # idle since T0 - 2 h, now T0 + 10 min
        "Cost": "8.40 USD/h, 17-6,132 USD/month",  # 2 h seen: 2 x 8.40 at the low end
        "Evidence": "seen for 2 h, low confidence (low end: it lasts as long again; "
        "high end: it lasts the month)",
        "Energy and CO2": "1,022 kWh and 580 kg CO2e per month",
    }
    assert text.sections[0].command == ("To release it", "kubectl delete pod -n ml notebook-7")
    assert text.links == (("Open in gpufleet", CONSOLE), ("Grafana", GRAFANA))


def test_a_release_under_an_enforcing_policy_says_when_and_how_to_keep_it() -> None:
    fields = dict(render([release_event(ENFORCE)], "en", LINKS).sections[0].fields)
    assert fields["Auto-release"] == (
        "on: released automatically at 2026-09-21 16:13 UTC at the earliest, "  # T0 + 2 h
        "after a warning that gives the exact time"
    )
    assert fields["To keep it"] == (
        "run `kubectl label pod -n ml notebook-7 gpufleet.io/exempt=true`, "
        "or put the GPU back to work"
    )
    dry = {k: dataclasses.replace(p, dry_run=True) for k, p in ENFORCE.items()}
    fields = dict(render([release_event(dry)], "en", LINKS).sections[0].fields)
    assert fields["Auto-release"].startswith("dry run: from 2026-09-21 16:13 UTC gpufleet records")
    assert "To keep it" not in fields  # nothing will be released: nothing to opt out of
    notify = {k: dataclasses.replace(p, policy="notify") for k, p in ENFORCE.items()}
    fields = dict(render([release_event(notify)], "en", LINKS).sections[0].fields)
    assert fields["Auto-release"].startswith("notify only:") and "To keep it" not in fields


def test_chinese_release_message_reads_naturally() -> None:
    text = render([release_event(ENFORCE)], "zh", LINKS)
    fields = dict(text.sections[0].fields)
    assert text.title == "建议释放 Pod ml/notebook-7 占用的 2 张空闲的 H100"
    assert fields["负责人"] == "alice，vision 组"
    assert fields["GPU"] == "gpu-node-00 #4, #5（2 张 H100）"
    assert fields["已空闲"] == "2 小时 10 分钟"
    assert fields["费用"] == "每小时 8.40 USD，每月约 17～6,132 USD"
    assert fields["依据"] == "已观察 2 小时，置信度低（下限按再持续同样时长计，上限按持续整月计）"
    assert fields["能耗与碳排放"] == "每月约 1,022 千瓦时电，580 千克二氧化碳当量"
    assert fields["自动释放"] == (
        "已开启：最早于 2026-09-21 16:13 UTC 自动释放，释放前会再发预告，给出确切时间"
    )
    assert fields["如需保留"].startswith("执行 `kubectl label pod -n ml notebook-7 gpufleet.io/")
    assert text.sections[0].command == ("手动释放", "kubectl delete pod -n ml notebook-7")
    assert text.links == (("在 gpufleet 中查看", CONSOLE), ("Grafana 看板", GRAFANA))


def test_commands_for_each_kind_of_workload() -> None:
    assert release_command("pod:notebooks/jupyter-92182") == (
        "kubectl delete pod -n notebooks jupyter-92182"
    )
    assert release_command("pod:research/sweep-7f9c-x", "Deployment", "sweep") == (
        "kubectl scale deployment -n research sweep --replicas=0"
    )
    assert release_command("pod:db/pg-0", "StatefulSet", "pg") == (
        "kubectl scale statefulset -n db pg --replicas=0"
    )
    assert release_command("slurm:842992") == "scancel 842992"
    assert release_command("slurm:842992_3") == "scancel 842992_3"  # an array task
    assert release_command("manual:shared-box") == ""  # nothing to type: words only
    assert release_command("pod:ml/x; rm -rf /") == "kubectl delete pod -n ml 'x; rm -rf /'"
    # the owner as the ledger keeps it: Kind/namespace/name
    assert owned_release_command("pod:research/sweep-7f9c-x", "Deployment/research/sweep") == (
        "kubectl scale deployment -n research sweep --replicas=0"
    )
    assert owned_release_command("pod:nb/jupyter-1", "Notebook/nb/alice") == (
        "kubectl delete pod -n nb jupyter-1"
    )
    assert owned_release_command("slurm:7", "") == "scancel 7"


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
    assert zh_text.title == "释放预告：Pod ml/nb 的 GPU 将于 2026-09-21 15:13 UTC 自动释放"
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
    carried = sum(r.json["markdown"]["content"].count("作业: Pod ml/job-") for r in robot.received)
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


# -- no English in the Chinese messages, no UUIDs or raw keys in any ----------------------

#: names that are the same in both languages (products, units, tools)
SHARED_NAMES = {"gpu", "gpus", "grafana", "gpufleet", "slurm", "pod", "utc", "co2e", "kwh"}


def english_words() -> set[str]:
    """Every word of three letters or more in the English catalogue's own text."""
    texts: list[str] = []
    for value in dataclasses.asdict(ENGLISH).values():
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            texts += [v for v in value.values() if isinstance(v, str)]
        elif isinstance(value, tuple):
            texts += [v for v in value if isinstance(v, str)]
    words = set()
    for text in texts:
        literal = re.sub(r"\{[^}]*\}", " ", text)  # placeholders are data, not words
        words |= {w.lower() for w in re.findall(r"[A-Za-z]{3,}", literal)}
    return words - SHARED_NAMES


def every_kind_of_event() -> list[Event]:
    base = release_event(ENFORCE).facts
    warning = msgspec.structs.replace(
        base, deadline=T0 + 3600, action="delete pod ml/notebook-7",
        opt_out="kubectl label pod -n ml notebook-7 gpufleet.io/exempt=true",
    )  # fmt: skip
    dry = msgspec.structs.replace(base, dry_run=True)
    notify = msgspec.structs.replace(base, policy="notify")
    node = Facts(
        rec_kind="scale_down",
        nodes=["gpu-node-03"],
        gpus=["GPU-a"] * 8,
        gpu_models="H100",
        money_per_hour=32.0,
        money_per_month=23360.0,
        currency="USD",
    )
    events = [Event(key=k, source="recommendations", kind=k, facts=base)
              for k in ("opened", "updated", "reminder", "resolved")]  # fmt: skip
    events += [Event(key="d", source="recommendations", kind="opened", facts=dry),
               Event(key="n", source="recommendations", kind="opened", facts=notify),
               Event(key="s", source="recommendations", kind="opened", facts=node)]  # fmt: skip
    for kind in ("right_size", "pricing_plan", "consolidate"):
        facts = msgspec.structs.replace(base, rec_kind=kind)
        events.append(Event(key=kind, source="recommendations", kind="opened", facts=facts))
    for kind, reason in (("warning", ""), ("acted", ""), ("dry_run", ""), ("notify_only", ""),
                         ("failed", ""), ("skipped", "exempt"), ("skipped", "stale"),
                         ("skipped", "active"), ("skipped", "target_gone")):  # fmt: skip
        facts = msgspec.structs.replace(warning, reason=reason)
        events.append(Event(key=f"{kind}{reason}", source="actions", kind=kind, facts=facts))
    return events


#: the data in the messages above, which stays as it is in any language
DATA = ("kubectl label pod -n ml notebook-7 gpufleet.io/exempt=true", "delete pod ml/notebook-7",
        "kubectl delete pod -n ml notebook-7", "ml/notebook-7", "gpu-node-00", "gpu-node-03",
        "alice", "vision", "H100", "USD")  # fmt: skip


def all_text(text: Text) -> str:
    parts = [text.title, *(label for label, _ in text.links)]
    for sec in text.sections:
        parts += [sec.heading, *(f"{k} {v}" for k, v in sec.fields)]
        parts += list(sec.command or ()) + [label for label, _ in sec.links]
    return "\n".join(parts)


def test_chinese_messages_contain_no_english_phrase_from_the_catalogue() -> None:
    english = english_words()
    assert {"release", "idle", "owner", "deadline", "released", "dry", "policy"} <= english
    events = every_kind_of_event()
    texts = [render([e], "zh", LINKS) for e in events] + [render(events[:3], "zh", LINKS)]
    for text in texts:
        shown = all_text(text)
        for data in DATA:
            shown = shown.replace(data, " ")
        found = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", shown)} & english
        assert not found, (text.title, found)


def test_no_message_shows_gpu_s_uuids_or_raw_keys() -> None:
    events = every_kind_of_event()
    for language in ("en", "zh"):
        for text in [render([e], language, LINKS) for e in events]:
            shown = all_text(text)
            assert "GPU(s)" not in shown and "GPU-7-" not in shown and "GPU-a" not in shown
            assert "pod:" not in shown and "idle_since" not in shown and "_" not in text.title
