"""Efficiency reports on the scheduler: after each period (a UTC day, or a week from Monday
00:00 UTC) one report per configured user and team, to the channels and by email; and
``gpufleet report --email-preview`` to print one.

Each subject's periods are claimed in the ledger before they are sent (report_log.py): a
period that ended while the collector was down is sent when it starts, and none twice
across restarts (the chat copy is keyed by subject and period in the outbox as well).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from collector.config import CollectorSettings
from collector.efficiency_report import EfficiencyReport, Subject, efficiency_report
from collector.ledger.store import Ledger
from collector.notify.messages import Event
from collector.notify.report_log import ReportLog
from collector.notify.report_mail import MailError, chat_event, compose, send
from gpufleet.settings import read_secret

log = logging.getLogger(__name__)
DAY_SECONDS = 86400.0
#: 1970-01-01 was a Thursday: Mondays are 4 days off the epoch's week grid
MONDAY_OFFSET_SECONDS = 4 * DAY_SECONDS


def period_end(now: float, every: str) -> float:
    """The end of the newest complete period at ``now``."""
    if every == "daily":
        return now // DAY_SECONDS * DAY_SECONDS
    week = 7 * DAY_SECONDS
    return (now - MONDAY_OFFSET_SECONDS) // week * week + MONDAY_OFFSET_SECONDS


class ReportMailer:
    def __init__(
        self,
        settings: CollectorSettings,
        ledger: Ledger,
        currency: str,
        announce: Callable[[Event, float], int] | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.currency = currency
        self.announce = announce
        self.clock = clock
        smtp = settings.reports.smtp
        self.password = read_secret(smtp.password, smtp.password_file, "reports.smtp.password")
        self.log = ReportLog(ledger)
        #: the newest period end looked at; the ledger is asked again after the next one
        self.checked_until = float("-inf")

    def tick(self) -> list[EfficiencyReport]:
        """Send the reports of every period that ended and was not sent (claimed) yet."""
        now = self.clock()
        every = self.settings.reports.every
        end = period_end(now, every)
        if end <= self.checked_until:
            return []
        self.checked_until = end
        out = []
        for subject, name in self.subjects():
            for due in self.log.due(subject, name, every, end, now):
                if self.log.claim(subject, name, every, due, now):
                    out.append(self.send_one(subject, name, due, now))
        return out

    def subjects(self) -> list[tuple[Subject, str]]:
        r = self.settings.reports
        return [*(("user", u) for u in r.users), *(("team", t) for t in r.teams)]

    def send_all(self, end: float, now: float) -> list[EfficiencyReport]:
        """Every subject's report for the period ending at ``end``, unrecorded (a preview
        or a resend by hand; ``tick`` is what claims periods)."""
        return [self.send_one(subject, name, end, now) for subject, name in self.subjects()]

    def send_one(self, subject: Subject, name: str, end: float, now: float) -> EfficiencyReport:
        report = self.report(subject, name, end, now)
        if self.settings.reports.to_chat and self.announce is not None:
            self.announce(chat_event(report), now)
        address = self.address(subject, name)
        if self.settings.reports.by_email and address and self.settings.reports.smtp.host:
            self.mail(report, address)
        return report

    def report(self, subject: Subject, name: str, end: float, now: float) -> EfficiencyReport:
        every = self.settings.reports.every
        return efficiency_report(self.ledger, subject, name, end, every, now, self.currency)

    def address(self, subject: Subject, name: str) -> str:
        notify = self.settings.notifications
        contact = (notify.users if subject == "user" else notify.teams).get(name)
        return contact.email if contact else ""

    def mail(self, report: EfficiencyReport, to: str) -> None:
        smtp = self.settings.reports.smtp
        try:
            send(smtp, self.password or "", compose(report, smtp.sender, to))
        except MailError as err:
            log.error(
                "efficiency report for %s %s not emailed: %s", report.subject, report.name, err
            )
