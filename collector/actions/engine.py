"""Auto-release: warn, then act on GPUs held idle past the deadline, never on doubt.

``ActionEngine.run`` looks at the standing release recommendations and the live fleet
view. For each workload whose namespace (or Slurm partition) has a policy other than
``off`` it takes at most one step per pass (actions_policy.decide): a warning at each
configured point, then at the deadline the action (``enforce``), a dry-run notice
(``dry_run``) or a notice (``notify``). Every step is recorded in the ledger once per
idle episode before it is carried out, and announced through the notifier. Exempt
workloads (namespace, user, pod label/annotation) and targets that are gone are
recorded as skipped; unknown or stale data is recorded as skipped and nothing is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collector.actions.executors import Executor, ExecutorError, Inspection, Target
from collector.actions.log import ActionLog, LogEntry
from collector.actions.policy import Candidate, Decision, deadline_of, decide, exempt_by_settings
from collector.actions.settings import ActionSettings, PolicySettings
from collector.notify.changes import gpu_name
from collector.notify.messages import Event, Facts
from collector.records import (
    LIVE_STATUSES,
    GpuView,
    Recommendation,
    RecommendationKind,
    WorkloadRef,
)

log = logging.getLogger(__name__)
#: after these nothing more happens in an idle episode (stale data only postpones)
FINAL_STAGES = frozenset({"act", "skip:exempt", "skip:gone"})
SEVERITY = {"warned": "warning", "acted": "warning", "failed": "critical"}
EVENT_KIND = {"warned": "warning", "acted": "acted", "failed": "failed", "dry_run": "dry_run",
              "notify_only": "notify_only", "skipped": "skipped"}  # fmt: skip


@dataclass(frozen=True)
class Executors:
    kubernetes: Executor | None = None
    slurm: Executor | None = None
    webhook: Executor | None = None

    def for_target(self, target: Target) -> Executor | None:
        own = {"pod": self.kubernetes, "slurm": self.slurm}.get(target.kind)
        return own or self.webhook


@dataclass(frozen=True)
class Step:
    rec: Recommendation
    ref: WorkloadRef
    views: tuple[GpuView, ...]
    policy: PolicySettings
    decision: Decision


class ActionEngine:
    def __init__(
        self,
        settings: ActionSettings,
        actions_log: ActionLog,
        executors: Executors,
        announce: Callable[[Event, float], int] | None = None,
        kept: Callable[[str, float], float | None] | None = None,
    ) -> None:
        """``kept(workload_key, now)``: when a "Keep" answered from chat ends, None when
        none runs (answer_log.AnswerLog.kept_until); a kept workload gets no step."""
        self.settings = settings
        self.kept = kept
        self.log = actions_log
        self.executors = executors
        self.announce = announce

    def run(
        self, fleet: Sequence[GpuView], recs: Sequence[Recommendation], now: float
    ) -> list[LogEntry]:
        """One pass; returns the entries recorded in it."""
        holders: dict[str, tuple[WorkloadRef, list[GpuView]]] = {}
        for view in fleet:
            for ref in view.workloads:
                holders.setdefault(ref.key, (ref, []))[1].append(view)
        first_seen = self.log.touch(holders, now)
        out = []
        for rec in recs:
            if rec.kind is not RecommendationKind.RELEASE_IDLE or rec.status not in LIVE_STATUSES:
                continue
            held = holders.get(rec.workload_key)
            if held is None:
                continue
            step = self._next_step(rec, held[0], tuple(held[1]), first_seen[rec.workload_key], now)
            if step is not None:
                out.append(self._carry_out(step, now))
        return out

    def _next_step(
        self,
        rec: Recommendation,
        ref: WorkloadRef,
        views: tuple[GpuView, ...],
        first_seen: float,
        now: float,
    ) -> Step | None:
        policy = self.settings.policy_of(ref)
        if policy.mode == "off":
            return None
        if self.kept is not None and self.kept(ref.key, now) is not None:
            return None  # kept from chat: no warning, no action until the keep ends
        candidate = Candidate(ref, views, first_seen)
        hint = rec.evidence.get("idle_since")
        hint = float(hint) if isinstance(hint, int | float) else rec.opened_at
        start = max((v.idle_since for v in views if v.idle_since is not None), default=hint)
        done = {**self.log.stages(ref.key, hint), **self.log.stages(ref.key, start)}
        if done.keys() & FINAL_STAGES:
            return None
        decision = decide(candidate, policy, done, now, self.settings.max_data_age_seconds, hint)
        if decision is None or decision.stage in done:
            return None
        return Step(rec, ref, views, policy, decision)

    def _carry_out(self, step: Step, now: float) -> LogEntry:
        decision = step.decision
        target = Target.of(step.ref)
        if decision.stage == "skip:stale":
            return self._finish(step, "skipped", "stale", Inspection(True, False, ""), now)
        executor = self.executors.for_target(target)
        try:
            seen = executor.inspect(target) if executor else Inspection(True, False, "")
        except ExecutorError as err:
            seen = Inspection(True, False, f"(cannot inspect: {err})")
        s = self.settings
        if exempt_by_settings(step.ref, s.exempt_namespaces, s.exempt_users) or seen.exempt:
            return self._finish(step, "skipped", "exempt", seen, now, stage="skip:exempt")
        if not seen.exists:
            return self._finish(step, "skipped", "target_gone", seen, now, stage="skip:gone")
        if decision.stage.startswith("warn:"):
            return self._finish(step, "warned", "", seen, now)
        if decision.stage == "notify_only":
            return self._finish(step, "notify_only", "", seen, now)
        if step.policy.dry_run or executor is None:
            return self._finish(step, "dry_run", "", seen, now)
        return self._act(step, executor, target, seen, now)

    def _act(
        self, step: Step, executor: Executor, target: Target, seen: Inspection, now: float
    ) -> LogEntry:
        entry = self._entry(step, "started", seen.action, now)
        if not self.log.record(entry):
            return entry
        reason = f"gpufleet: GPUs idle since {step.decision.episode_start:.0f} (policy enforce)"
        try:
            done = executor.release(target, reason)
            outcome, detail = "acted", done
        except ExecutorError as err:
            outcome, detail = "failed", str(err)
        final = LogEntry(
            entry.at,
            entry.workload_key,
            entry.episode_start,
            entry.stage,
            outcome,
            entry.mode,
            entry.dry_run,
            detail,
        )
        self.log.update(final)
        log.warning("auto-release %s: %s %s", outcome, step.ref.key, detail)
        self._announce(step, outcome, "", Inspection(True, False, detail, seen.opt_out), now)
        return final

    def _finish(
        self,
        step: Step,
        outcome: str,
        reason: str,
        seen: Inspection,
        now: float,
        stage: str | None = None,
    ) -> LogEntry:
        entry = self._entry(step, outcome, reason or seen.action, now, stage)
        if self.log.record(entry):
            log.info("auto-release %s: %s %s", outcome, step.ref.key, entry.detail)
            self._announce(step, outcome, reason, seen, now)
        return entry

    def _entry(
        self, step: Step, decision: str, detail: str, now: float, stage: str | None = None
    ) -> LogEntry:
        return LogEntry(
            now,
            step.ref.key,
            step.decision.episode_start,
            stage or step.decision.stage,
            decision,
            step.policy.mode,
            step.policy.dry_run,
            detail,
        )

    def _announce(
        self, step: Step, outcome: str, reason: str, seen: Inspection, now: float
    ) -> None:
        if self.announce is None:
            return
        event = action_event(step, outcome, reason, seen, now)
        self.announce(event, now)


def action_event(step: Step, outcome: str, reason: str, seen: Inspection, now: float) -> Event:
    rec, ref, decision = step.rec, step.ref, step.decision
    s = rec.savings
    deadline = decision.deadline if outcome in ("warned", "notify_only", "dry_run") else None
    facts = Facts(
        title=rec.title,
        rec_kind=rec.kind.value,
        rec_id=rec.id,
        workload=ref.key,
        namespace=ref.namespace,
        user=ref.user,
        team=ref.team,
        owned_by=ref.owner,
        nodes=sorted({v.node for v in step.views}),
        gpus=[v.uuid for v in step.views],
        gpu_names=[gpu_name(v) for v in step.views],
        gpu_models=", ".join(sorted({v.model for v in step.views})),
        idle_seconds=now - decision.episode_start if decision.episode_start else None,
        money_per_hour=s.money_per_hour,
        money_per_month=s.money_per_month,
        currency=s.currency,
        energy_kwh_per_month=s.energy_kwh_per_month,
        carbon_kg_per_month=s.carbon_kg_per_month,
        action=seen.action,
        # before the release: how to do it now by hand; after it, nothing to type
        command=seen.command if outcome in ("warned", "notify_only", "dry_run") else "",
        deadline=deadline,
        opt_out=seen.opt_out if outcome == "warned" else "",
        reason=reason,
    )
    labels = {
        "namespace": ref.namespace,
        "team": ref.team,
        "user": ref.user,
        "owner": ref.owner,
        "workload": ref.key,
        "kind": "auto_release",
    }
    return Event(
        key=f"action|{ref.key}|{decision.episode_start}|{decision.stage}|{outcome}",
        source="actions",
        kind=EVENT_KIND[outcome],
        severity=SEVERITY.get(outcome, "info"),
        labels={k: v for k, v in labels.items() if v},
        facts=facts,
    )


__all__ = ["ActionEngine", "Executors", "deadline_of"]
