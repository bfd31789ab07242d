"""Who owns a workload, and how to mention them on each chat service.

The owner is the workload's user where the directory knows them, else its team's contact
(``notifications.users`` / ``notifications.teams``). A person or team without an id for a
service is not mentioned there: an unknown owner gets no mention, never a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collector.notify.messages import Mention
from collector.notify.settings import ContactSettings

#: the contact field each channel kind reads (Lark is Feishu's international twin)
ID_FIELD = {"slack": "slack", "teams": "teams", "feishu": "feishu", "lark": "feishu",
            "dingtalk": "dingtalk", "wecom": "wecom", "discord": "discord"}  # fmt: skip


class Directory:
    def __init__(
        self,
        users: Mapping[str, ContactSettings] | None = None,
        teams: Mapping[str, ContactSettings] | None = None,
    ) -> None:
        self.users = dict(users or {})
        self.teams = dict(teams or {})

    def owner(self, user: str, team: str) -> ContactSettings | None:
        """The user's contact, else the team's; None when neither is in the directory."""
        return self.users.get(user) if user in self.users else self.teams.get(team)

    def mentions(self, user: str, team: str, kind: str) -> list[Mention]:
        """How to mention the owner on ``kind``: the user's ids, else the team's."""
        for contact in (self.users.get(user), self.teams.get(team)):
            found = contact_mentions(contact, kind) if contact else []
            if found:
                return found
        return []

    def who(self, kind: str, service_id: str) -> str:
        """The directory user whose id on ``kind`` is ``service_id``; "" when none is."""
        field_name = ID_FIELD.get(kind)
        for name, contact in self.users.items():
            if field_name and service_id and getattr(contact, field_name) == service_id:
                return name
        return ""

    def team_of(self, user: str) -> str:
        contact = self.users.get(user)
        return contact.team if contact else ""

    def team_channels(self, team: str) -> list[str]:
        contact = self.teams.get(team)
        return list(contact.channels) if contact else []


def contact_mentions(contact: ContactSettings, kind: str) -> list[Mention]:
    out: list[Mention] = []
    field_name = ID_FIELD.get(kind)
    if field_name and getattr(contact, field_name):
        out.append(Mention(getattr(contact, field_name), contact.name))
    if kind == "dingtalk" and contact.dingtalk_mobile and not out:
        out.append(Mention(contact.dingtalk_mobile, contact.name, by_mobile=True))
    return out


def unique(mentions: Sequence[Mention]) -> tuple[Mention, ...]:
    """Each mention once, in order."""
    return tuple(dict.fromkeys(mentions))
