"""Alerting wired together: notifier, auto-release engine, Alertmanager route, metrics.

``build_alerting`` is called once by the collector's entry point; ``Alerting.step`` runs on
the scheduler: recommendation changes to the outbox, one auto-release pass, delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import httpx
from starlette.routing import BaseRoute

from collector.actions.answer_log import AnswerLog
from collector.actions.answers import AnswerDesk, Desk
from collector.actions.engine import ActionEngine, Executors
from collector.actions.executors import Executor, SlurmExecutor, WebhookExecutor
from collector.actions.log import ActionLog
from collector.actions.policy import Candidate, data_problem, deadline_of, exempt_by_settings
from collector.actions.settings import ActionSettings
from collector.cluster.outbox_claims import Holder
from collector.config import CollectorSettings
from collector.http.alertmanager import alertmanager_route
from collector.http.answers import AnswerRoutes
from collector.http.auth import Gate, Token
from collector.ledger.store import Ledger
from collector.notify.answer_settings import resolve_secrets
from collector.notify.buttons import Buttons
from collector.notify.changes import FleetIndex, ReleasePlan, gpu_name
from collector.notify.claims import LeaderClaims
from collector.notify.delivery import Notifier
from collector.notify.directory import Directory
from collector.notify.messages import Links
from collector.notify.outbox import Outbox
from collector.notify.settings import resolve_channel
from collector.notify.stats import NotifyExporter
from collector.records import GpuView, Recommendation, WorkloadRef
from gpufleet.settings import read_secret

log = logging.getLogger(__name__)


#: sent messages are kept this long (the rate window needs only a minute of them)
KEEP_SENT_SECONDS = 30 * 24 * 3600.0
PRUNE_EVERY_SECONDS = 3600.0


@dataclass
class Alerting:
    notifier: Notifier | None
    engine: ActionEngine | None
    routes: list[BaseRoute] = field(default_factory=list)
    exporter: NotifyExporter | None = None
    pruned_at: float = float("-inf")
    #: the auto-release policies, so that messages say which applies and when
    actions: ActionSettings = field(default_factory=ActionSettings)

    def step(self, fleet: Sequence[GpuView], recs: Sequence[Recommendation], now: float) -> None:
        if self.notifier is not None:
            self.notifier.observe(recs, fleet_index(fleet, self.actions, now), now)
        if self.engine is not None:
            self.engine.run(fleet, recs, now)
        if self.notifier is not None:
            self.notifier.deliver(now)
            if now - self.pruned_at >= PRUNE_EVERY_SECONDS:
                self.notifier.outbox.prune(now - KEEP_SENT_SECONDS)
                self.pruned_at = now


def fleet_index(
    fleet: Sequence[GpuView], actions: ActionSettings | None = None, now: float = 0.0
) -> FleetIndex:
    refs = {ref.key: ref for view in fleet for ref in view.workloads}
    names = {view.uuid: gpu_name(view) for view in fleet}
    plans = release_plans(fleet, actions, now) if actions is not None else {}
    return FleetIndex(refs, {view.uuid: view.model for view in fleet}, names, plans)


def release_plans(
    fleet: Sequence[GpuView], actions: ActionSettings, now: float
) -> dict[str, ReleasePlan]:
    """Each idle holder's auto-release plan, by actions.policy's own rule (deadline_of):
    the earliest deadline, since the first-seen time that may push it later is the
    engine's to know. None for workloads exempt by settings, active or stale ones."""
    held: dict[str, tuple[WorkloadRef, list[GpuView]]] = {}
    for view in fleet:
        for ref in view.workloads:
            held.setdefault(ref.key, (ref, []))[1].append(view)
    out = {}
    for key, (ref, views) in held.items():
        policy = actions.policy_of(ref)
        exempt = exempt_by_settings(ref, actions.exempt_namespaces, actions.exempt_users)
        if policy.mode == "off" or exempt:
            continue
        if data_problem(views, now, actions.max_data_age_seconds) is not None:
            continue
        _, deadline = deadline_of(Candidate(ref, tuple(views), float("-inf")), policy)
        out[key] = ReleasePlan(policy.mode, policy.dry_run, deadline, actions.exempt_key)
    return out


def build_alerting(
    settings: CollectorSettings,
    ledger: Ledger,
    clock: Callable[[], float],
    tokens: Gate | Collection[str | Token],
    transport: httpx.BaseTransport | None = None,
    fleet: Callable[[float], Sequence[GpuView]] | None = None,
    leader: Callable[[], Holder | None] | None = None,
) -> Alerting | None:
    """None when no channel is configured and every auto-release policy is off.
    ``fleet``: the live fleet, for answers from chat (without it: no answer routes).
    ``leader``: with replicas, who holds the leader lease now; messages are then sent
    only under its claims (collector/notify/claims.py)."""
    notify = settings.notifications
    if not notify.channels and not settings.actions.any_enabled():
        return None
    transport = transport or httpx.HTTPTransport()
    notifier = None
    routes: list[BaseRoute] = []
    exporter = None
    secrets = resolve_secrets(settings.answers)
    links = Links(settings.server.public_url, settings.server.grafana_url)
    buttons = Buttons(settings.answers, secrets, links, clock) if secrets.any else None
    if notify.channels:
        channels = [resolve_channel(c) for c in notify.channels]
        outbox = Outbox(ledger)
        # a claim outlives the slowest send: the service's timeout, four times over
        claims = (
            LeaderClaims(ledger, leader, 4 * notify.timeout_seconds) if leader is not None else None
        )
        notifier = Notifier(notify, channels, outbox, links, transport, clock, buttons, claims)
        gate = Gate.of(tokens, settings.server)
        routes.append(alertmanager_route(notifier.announce, gate, clock))
        exporter = NotifyExporter(
            notifier.stats, {c.name: c.kind for c in channels}, notifier.outbox.pending_by_channel
        )
    engine = None
    announce = notifier.announce if notifier is not None else None
    executors = build_executors(settings.actions, transport)
    if settings.actions.any_enabled():
        kept = AnswerLog(ledger).kept_until
        engine = ActionEngine(settings.actions, ActionLog(ledger), executors, announce, kept)
    if secrets.any and fleet is not None:
        directory = Directory(notify.users, notify.teams)
        desk = Desk(
            settings.answers, settings.actions, ledger, directory, executors, fleet, announce
        )
        routes += AnswerRoutes(AnswerDesk(desk), secrets, transport, clock).routes()
    return Alerting(notifier, engine, routes, exporter, actions=settings.actions)


def build_executors(settings: ActionSettings, transport: httpx.BaseTransport) -> Executors:
    kubernetes: Executor | None = None
    if settings.kubernetes.enabled:
        from collector.actions.kubernetes import KubernetesExecutor, api_client

        kubernetes = KubernetesExecutor(
            api_client(settings.kubernetes), settings.kubernetes, settings.exempt_key
        )
    slurm = SlurmExecutor(settings.slurm) if settings.slurm.enabled else None
    hook = settings.webhook
    url = read_secret(hook.url, hook.url_file, "actions.webhook.url")
    webhook = None
    if url:
        secret = read_secret(hook.secret, hook.secret_file, "actions.webhook.secret") or ""
        webhook = WebhookExecutor(url, secret, transport, hook.timeout_seconds)
    return Executors(kubernetes, slurm, webhook)
