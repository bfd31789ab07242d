"""Remediation: take a node with broken GPUs out of service, once per condition, never on doubt.

``Remediator.run`` looks at the standing BROKEN_GPUS recommendations (one per node,
collector/recommend/broken_gpus.py). A node whose GPUs fell off the bus, log hardware
XIDs, gain uncorrected ECC errors / have row remaps pending, or are missing, is cordoned
(Kubernetes) or drained (Slurm) when ``actions.remediation.mode`` is enforce; dry_run
records and announces what would be done. Throttling alone never takes a node out.

Never on unknown or stale data: the node must report fresh samples now, and every named
GPU that is not lost or missing must too (a lost GPU is silent by nature). Never twice
for the same condition: a step is recorded in the action log (workload key
``node:<name>``, the recommendation's opening time as the episode, a stage naming the
set of broken GPUs and their conditions) before it is carried out, and a recorded stage
is never repeated: an operator who resumes the node is not overruled until a new GPU
breaks or the recommendation resolves and opens again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from collector.actions.executors import ExecutorError
from collector.actions.log import ActionLog, LogEntry
from collector.actions.node_executors import (
    NodeExecutor,
    NodeInspection,
    cordon_commands,
    drain_commands,
)
from collector.actions.remedies import Remedy, data_fresh, executor_kind, remedies
from collector.actions.settings import ActionSettings
from collector.notify.messages import Event, Facts
from collector.records import GpuView, Recommendation

log = logging.getLogger(__name__)


class Remediator:
    def __init__(
        self,
        settings: ActionSettings,
        actions_log: ActionLog,
        executors: Mapping[str, NodeExecutor],
        announce: Callable[[Event, float], int] | None = None,
    ) -> None:
        """``executors``: by kind (kubernetes, slurm), those enabled."""
        self.settings = settings
        self.log = actions_log
        self.executors = executors
        self.announce = announce

    def run(
        self, fleet: Sequence[GpuView], recs: Sequence[Recommendation], now: float
    ) -> list[LogEntry]:
        """One pass; returns the entries recorded in it."""
        r = self.settings.remediation
        if r.mode == "off":
            return []
        out = []
        for remedy in remedies(fleet, recs, r.conditions):
            entry = self._step(remedy, fleet, now)
            if entry is not None:
                out.append(entry)
        return out

    def _step(self, remedy: Remedy, fleet: Sequence[GpuView], now: float) -> LogEntry | None:
        r = self.settings.remediation
        fp = remedy.fingerprint
        done = self.log.stages(_key(remedy), remedy.rec.opened_at)
        if f"remedy:{fp}" in done:
            return None  # taken out (or tried) once for this condition: never again
        kind = executor_kind(remedy.node, fleet, r.via, sorted(self.executors))
        if not data_fresh(
            remedy.node, fleet, remedy.faults, now, self.settings.max_data_age_seconds
        ):
            return self._record(remedy, f"remedy-stale:{fp}", "skipped", "stale", kind, now, done)
        if r.mode == "dry_run":
            return self._record(remedy, f"remedy-dry:{fp}", "dry_run", "", kind, now, done)
        return self._enforce(remedy, kind, now)

    def _record(
        self,
        remedy: Remedy,
        stage: str,
        outcome: str,
        reason: str,
        kind: str,
        now: float,
        done: Mapping[str, float],
    ) -> LogEntry | None:
        if stage in done:
            return None
        seen = planned(remedy, kind)
        entry = self._entry(remedy, stage, outcome, reason or seen.action, now)
        if self.log.record(entry):
            log.info("remediation %s: node %s %s", outcome, remedy.node, entry.detail)
            self._announce(remedy, outcome, reason, seen, now)
        return entry

    def _enforce(self, remedy: Remedy, kind: str, now: float) -> LogEntry | None:
        stage = f"remedy:{remedy.fingerprint}"
        executor = self.executors.get(kind)
        # not reaching the node is recorded and announced once and tried again each pass:
        # only a step carried out (or found needless) is final for the condition
        error = f"remedy-error:{remedy.fingerprint}"
        if executor is None:  # settings refuse enforce without one; a node's holders may not
            return self._finish(remedy, error, "failed", f"no {kind or 'node'} executor", now)
        try:
            seen = executor.inspect(remedy.node, remedy.reason)
        except ExecutorError as err:
            return self._finish(remedy, error, "failed", f"cannot inspect: {err}", now)
        if not seen.exists or seen.out:
            why = "target_gone" if not seen.exists else "already_out"
            return self._finish(remedy, stage, "skipped", seen.detail, now, why, seen)
        entry = self._entry(remedy, stage, "started", seen.action, now)
        if not self.log.record(entry):
            return None
        try:
            outcome, detail = "acted", executor.take_out(remedy.node, remedy.reason)
        except ExecutorError as err:
            outcome, detail = "failed", str(err)
        final = self._entry(remedy, stage, outcome, detail, entry.at)
        self.log.update(final)
        log.warning("remediation %s: node %s %s", outcome, remedy.node, detail)
        self._announce(remedy, outcome, "", seen, now, detail)
        return final

    def _finish(
        self,
        remedy: Remedy,
        stage: str,
        outcome: str,
        detail: str,
        now: float,
        reason: str = "",
        seen: NodeInspection | None = None,
    ) -> LogEntry | None:
        entry = self._entry(remedy, stage, outcome, detail, now)
        if not self.log.record(entry):
            return None
        log.warning("remediation %s: node %s %s", outcome, remedy.node, detail)
        self._announce(remedy, outcome, reason, seen or planned(remedy, ""), now, detail)
        return entry

    def _entry(
        self, remedy: Remedy, stage: str, decision: str, detail: str, now: float
    ) -> LogEntry:
        mode = self.settings.remediation.mode
        rec = remedy.rec
        return LogEntry(now, _key(remedy), rec.opened_at, stage, decision, mode,
                        mode == "dry_run", detail)  # fmt: skip

    def _announce(
        self,
        remedy: Remedy,
        outcome: str,
        reason: str,
        seen: NodeInspection,
        now: float,
        detail: str = "",
    ) -> None:
        if self.announce is not None:
            self.announce(remedy_event(remedy, outcome, reason, seen, detail), now)


def _key(remedy: Remedy) -> str:
    return f"node:{remedy.node}"


def planned(remedy: Remedy, kind: str) -> NodeInspection:
    """What taking the node out would be, without asking anyone (dry run, stale data)."""
    if kind == "slurm":
        action, undo = drain_commands(remedy.node, remedy.reason)
    elif kind == "kubernetes":
        action, undo = cordon_commands(remedy.node)
    else:  # holders of both kinds, or none, and no executor enabled to say which
        action = f"take node {remedy.node} out of service (set actions.remediation.via)"
        undo = ""
    return NodeInspection(True, False, action, undo)


def remedy_event(
    remedy: Remedy, outcome: str, reason: str, seen: NodeInspection, detail: str = ""
) -> Event:
    rec = remedy.rec
    uuids = [f.uuid for f in remedy.faults]
    acted = outcome == "acted"
    facts = Facts(
        title=rec.title,
        rec_kind=rec.kind.value,
        rec_id=rec.id,
        nodes=[remedy.node],
        gpus=uuids,
        gpu_names=[f"{remedy.node} #{f.index}" for f in remedy.faults if f.index is not None],
        money_per_hour=rec.savings.money_per_hour,
        money_per_month=rec.savings.money_per_month,
        currency=rec.savings.currency,
        action=seen.action,
        # the dry run: how to do it by hand; done: how to undo it
        command=seen.action if outcome == "dry_run" else "",
        undo=seen.undo if acted else "",
        reason=reason,
        detail=remedy.reason if outcome != "failed" else detail,
    )
    return Event(
        key=f"remedy|{remedy.node}|{rec.opened_at}|{remedy.fingerprint}|{outcome}",
        source="actions",
        kind={"dry_run": "dry_run", "acted": "acted", "failed": "failed"}.get(outcome, "skipped"),
        severity="critical" if outcome == "failed" else "warning",
        labels={"node": remedy.node, "kind": "remediation"},
        facts=facts,
    )


__all__ = ["Remediator", "remedy_event"]
