"""An efficiency report as words: an email (HTML with a plain-text part) and a chat event.

The model is Job Defense Shield's and jobstats' emails: the facts for the period, the
trend, the worst jobs, what to do (the open recommendations). Sent with STARTTLS and
authentication (``reports.smtp``); nothing here logs the password.
"""

from __future__ import annotations

import smtplib
import ssl
import time
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from html import escape

from collector.efficiency_report import EfficiencyReport, Figures
from collector.notify.messages import Event, Facts
from collector.notify.report_settings import SmtpSettings


class MailError(Exception):
    """The SMTP server refused the message or could not be reached."""


def title(r: EfficiencyReport) -> str:
    who = f"team {r.name}" if r.subject == "team" else r.name
    day = time.strftime("%Y-%m-%d", time.gmtime(r.end - 1))
    return f"GPU efficiency report for {who}, to {day}"


def change(now: float, before: float, unit: str) -> str:
    if before == 0:
        return "new" if now else "no change"
    return f"{now - before:+,.2f} {unit} ({(now - before) / before:+.0%})"


def points(now: float, before: float) -> str:
    """A change of a fraction (0..1), in percentage points."""
    if before == 0:
        return "new" if now else "no change"
    return f"{(now - before) * 100:+.1f} points"


def fact_rows(r: EfficiencyReport) -> list[tuple[str, str, str]]:
    """(label, this period, against the period before)."""
    f, p, cur = r.figures, r.previous, r.currency
    rows = (
        ("GPU-hours held", "held_gpu_hours", "h"),
        ("Used (mean SM activity)", "sm_activity_mean", "%"),
        ("GPU-hours active", "active_gpu_hours", "h"),
        ("GPU-hours idle", "idle_gpu_hours", "h"),
        ("Money wasted (idle)", "wasted", cur),
        ("Cost", "cost", cur),
        ("Energy", "energy_kwh", "kWh"),
        ("Carbon", "carbon_kg", "kg CO2e"),
    )
    out = []
    for label, name, unit in rows:
        now, before = getattr(f, name), getattr(p, name)
        shown = f"{now:.1%}" if unit == "%" else f"{now:,.2f} {unit}"
        if name == "idle_gpu_hours":
            shown += f" ({f.idle_fraction:.0%} of held)"
        trend = change(now, before, unit) if unit != "%" else points(now, before)
        out.append((label, shown, trend))
    return out


def _job(key: str, f: Figures, currency: str) -> str:
    return f"{key}: {f.idle_gpu_hours:,.2f} idle GPU-hours, {f.wasted:,.2f} {currency} wasted"


def plain_text(r: EfficiencyReport) -> str:
    lines = [title(r), "", "This period (against the one before):"]
    lines += [f"  {label}: {value} ({trend})" for label, value, trend in fact_rows(r)]
    lines += ["", "Jobs that wasted the most:"]
    lines += [f"  {_job(j.workload_key, j.figures, r.currency)}" for j in r.worst_jobs] or [
        "  none"
    ]
    lines += ["", f"Released: {r.savings.summary}"]
    lines += ["", "Open recommendations:"]
    lines += [
        f"  {o.title} (saves {o.money_per_month:,.0f} {r.currency}/month)"
        for o in r.open_recommendations
    ] or ["  none"]
    return "\n".join(lines) + "\n"


def html(r: EfficiencyReport) -> str:
    rows = "".join(
        f"<tr><th align=left>{escape(a)}</th><td>{escape(b)}</td><td>{escape(c)}</td></tr>"
        for a, b, c in fact_rows(r)
    )
    jobs = (
        "".join(
            f"<li>{escape(_job(j.workload_key, j.figures, r.currency))}</li>" for j in r.worst_jobs
        )
        or "<li>none</li>"
    )
    recs = "".join(
        f"<li>{escape(o.title)} (saves {o.money_per_month:,.0f} {escape(r.currency)}/month)</li>"
        for o in r.open_recommendations
    )
    return (
        f"<!doctype html><html><body><h1>{escape(title(r))}</h1>"
        f"<table><tr><th></th><th>this period</th><th>against the one before</th></tr>{rows}"
        f"</table><h2>Jobs that wasted the most</h2><ul>{jobs}</ul>"
        f"<p>Released: {escape(r.savings.summary)}</p>"
        f"<h2>Open recommendations</h2><ul>{recs or '<li>none</li>'}</ul></body></html>"
    )


def compose(r: EfficiencyReport, sender: str, to: str) -> EmailMessage:
    """multipart/alternative: text/plain first, text/html last (the one mail readers prefer)."""
    message = EmailMessage()
    message["Subject"] = title(r)
    message["From"] = sender
    message["To"] = to
    message["Date"] = formatdate(r.end, usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or "gpufleet")
    message.set_content(plain_text(r))
    message.add_alternative(html(r), subtype="html")
    return message


def send(smtp: SmtpSettings, password: str, message: EmailMessage) -> None:
    """Send over SMTP, STARTTLS first (unless turned off), then AUTH when a user is set."""
    context = ssl.create_default_context(cafile=str(smtp.ca_file) if smtp.ca_file else None)
    try:
        with smtplib.SMTP(smtp.host, smtp.port, timeout=smtp.timeout_seconds) as client:
            if smtp.starttls:
                client.starttls(context=context)
            if smtp.username:
                client.login(smtp.username, password)
            client.send_message(message)
    except (smtplib.SMTPException, OSError) as err:
        raise MailError(
            f"reports.smtp ({smtp.host}:{smtp.port}): {type(err).__name__}: "
            f"{getattr(err, 'smtp_error', err)!s}"[:300]
        ) from err


def chat_event(r: EfficiencyReport) -> Event:
    """The report for the channels: one event, keyed by subject and period (sent once)."""
    f = r.figures
    summary = (
        f"{title(r)}: {f.held_gpu_hours:,.1f} GPU-hours held, {f.idle_gpu_hours:,.1f} "
        f"idle ({f.idle_fraction:.0%}), used {f.sm_activity_mean:.0%} (mean SM activity), "
        f"{f.wasted:,.2f} {r.currency} wasted"
    )
    labels = {"kind": "report", r.subject: r.name}
    facts = Facts(
        title=summary,
        user=r.name if r.subject == "user" else "",
        team=r.name if r.subject == "team" else "",
        detail=plain_text(r).split("\n", 2)[2].strip(),
    )
    key = f"report|{r.subject}|{r.name}|{r.start:.0f}|{r.end:.0f}"
    return Event(
        key=key,
        source="recommendations",
        kind="report",
        severity="info",
        labels=labels,
        facts=facts,
    )
