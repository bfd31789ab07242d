"""What a person is told after pressing an answer button, in English and Simplified Chinese
(collector/actions/answers.py formats these; the button labels are buttons.LABELS).

Chinese replies go to a service whose channels are all ``language: zh``
(``reply_languages``): a press carries no channel, only its service.
"""

from __future__ import annotations

from collections.abc import Iterable

REPLIES: dict[str, dict[str, str]] = {
    "en": {
        "duplicate": "This answer was already received; nothing more done.",
        "refused": "Refused: {reason}",
        "no_recommendation": "there is no release recommendation {rec!r}",
        "not_in_directory": (
            "{service} user {user!r} is not in gpufleet's directory (notifications.users): "
            "ask an operator to add you"
        ),
        "gone": "{workload} no longer holds GPUs: nothing to do",
        "unknown_action": "unknown action {action!r}",
        "may_not": (
            "{who} may not {action} {workload}: it belongs to {owner}, and only {may} "
            "(answers.operators) may"
        ),
        "owner_user": "user {user}",
        "owner_team": "team {team}",
        "may_release": "its user or an operator",
        "may_other": "its user, its team or an operator",
        "kept": "Kept for {hours:g} h by {who}: no auto-release of {workload} before {until}",
        "dismissed": "Dismissed by {who}",
        "off": (
            "Not released: auto-release is off for {namespace} ({where}.mode), so gpufleet "
            "releases nothing there"
        ),
        "this_workload": "this workload",
        "dry_run": "Dry run ({where}.dry_run): would {what}; nothing was released",
        "release_what": "release {workload}",
        "failed": "Release by {who} failed: {error}",
        "released": "Released by {who}: {done}",
    },
    "zh": {
        "duplicate": "已收到过这次操作，未再执行。",
        "refused": "已拒绝：{reason}",
        "no_recommendation": "没有释放建议 {rec!r}",
        "not_in_directory": (
            "{service} 用户 {user!r} 不在 gpufleet 的用户目录中（notifications.users），"
            "请联系管理员添加"
        ),
        "gone": "{workload} 已不再占用 GPU，无需处理",
        "unknown_action": "未知操作 {action!r}",
        "may_not": (
            "{who} 无权对 {workload} 执行“{action}”：它属于{owner}，只有{may}"
            "（answers.operators）可以操作"
        ),
        "owner_user": "用户 {user}",
        "owner_team": "{team} 组",
        "may_release": "其用户或管理员",
        "may_other": "其用户、所在组或管理员",
        "kept": "{who} 已保留 {hours:g} 小时：{until} 之前不会自动释放 {workload}",
        "dismissed": "{who} 已忽略此建议",
        "off": (
            "未释放：{namespace} 未开启自动释放（{where}.mode），gpufleet 不会在此释放任何资源"
        ),
        "this_workload": "此作业",
        "dry_run": "演练模式（{where}.dry_run）：本应{what}，实际未释放",
        "release_what": "释放 {workload}",
        "failed": "{who} 发起的释放失败：{error}",
        "released": "{who} 已释放：{done}",
    },
}

#: the actions as the Chinese replies name them (the button labels, without the hours)
ACTION_WORDS = {"zh": {"keep": "保留", "release": "立即释放", "dismiss": "忽略"}}


def reply(language: str, key: str, **values: object) -> str:
    """The reply ``key`` in ``language`` (English for any other), formatted."""
    return REPLIES.get(language, REPLIES["en"])[key].format(**values)


def action_word(language: str, action: str) -> str:
    return ACTION_WORDS.get(language, {}).get(action, action)


def reply_languages(channels: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Service -> reply language, from the channels' (kind, language): ``zh`` where every
    channel of the service says zh, else ``en``; Feishu's and Lark's callbacks arrive on
    one route, so they count as one service (``feishu``)."""
    seen: dict[str, set[str]] = {}
    for kind, language in channels:
        service = "feishu" if kind in ("feishu", "lark") else kind
        seen.setdefault(service, set()).add(language)
    return {s: ("zh" if langs == {"zh"} else "en") for s, langs in seen.items()}
