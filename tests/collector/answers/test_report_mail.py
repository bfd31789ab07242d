"""Efficiency reports: two simulated days, then the daily report for one user and one team,
by email to a real SMTP server on loopback (STARTTLS and AUTH required, a self-signed
certificate) and to a Slack channel, with figures equal to ``gpufleet report --by user``
and ``--by team`` for the same period; ``gpufleet report --email-preview`` prints the same."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from email import message_from_string, policy
from pathlib import Path
from typing import Any

import pytest

from agent.model import Workload
from agent.sources.simulated.source import SimulatedFleet, build_fleet
from collector.config import CollectorSettings
from gpufleet.cli.collector import build_collector, serve
from gpufleet.cli.demo_fleet import SimClock
from gpufleet.settings import load_settings
from tests.collector.answers.smtp_server import PASSWORD, USER, MailServer, mail_server
from tests.collector.notify.fake_services import FakeService
from tests.e2e.collector_process import ROOT
from tests.e2e.fleet_rig import TOKEN, build_agent, free_port

pytestmark = pytest.mark.slow
STEP = 300.0
DAY = 86400.0


def write_config(tmp: Path, slack: FakeService, smtp: MailServer) -> Path:
    (tmp / "slack-url").write_text(slack.url + "\n")
    (tmp / "smtp-password").write_text(PASSWORD + "\n")
    config = tmp / "gpufleet.yaml"
    config.write_text(f"""
notifications:
  channels:
    - {{name: slack-ml, kind: slack, url_file: {tmp / "slack-url"}}}
  kinds: [release_idle]
  users:
    emeka: {{slack: U0EMEKA, email: emeka@example.org, team: vision}}
  teams:
    search: {{slack: S0SEARCH, email: search-team@example.org}}
reports:
  every: daily
  users: [emeka]
  teams: [search]
  smtp: {{host: {smtp.host}, port: {smtp.port}, ca_file: {smtp.ca_file}, username: {USER},
          password_file: {tmp / "smtp-password"}, sender: gpufleet@example.org}}
""")
    return config


def gpufleet_report(db: Path, config: Path, *args: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpufleet",
            "report",
            "--db",
            str(db),
            "--config",
            str(config),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def true_sm_mean(
    fleet: SimulatedFleet, subject: str, name: str, t0: float, t1: float, epoch: float
) -> float:
    """The simulator's SM activity at each sample time in [t0, t1) of the GPUs the subject
    held then, over the held sample time (a reading holds until the next sample)."""
    held = busy = 0.0
    first = epoch + math.ceil((t0 - epoch) / STEP) * STEP
    for uuid in fleet.gpu_uuids:
        t = first
        while t < t1:
            holder = fleet.holder(uuid, t)
            if holder is not None and _true_subject(holder, subject) == name:
                held += STEP
                busy += fleet.true_activity(uuid, t)[0] * STEP
            t += STEP
    return busy / held


def _true_subject(holder: Workload, subject: str) -> str | None:
    """Who the simulator made a workload's user or team: a Slurm job carries its user,
    a pod names its user in its labels (``gpufleet.io/owner``), as a real pod would."""
    if subject == "user":
        return holder.user or holder.labels.get("gpufleet.io/owner")
    return str(getattr(holder, subject))


def row(report: dict[str, Any], group: str) -> dict[str, Any]:
    (found,) = [r for r in report["rows"] if r["group"] == group]
    return found


def test_daily_report_by_email_and_chat_equals_gpufleet_report(tmp_path: Path) -> None:
    fleet = build_fleet()
    start = fleet.nodes[0].epoch
    clock = SimClock(start)
    slack = FakeService("slack", now=clock)
    with mail_server(tmp_path) as smtp:
        config = write_config(tmp_path, slack, smtp)
        port = free_port()
        overrides = {
            "server.port": port,
            "server.tokens": [TOKEN],
            "ledger.url": str(tmp_path / "ledger.db"),
            "analysis.stale_after_seconds": 3 * STEP,
        }
        settings = load_settings(CollectorSettings, config, {}, overrides)
        collector = build_collector(settings, clock, tokens=frozenset([TOKEN]))
        server = serve(collector)
        url = f"http://127.0.0.1:{port}"
        agents = [build_agent(n, url, clock, STEP, tmp_path / n.name) for n in fleet.nodes]
        try:
            end = start + 2 * DAY
            tick = 0
            while start + tick * STEP <= end:
                clock.set(start + tick * STEP)
                for agent in agents:
                    agent.sampler.tick()
                tick += 1
                if tick % 12 == 0:
                    for agent in agents:
                        agent.shipper.flush()
                    collector.core.applier.tick()
            for agent in agents:
                agent.shipper.flush()
            collector.core.applier.tick(flush=True)
            assert collector.reports is not None
            reports = collector.reports.send_all(end, clock())
            collector.alert()  # delivers the chat copies
        finally:
            for agent in agents:
                agent.shipper.close()
            server.should_exit = True
            collector.stop()
            slack.close()
        mails = list(smtp.received)

    db, period = tmp_path / "ledger.db", ["--end", str(end), "--period", "24h"]
    by_team = json.loads(gpufleet_report(db, config, "--by", "team", "--format", "json", *period))
    by_user = json.loads(gpufleet_report(db, config, "--by", "user", "--format", "json", *period))
    emeka, search = (r for r in reports)
    for ours, theirs in ((emeka, row(by_user, "emeka")), (search, row(by_team, "search"))):
        f = ours.figures
        assert (
            f.idle_gpu_hours,
            f.wasted,
            f.held_gpu_hours,
            f.cost,
            f.energy_kwh,
            f.carbon_kg,
        ) == (
            theirs["idle_gpu_hours"],
            theirs["waste"],
            theirs["gpu_hours"],
            theirs["cost"],
            theirs["energy_kwh"],
            theirs["carbon_kg"],
        )
        assert f.sm_activity_mean == theirs["sm_activity_mean"]
        assert f.held_gpu_hours > 0 and f.idle_gpu_hours > 0
        assert ours.previous.held_gpu_hours > 0  # the day before: the trend has a base
    assert search.worst_jobs and search.open_recommendations == []  # evaluate never ran
    # "used" is the mean SM activity over the held time: the simulator's, sample by sample
    for ours, subject in ((emeka, "user"), (search, "team")):
        truth = true_sm_mean(fleet, subject, ours.name, ours.start, ours.end, start)
        assert ours.figures.sm_activity_mean == pytest.approx(truth, abs=1e-3)
    assert search.figures.sm_activity_mean > 0.01  # a team that used its GPUs, some

    # by email: STARTTLS, authenticated, to the directory's addresses, text and HTML
    assert sorted(m.rcpt_tos[0] for m in mails) == ["emeka@example.org", "search-team@example.org"]
    for mail in mails:
        assert mail.tls and mail.authenticated_as == USER
        msg = mail.message
        assert msg.get_content_type() == "multipart/alternative"
        assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]
        assert msg["From"] == "gpufleet@example.org" and msg["Subject"].startswith(
            "GPU efficiency report for "
        )
    (team_mail,) = [m.message for m in mails if m.rcpt_tos == ["search-team@example.org"]]
    plain = team_mail.get_body(("plain",)).get_content().replace("\r\n", "\n")  # type: ignore[union-attr]
    html = team_mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    idle = f"{search.figures.idle_gpu_hours:,.2f} h"
    assert f"GPU-hours idle: {idle}" in plain and idle in html
    assert f"{search.figures.wasted:,.2f} USD" in plain
    assert f"Used (mean SM activity): {search.figures.sm_activity_mean:.1%}" in plain
    assert search.worst_jobs[0].workload_key in plain and search.worst_jobs[0].workload_key in html

    # to chat: one message per report, naming the figures
    titles = [r.json["blocks"][0]["text"]["text"] for r in slack.accepted]
    assert any(t.startswith("GPU efficiency report for team search") for t in titles), titles
    assert any(t.startswith("GPU efficiency report for emeka") for t in titles), titles

    # gpufleet report --email-preview prints the same email
    preview = gpufleet_report(db, config, "--email-preview", "--team", "search", "--end", str(end))
    printed = message_from_string(preview, policy=policy.default)
    assert printed["To"] == "search-team@example.org"
    assert printed.get_body(("plain",)).get_content() == plain  # type: ignore[union-attr]
