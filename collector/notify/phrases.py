"""Every sentence a message can contain, in English and Simplified Chinese.

The Chinese is written the way Feishu/DingTalk/WeCom users write operations notices
(full-width punctuation, 张 for GPUs, 每月约 for estimates), not word-for-word English.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Phrases:
    digest_title: str
    headlines: dict[str, str]
    label: dict[str, str]
    gpus: str
    cost: str
    #: the cost with the range its observation window supports (low end first)
    cost_range: str
    #: the observation window and the confidence it gives (levels: low, medium, high)
    evidence: str
    confidence_levels: tuple[str, str, str]
    energy: str
    units: tuple[str, str, str]  # day, hour, minute
    unit_sep: str
    opt_out_cmd: str
    opt_out_admin: str
    reasons: dict[str, str]
    open_collector: str
    open_grafana: str
    #: "1 idle H100", "2 idle H100s": (one, many), formatted with n and models
    idle_gpus: tuple[str, str]
    #: how a workload is named, by kind of key (pod, slurm, process, manual)
    workload_kinds: dict[str, str]
    #: the auto-release policy that applies: enforce, enforce dry-run, notify
    policies: dict[str, str]
    gpus_on: str  # "gpu-node-00 #6, #7 (2 x H100)"
    owner_team: str  # "alice, team vision"
    team_only: str  # "team vision"
    scale_down_words: str

    def count_idle(self, n: int, models: str) -> str:
        # several models: "2 idle GPUs", not "2 idle A100, H100s"
        model = models if models and "," not in models else "GPU"
        return self.idle_gpus[0 if n == 1 else 1].format(n=n, models=model)

    def owner(self, user: str, team: str) -> str:
        if user and team:
            return self.owner_team.format(user=user, team=team)
        return user or (self.team_only.format(team=team) if team else "")

    def duration(self, seconds: float) -> str:
        minutes = int(max(0.0, seconds) // 60)
        days, rest = divmod(minutes, 24 * 60)
        hours, mins = divmod(rest, 60)
        parts = [(days, self.units[0]), (hours, self.units[1]), (mins, self.units[2])]
        shown = [f"{n}{self.unit_sep}{unit}" for n, unit in parts if n][:2]
        return " ".join(shown) if shown else f"0{self.unit_sep}{self.units[2]}"


ENGLISH = Phrases(
    digest_title="gpufleet: {n} notifications",
    headlines={
        "opened:release_idle": "Release {gpus} held by {subject}",
        "reminder:release_idle": "Still idle: release {gpus} held by {subject}",
        "updated:release_idle": "Update: release {gpus} held by {subject}",
        "opened:right_size": "Right-size {subject}: a smaller GPU fits what it uses",
        "opened:pricing_plan": "Switch the pricing plan of {subject}",
        "opened:scale_down": "Idle node {subject}: every GPU unallocated, scale it down",
        "opened:consolidate": "Consolidate: move the work off {subject} and release it",
        "opened:bottleneck": "{subject} leaves most of its GPUs unused: a likely bottleneck",
        "updated:bottleneck": "Update: {subject} is still held back by a bottleneck",
        "reminder:bottleneck": "Still held back: {subject} leaves most of its GPUs unused",
        "opened:broken_gpus": "Node {subject} has broken or missing GPUs: drain it",
        "updated:broken_gpus": "Update: node {subject} still has broken or missing GPUs",
        "reminder:broken_gpus": "Still broken: node {subject} has GPUs missing or faulted",
        "acted:broken_gpus": "Took node {subject} out of service: {action}",
        "dry_run:broken_gpus": "Dry run: would take node {subject} out of service",
        "failed:broken_gpus": "Could not take node {subject} out of service",
        "skipped:broken_gpus": "Node {subject} not taken out of service",
        "opened": "{title}",
        "updated": "Update: {subject}",
        "reminder": "Still idle: {subject}",
        "resolved": "Resolved: {subject}",
        "warning": "{subject}: its GPUs will be released at {deadline}",
        "acted": "Released: {subject}",
        "dry_run": "Dry run: would release {subject}",
        "notify_only": "Deadline passed: {subject} (policy: notify only)",
        "failed": "Release failed: {subject}",
        "skipped": "Not released: {subject}",
        "firing": "[FIRING] {title}",
        "alert_resolved": "[RESOLVED] {title}",
    },
    label={
        "workload": "Workload",
        "user": "User",
        "owner": "Owner",
        "node": "Node",
        "gpus": "GPUs",
        "idle": "Idle for",
        "cost": "Cost",
        "evidence": "Evidence",
        "energy": "Energy and CO2",
        "action": "Action",
        "deadline": "Deadline",
        "command": "To release it",
        "policy": "Auto-release",
        "todo": "What to do",
        "opt_out": "To keep it",
        "reason": "Reason",
        "detail": "Details",
        "undo": "To undo it",
        "by_hand": "To do it by hand",
    },
    gpus="{n} x {models}",
    cost="{hour:,.2f} {cur}/h, about {month:,.0f} {cur}/month",
    cost_range="{hour:,.2f} {cur}/h, {low:,.0f}-{month:,.0f} {cur}/month",
    evidence="seen for {seen}, {level} confidence (low end: it lasts as long again; "
    "high end: it lasts the month)",
    confidence_levels=("low", "medium", "high"),
    energy="{kwh:,.0f} kWh and {kg:,.0f} kg CO2e per month",
    units=("d", "h", "min"),
    unit_sep=" ",
    opt_out_cmd="run `{cmd}`, or put the GPU back to work",
    opt_out_admin="ask the GPU operators for an exemption, or put the GPU back to work",
    reasons={
        "exempt": "exempt by policy",
        "stale": "GPU data is missing or stale",
        "active": "the GPU is in use again",
        "target_gone": "the workload no longer exists",
        "already_out": "the node is already out of service (cordoned or drained)",
    },
    open_collector="Open in gpufleet",
    open_grafana="Grafana",
    idle_gpus=("1 idle {models}", "{n} idle {models}s"),
    workload_kinds={
        "pod": "pod {namespace}/{name}",
        "slurm": "Slurm job {name}",
        "process": "process {name}",
        "manual": "{name}",
    },
    policies={
        "enforce": "on: released automatically at {when} at the earliest, after a warning "
        "that gives the exact time",
        "enforce_dry_run": "dry run: from {when} gpufleet records what it would release, "
        "and releases nothing",
        "notify": "notify only: reminders until someone acts, nothing is released automatically",
    },
    gpus_on="{names} ({n} x {models})",
    owner_team="{user}, team {team}",
    team_only="team {team}",
    scale_down_words="remove {node} from its node pool, or give its GPUs work",
)

CHINESE = Phrases(
    digest_title="gpufleet：{n} 条新通知",
    headlines={
        "opened:release_idle": "建议释放 {subject} 占用的 {gpus}",
        "reminder:release_idle": "仍在空闲：建议释放 {subject} 占用的 {gpus}",
        "updated:release_idle": "情况有变化：建议释放 {subject} 占用的 {gpus}",
        "opened:right_size": "建议为 {subject} 换用更小的 GPU，足够其实际用量",
        "opened:pricing_plan": "建议调整 {subject} 的计费方式",
        "opened:scale_down": "节点 {subject} 的 GPU 全部空闲且无人使用，建议缩容",
        "opened:consolidate": "建议整合：把 {subject} 上的作业迁到其他节点的空闲 GPU，释放该节点",
        "opened:bottleneck": "{subject} 的 GPU 大部分未被用上：发现可能的瓶颈",
        "updated:bottleneck": "情况有变化：{subject} 仍受瓶颈限制",
        "reminder:bottleneck": "仍受瓶颈限制：{subject} 的 GPU 大部分未被用上",
        "opened:broken_gpus": "节点 {subject} 有故障或丢失的 GPU，建议排空检修",
        "updated:broken_gpus": "情况有变化：节点 {subject} 仍有故障或丢失的 GPU",
        "reminder:broken_gpus": "仍未修复：节点 {subject} 有丢失或故障的 GPU",
        "acted:broken_gpus": "已将节点 {subject} 停止调度：{action}",
        "dry_run:broken_gpus": "演练（未实际执行）：本应将节点 {subject} 停止调度",
        "failed:broken_gpus": "未能将节点 {subject} 停止调度",
        "skipped:broken_gpus": "未将节点 {subject} 停止调度",
        "opened": "{title}",
        "updated": "情况有变化：{subject}",
        "reminder": "仍在空闲：{subject}",
        "resolved": "已解除：{subject}",
        "warning": "释放预告：{subject} 的 GPU 将于 {deadline} 自动释放",
        "acted": "已自动释放：{subject}",
        "dry_run": "演练（未实际执行）：本应释放 {subject}",
        "notify_only": "已到期：{subject}（当前策略仅通知，不自动释放）",
        "failed": "释放失败：{subject}",
        "skipped": "未释放：{subject}",
        "firing": "【告警】{title}",
        "alert_resolved": "【已恢复】{title}",
    },
    label={
        "workload": "作业",
        "user": "用户",
        "owner": "负责人",
        "node": "节点",
        "gpus": "GPU",
        "idle": "已空闲",
        "cost": "费用",
        "evidence": "依据",
        "energy": "能耗与碳排放",
        "action": "处理方式",
        "deadline": "截止时间",
        "command": "手动释放",
        "policy": "自动释放",
        "todo": "建议操作",
        "opt_out": "如需保留",
        "reason": "原因",
        "detail": "详情",
        "undo": "撤销方法",
        "by_hand": "手动执行",
    },
    gpus="{n} 张 {models}",
    cost="每小时 {hour:,.2f} {cur}，每月约 {month:,.0f} {cur}",
    cost_range="每小时 {hour:,.2f} {cur}，每月约 {low:,.0f}～{month:,.0f} {cur}",
    evidence="已观察 {seen}，置信度{level}（下限按再持续同样时长计，上限按持续整月计）",
    confidence_levels=("低", "中", "高"),
    energy="每月约 {kwh:,.0f} 千瓦时电，{kg:,.0f} 千克二氧化碳当量",
    units=("天", "小时", "分钟"),
    unit_sep=" ",
    opt_out_cmd="执行 `{cmd}`，或让 GPU 重新跑起来",
    opt_out_admin="请联系 GPU 管理员申请豁免，或让 GPU 重新跑起来",
    reasons={
        "exempt": "按策略豁免",
        "stale": "GPU 数据缺失或已过期",
        "active": "GPU 已重新使用",
        "target_gone": "作业已不存在",
        "already_out": "该节点已停止调度（已被封锁或排空）",
    },
    open_collector="在 gpufleet 中查看",
    open_grafana="Grafana 看板",
    idle_gpus=("1 张空闲的 {models}", "{n} 张空闲的 {models}"),
    workload_kinds={
        "pod": "Pod {namespace}/{name}",
        "slurm": "Slurm 作业 {name}",
        "process": "进程 {name}",
        "manual": "{name}",
    },
    policies={
        "enforce": "已开启：最早于 {when} 自动释放，释放前会再发预告，给出确切时间",
        "enforce_dry_run": "演练模式：自 {when} 起只记录本应释放的内容，不会实际释放",
        "notify": "仅通知：会持续提醒，直到有人处理，不会自动释放",
    },
    gpus_on="{names}（{n} 张 {models}）",
    owner_team="{user}，{team} 组",
    team_only="{team} 组",
    scale_down_words="把节点 {node} 移出节点池，或安排作业使用其 GPU",
)


def for_language(language: str) -> Phrases:
    return CHINESE if language == "zh" else ENGLISH
