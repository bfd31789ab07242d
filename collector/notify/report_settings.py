"""The ``reports`` settings section: efficiency reports per user and per team, to chat and
by email (SMTP with STARTTLS and authentication). The SMTP password comes from a file or
the environment, never from logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpufleet.settings import ConfigError


@dataclass(frozen=True)
class SmtpSettings:
    host: str = ""
    #: 587 is submission with STARTTLS
    port: int = 587
    #: upgrade the connection with STARTTLS before authenticating (refused without it)
    starttls: bool = True
    #: a CA bundle for the server's certificate; None: the system's
    ca_file: Path | None = None
    username: str = ""
    password: str = field(default="", repr=False)
    password_file: Path | None = None
    #: the From: address
    sender: str = ""
    timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.host and not self.sender:
            raise ConfigError("reports.smtp.sender: set the From: address (e.g. gpufleet@...)")
        if not 0 < self.port < 65536:
            raise ConfigError(f"reports.smtp.port: must be 1..65535, got {self.port}")


@dataclass(frozen=True)
class ReportSettings:
    #: daily: the last UTC day, sent after midnight; weekly: the last 7 days, on Mondays
    every: Literal["daily", "weekly"] = "weekly"
    #: directory users (notifications.users) and teams (notifications.teams) to report on
    users: list[str] = field(default_factory=list)
    teams: list[str] = field(default_factory=list)
    #: to the notification channels (routed like any event: the team's channels too)
    to_chat: bool = True
    #: to the directory's email address of the user, or of the team
    by_email: bool = True
    smtp: SmtpSettings = field(default_factory=SmtpSettings)
