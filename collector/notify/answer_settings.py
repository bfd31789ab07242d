"""The ``answers`` settings section: buttons that answer back, and their secrets.

Slack and Feishu/Lark buttons call the collector back (``/v1/answers/slack``,
``/v1/answers/feishu``), verified by the app's signing secret, verification token or
encrypt key; the other services get signed links to the console's confirm page
(``/ui/answer``). A service whose secret is not set gets no buttons. Secrets come from
files (``*_file``) or the environment, never from logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.settings import ConfigError, read_secret


@dataclass(frozen=True)
class AnswerSettings:
    #: "Keep for 4 h": how long a kept workload is exempt from auto-release
    keep_seconds: float = 4 * 3600.0
    #: how long a signed link in a message stays good
    link_ttl_seconds: float = 24 * 3600.0
    #: directory users (notifications.users) who may answer for any workload; a
    #: workload's own user (and, except for releases, its team's users) may always
    operators: list[str] = field(default_factory=list)
    slack_signing_secret: str = field(default="", repr=False)
    slack_signing_secret_file: Path | None = None
    feishu_verification_token: str = field(default="", repr=False)
    feishu_verification_token_file: Path | None = None
    feishu_encrypt_key: str = field(default="", repr=False)
    feishu_encrypt_key_file: Path | None = None
    #: the key signed links are made with (any long random string)
    link_secret: str = field(default="", repr=False)
    link_secret_file: Path | None = None
    #: Teams: the bot's Microsoft app id; set, Teams cards get Action.Execute buttons whose
    #: invokes reach ``/v1/answers/teams`` (the bot's messaging endpoint), verified by
    #: Bot Framework's tokens (notify/bot_auth.py); unset, Teams gets signed links
    teams_bot_app_id: str = ""
    #: where the Bot Framework's OpenID metadata (and through it the signing keys) is
    teams_openid_url: str = "https://login.botframework.com/v1/.well-known/openidconfiguration"

    def __post_init__(self) -> None:
        for key in ("keep_seconds", "link_ttl_seconds"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"answers.{key}: must be > 0, got {getattr(self, key)}")


@dataclass(frozen=True)
class AnswerSecrets:
    """The secrets read from their files or the environment; ``repr`` shows none."""

    slack_signing_secret: str = field(default="", repr=False)
    feishu_verification_token: str = field(default="", repr=False)
    feishu_encrypt_key: str = field(default="", repr=False)
    link_secret: str = field(default="", repr=False)
    #: not a secret: the bot's app id, the audience its tokens must name
    teams_bot_app_id: str = ""

    @property
    def any(self) -> bool:
        return any(
            (
                self.slack_signing_secret,
                self.feishu_verification_token,
                self.feishu_encrypt_key,
                self.link_secret,
                self.teams_bot_app_id,
            )
        )

    def interactive(self, kind: str) -> bool:
        """Whether ``kind``'s buttons can call back (else: signed links, if any)."""
        if kind == "slack":
            return bool(self.slack_signing_secret)
        if kind in ("feishu", "lark"):
            return bool(self.feishu_verification_token or self.feishu_encrypt_key)
        if kind == "teams":
            return bool(self.teams_bot_app_id)
        return False


def resolve_secrets(settings: AnswerSettings) -> AnswerSecrets:
    def read(name: str) -> str:
        value = getattr(settings, name)
        return read_secret(value, getattr(settings, f"{name}_file"), f"answers.{name}") or ""

    return AnswerSecrets(
        read("slack_signing_secret"),
        read("feishu_verification_token"),
        read("feishu_encrypt_key"),
        read("link_secret"),
        settings.teams_bot_app_id,
    )
