"""What ``gpufleet demo`` prints: the URLs, a live summary, and a final one."""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from collector.records import OPEN_STATUSES, GpuState, Recommendation
from gpufleet.cli.demo_fleet import Demo


@dataclass(frozen=True)
class Summary:
    sim_time: float
    gpus: int
    by_state: dict[str, int]
    utilisation: float | None
    #: active GPUs over GPUs with fresh data now: the share the target is judged on (the
    #: report's and console's utilisation is the same share over GPU time)
    active_share: float | None
    #: analysis.utilisation_target (0..1)
    utilisation_target: float
    idle_now: int
    waste_per_hour: float
    waste_total: float
    energy_kwh: float
    carbon_kg: float
    currency: str
    recommendations: list[Recommendation]
    #: simulated seconds per wall second lately (None before the live run), and asked
    speed_now: float | None = None
    speed_asked: float = 0.0


def summarise(demo: Demo) -> Summary:
    service = demo.collector.core.service
    now = demo.clock()
    views = service.fleet(now)
    by_state = {s.value: 0 for s in GpuState}
    for view in views:
        by_state[view.state.value] += 1
    known = [
        v.sm_activity
        for v in views
        if v.state is not GpuState.UNKNOWN and v.sm_activity is not None
    ]
    idle = [v for v in views if v.state in (GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED)]
    fresh = len(views) - by_state[GpuState.UNKNOWN.value]
    rates = service.rates
    totals = service.fleet_totals()
    return Summary(
        sim_time=now,
        gpus=len(views),
        by_state=by_state,
        utilisation=sum(known) / len(known) if known else None,
        active_share=by_state[GpuState.ACTIVE.value] / fresh if fresh else None,
        utilisation_target=demo.collector.settings.analysis.utilisation_target,
        idle_now=len(idle),
        waste_per_hour=sum(rates.view_price_per_hour(v) for v in idle),
        waste_total=sum(w.waste for w in totals.waste),
        energy_kwh=sum(e.energy_joules for e in totals.energy) / 3.6e6,
        carbon_kg=sum(e.carbon_grams for e in totals.energy) / 1000.0,
        currency=totals.currency,
        recommendations=service.recommendations(OPEN_STATUSES),
        speed_now=demo.pacer.speed_now(),
        speed_asked=demo.pacer.speed,
    )


def render(demo: Demo, summary: Summary, final: bool = False) -> Group:
    cur = summary.currency
    util = "n/a" if summary.utilisation is None else f"{summary.utilisation:.0%}"
    head = Table.grid(padding=(0, 2))
    head.add_row(
        "simulated time",
        time.strftime("%Y-%m-%d %H:%M", time.gmtime(summary.sim_time)) + " UTC" + _pace(summary),
    )
    head.add_row(
        "GPUs", f"{summary.gpus}: " + ", ".join(f"{n} {s}" for s, n in summary.by_state.items())
    )
    active = "n/a" if summary.active_share is None else f"{summary.active_share:.0%}"
    target = f"target {summary.utilisation_target:.0%}: gpufleet report --plans"
    head.add_row(
        "fleet utilisation", f"{util} mean SM activity; {active} of GPUs active ({target})"
    )
    head.add_row(
        "idle GPUs now", f"{summary.idle_now}, wasting {summary.waste_per_hour:,.2f} {cur}/h"
    )
    head.add_row("waste so far", f"{summary.waste_total:,.2f} {cur}")
    head.add_row("energy so far", f"{summary.energy_kwh:,.1f} kWh, {summary.carbon_kg:,.1f} kgCO2e")
    recs = Table(title=f"{'Open' if final else 'Top'} recommendations", expand=False)
    # the month is the top of a range: the window seen says how much to trust it
    columns = ("kind", "subject", f"saves {cur}/month", "seen for", "kWh/month", "kgCO2e/month")
    for column in columns:
        recs.add_column(column)
    for rec in summary.recommendations[: 20 if final else 6]:
        s = rec.savings
        recs.add_row(
            rec.kind.value,
            rec.subject,
            f"{s.money_per_month_low:,.0f}-{s.money_per_month:,.0f}",
            f"{s.evidence_seconds / 3600:,.1f} h",
            f"{s.energy_kwh_per_month:,.0f}",
            f"{s.carbon_kg_per_month:,.0f}",
        )
    return Group(head, recs)


def _pace(summary: Summary) -> str:
    """How fast simulated time runs; below what was asked when the machine cannot carry it."""
    if summary.speed_now is None:
        return ""
    text = f", running at {summary.speed_now:.0f}x"
    if summary.speed_now < 0.9 * summary.speed_asked:
        text += f" (asked {summary.speed_asked:.0f}x: the agents' deliveries set the pace)"
    return text


def print_urls(demo: Demo) -> None:
    console = Console()
    console.print(
        f"collector   {demo.url}  (API: /v1/fleet /v1/workloads /v1/recommendations, "
        f"/metrics, /openapi.json, /docs)"
    )
    console.print(
        f"API token   {demo.token}  (this demo's only; "
        f"curl -H 'Authorization: Bearer {demo.token}' {demo.url}/v1/fleet)"
    )
    console.print(f"console     {demo.url}/ui/#token={demo.token}  (signs this browser tab in)")
    for agent in demo.agents:
        console.print(f"agent       {agent.metrics_url}")


def print_summary(demo: Demo, final: bool = False) -> None:
    console = Console()
    (console if console.is_terminal else Console(width=160)).print(
        render(demo, summarise(demo), final)
    )


def run_live(demo: Demo, args: argparse.Namespace, stop: threading.Event) -> None:
    """Refresh the summary every second until ``--duration`` passes or Ctrl-C."""
    print_urls(demo)
    deadline = None if args.duration is None else time.monotonic() + args.duration
    console = Console()
    try:
        if args.plain or not console.is_terminal:
            _wait(deadline, stop)
            return
        with Live(render(demo, summarise(demo)), console=console, refresh_per_second=1) as live:
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                stop.wait(1.0)
                live.update(render(demo, summarise(demo)))
    except KeyboardInterrupt:
        pass


def _wait(deadline: float | None, stop: threading.Event) -> None:
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        stop.wait(0.5)
