"""Efficiency reports across restarts, on both ledger backends and a real SMTP server on
loopback: each period is mailed once, a period that ended while the collector was down is
mailed when it starts again, and a restart mails nothing twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from collector.config import CollectorSettings
from collector.ledger.store import Ledger
from collector.notify.report_log import ReportLog
from gpufleet.cli.report_mail import ReportMailer
from gpufleet.settings import load_settings
from tests.collector.answers.smtp_server import PASSWORD, USER, MailServer, mail_server
from tests.postgres import PostgresServer
from tests.postgres_fixture import postgres  # noqa: F401

DAY = 86400.0
D = 1_767_225_600.0  # 2026-01-01 00:00 UTC, a Thursday


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.new_database()


def settings_for(tmp: Path, smtp: MailServer) -> CollectorSettings:
    (tmp / "smtp-password").write_text(PASSWORD + "\n")
    config = tmp / "gpufleet.yaml"
    config.write_text(f"""
notifications:
  users:
    emeka: {{email: emeka@example.org, team: vision}}
reports:
  every: daily
  users: [emeka]
  smtp: {{host: {smtp.host}, port: {smtp.port}, ca_file: {smtp.ca_file}, username: {USER},
          password_file: {tmp / "smtp-password"}, sender: gpufleet@example.org}}
""")
    return load_settings(CollectorSettings, config, {}, {})


def run_collector(url: str, settings: CollectorSettings, *times: float) -> list[float]:
    """One collector's life: open the ledger, tick the reports at ``times``, stop; the
    ends of the periods it reported on."""
    clock = [times[0]]
    with Ledger.open(url) as ledger:
        mailer = ReportMailer(settings, ledger, "USD", None, lambda: clock[0])
        ends = []
        for t in times:
            clock[0] = t
            ends += [r.end for r in mailer.tick()]
        return ends


def wait_for_mails(smtp: MailServer, count: int) -> list[str]:
    deadline = time.monotonic() + 10
    while len(smtp.received) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return [str(m.message["Subject"]) for m in smtp.received]


def test_each_period_is_mailed_once_and_one_missed_while_down_when_it_starts(
    tmp_path: Path, ledger_url: str
) -> None:
    with mail_server(tmp_path) as smtp:
        settings = settings_for(tmp_path, smtp)
        # first start: the day already over is not reported (gpufleet was not reporting on
        # it); the next is, just after midnight, and once however often it ticks
        assert run_collector(ledger_url, settings, D + 0.5 * DAY, D + DAY + 60, D + DAY + 900) == [
            D + DAY
        ]
        assert run_collector(ledger_url, settings, D + DAY + 3600) == []  # a restart: none again
        # down through three midnights: at its start, the three days missed, oldest first
        restart = D + 4 * DAY + 1800
        assert run_collector(ledger_url, settings, restart, restart + 60) == [
            D + 2 * DAY,
            D + 3 * DAY,
            D + 4 * DAY,
        ]
        assert run_collector(ledger_url, settings, restart + 120) == []
        subjects = wait_for_mails(smtp, 4)
    assert subjects == [
        f"GPU efficiency report for emeka, to 2026-01-0{day}" for day in (1, 2, 3, 4)
    ]
    assert all(m.rcpt_tos == ["emeka@example.org"] for m in smtp.received)
    with Ledger.open(ledger_url) as ledger:
        recorded = ReportLog(ledger).sent()
    assert [(end, outcome) for _, _, _, end, outcome in recorded] == [
        (D, "skipped"),
        *((D + k * DAY, "sent") for k in (1, 2, 3, 4)),
    ]
