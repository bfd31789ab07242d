"""What happens when someone presses "Keep for 4 h", "Release now" or "Dismiss".

``AnswerDesk.answer`` takes one verified answer (the HTTP layer checked the signature),
finds who pressed it in the directory, checks they may, does it, records it in the
ledger (who, when, what came of it, refusals too) and announces it on the channels.

Who may: an operator (``answers.operators``) anything; the workload's user anything;
users of the workload's team (``notifications.users.<name>.team``) keep or dismiss but not
release. "Release now" also needs the workload's auto-release policy: ``off`` refuses it,
``dry_run`` says what would be done and does nothing, else the policy's executor does it.
"Keep" exempts the workload from auto-release for ``answers.keep_seconds`` (the engine
asks ``AnswerLog.kept_until``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collector.actions.answer_log import AnswerLog, AnswerRecord
from collector.actions.engine import Executors
from collector.actions.executors import ExecutorError, Target
from collector.actions.settings import ActionSettings
from collector.ledger.store import Ledger
from collector.notify import phrases
from collector.notify.answer_phrases import action_word, reply
from collector.notify.answer_settings import AnswerSettings
from collector.notify.directory import Directory
from collector.notify.messages import Event, Facts, format_time, workload_words
from collector.records import GpuView, RecommendationKind, WorkloadRef

log = logging.getLogger(__name__)
SERVICE_NAMES = {"slack": "Slack", "feishu": "Feishu", "lark": "Lark", "link": "link",
                 "teams": "Teams"}  # fmt: skip


@dataclass(frozen=True)
class Answer:
    """One press. ``id``: the service's id for it (a replay has the same); ``who``: the
    directory user, known for signed links, else found from ``service_user``."""

    id: str
    service: str
    service_user: str
    action: str  # keep | release | dismiss
    rec_id: str
    who: str = ""
    #: the language of the reply (answer_phrases.reply_languages: the service's channels')
    language: str = "en"


@dataclass(frozen=True)
class Reply:
    #: kept | released | dry_run | dismissed | failed | refused | duplicate
    outcome: str
    #: what the person is told, and what the updated message says
    text: str
    title: str = ""
    kept_until: float | None = None

    @property
    def refused(self) -> bool:
        return self.outcome in ("refused", "duplicate")


@dataclass(frozen=True)
class Desk:
    """What the desk works with (one settings object instead of seven arguments)."""

    settings: AnswerSettings
    actions: ActionSettings
    ledger: Ledger
    directory: Directory
    executors: Executors
    fleet: Callable[[float], Sequence[GpuView]]
    announce: Callable[[Event, float], int] | None = None


class AnswerDesk:
    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.log = AnswerLog(desk.ledger)

    def answer(self, a: Answer, now: float) -> Reply:
        lang = a.language
        if self.log.seen(a.id):
            return Reply("duplicate", reply(lang, "duplicate"))
        rec = self.desk.ledger.get_recommendation(a.rec_id)
        if rec is None or rec.kind is not RecommendationKind.RELEASE_IDLE:
            return self._refuse(a, "", reply(lang, "no_recommendation", rec=a.rec_id), now)
        who = a.who if a.service == "link" else self.desk.directory.who(a.service, a.service_user)
        if who not in self.desk.directory.users:
            service = SERVICE_NAMES.get(a.service, a.service)
            reason = reply(lang, "not_in_directory", service=service, user=a.service_user)
            return self._refuse(a, rec.workload_key, reason, now, who)
        ref = self._holder(rec.workload_key, now)
        if ref is None:
            reason = reply(lang, "gone", workload=_words(rec.workload_key, lang))
            return self._refuse(a, rec.workload_key, reason, now, who)
        why_not = refusal(a.action, who, ref, self.desk, lang)
        if why_not:
            return self._refuse(a, ref.key, why_not, now, who)
        done = self._carry_out(a, who, ref, now)
        done = Reply(done.outcome, done.text, rec.title, done.kept_until)
        self._record(a, who, ref.key, done, now)
        self._announce(a, ref, done, now)
        return done

    def _carry_out(self, a: Answer, who: str, ref: WorkloadRef, now: float) -> Reply:
        lang = a.language
        if a.action == "keep":
            until = now + self.desk.settings.keep_seconds
            hours = self.desk.settings.keep_seconds / 3600.0
            workload = _words(ref.key, lang)
            text = reply(
                lang, "kept", hours=hours, who=who, workload=workload, until=format_time(until)
            )
            return Reply("kept", text, kept_until=until)
        if a.action == "dismiss":
            self.desk.ledger.dismiss_recommendation(a.rec_id, now, by=who)
            return Reply("dismissed", reply(lang, "dismissed", who=who))
        return self._release(who, ref, lang)

    def _release(self, who: str, ref: WorkloadRef, lang: str) -> Reply:
        policy = self.desk.actions.policy_for(ref.namespace)
        target = Target.of(ref)
        executor = self.desk.executors.for_target(target)
        where = f"actions.policies.{ref.namespace}" if ref.namespace else "actions.default"
        if policy.mode == "off":
            namespace = ref.namespace or reply(lang, "this_workload")
            return Reply("refused", reply(lang, "off", namespace=namespace, where=where))
        if policy.dry_run or executor is None:
            seen = executor.inspect(target) if executor is not None else None
            what = (seen.action if seen else "") or reply(
                lang, "release_what", workload=_words(ref.key, lang)
            )
            return Reply("dry_run", reply(lang, "dry_run", where=where, what=what))
        try:
            done = executor.release(target, f"gpufleet: released from chat by {who}")
        except ExecutorError as err:
            return Reply("failed", reply(lang, "failed", who=who, error=err))
        log.warning("released from chat by %s: %s (%s)", who, ref.key, done)
        return Reply("released", reply(lang, "released", who=who, done=done))

    def _holder(self, workload_key: str, now: float) -> WorkloadRef | None:
        for view in self.desk.fleet(now):
            for ref in view.workloads:
                if ref.key == workload_key:
                    return ref
        return None

    def _refuse(
        self, a: Answer, workload_key: str, reason: str, now: float, who: str = ""
    ) -> Reply:
        refused = Reply("refused", reply(a.language, "refused", reason=reason))
        self._record(a, who, workload_key, refused, now)
        return refused

    def _record(self, a: Answer, who: str, key: str, reply: Reply, now: float) -> None:
        record = AnswerRecord(
            a.id,
            now,
            a.service,
            a.service_user,
            who,
            a.action,
            a.rec_id,
            key,
            reply.outcome,
            reply.text,
            reply.kept_until,
        )
        self.log.record(record)

    def _announce(self, a: Answer, ref: WorkloadRef, reply: Reply, now: float) -> None:
        if self.desk.announce is None or reply.outcome == "refused":
            return
        facts = Facts(
            title=reply.text,
            rec_kind=RecommendationKind.RELEASE_IDLE.value,
            rec_id=a.rec_id,
            workload=ref.key,
            namespace=ref.namespace,
            user=ref.user,
            team=ref.team,
        )
        labels = {
            "namespace": ref.namespace,
            "team": ref.team,
            "user": ref.user,
            "workload": ref.key,
            "kind": "answer",
        }
        event = Event(
            key=f"answer|{a.id}",
            source="actions",
            kind="answered",
            severity="info",
            labels={k: v for k, v in labels.items() if v},
            facts=facts,
        )
        self.desk.announce(event, now)


def refusal(action: str, who: str, ref: WorkloadRef, desk: Desk, lang: str = "en") -> str:
    """Why ``who`` may not ``action`` ``ref`` (in ``lang``); "" when they may."""
    if action not in ("keep", "release", "dismiss"):
        return reply(lang, "unknown_action", action=action)
    if who in desk.settings.operators or (ref.user and who == ref.user):
        return ""
    team = desk.directory.team_of(who)
    if action != "release" and ref.team and team == ref.team:
        return ""
    owner = (
        reply(lang, "owner_user", user=ref.user)
        if ref.user
        else reply(lang, "owner_team", team=ref.team or "(none)")
    )
    may = reply(lang, "may_release" if action == "release" else "may_other")
    return reply(
        lang,
        "may_not",
        who=who,
        action=action_word(lang, action),
        workload=_words(ref.key, lang),
        owner=owner,
        may=may,
    )


def _words(key: str, lang: str = "en") -> str:
    return workload_words(key, phrases.for_language(lang))
