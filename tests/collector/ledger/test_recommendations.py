"""Recommendations survive the ledger intact; dismissal is sticky."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from collector.ledger.records import LedgerWrite
from collector.ledger.store import Ledger, LedgerError
from collector.records import (
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)

OPEN = RecommendationStatus.OPEN


def rec(rid: str, money: float, status: RecommendationStatus = OPEN) -> Recommendation:
    return Recommendation(
        id=rid,
        kind=RecommendationKind.RELEASE_IDLE,
        subject="pod:ml/notebook-7",
        title="Release 2 idle H100s",
        evidence={"idle_seconds": 3600.5, "gpus": ["G1", "G2"], "window": {"start": 1.0}},
        savings=Savings(money, 12.5, 4.25, "CNY", money_per_hour=money / 730),
        status=status,
        opened_at=100.0,
        updated_at=200.0,
        gpu_uuids=("G1", "G2"),
        node="n1",
        workload_key="pod:ml/notebook-7",
        namespace="ml",
    )


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger.open(ledger_url) as opened:
        yield opened


def test_round_trip_is_exact_and_sorted_by_saving(ledger: Ledger) -> None:
    small, big = rec("a", 10.0), rec("b", 99.0, RecommendationStatus.NOTIFIED)
    ledger.upsert_recommendations([small, big])
    assert ledger.recommendations() == [big, small]
    assert ledger.recommendations([OPEN]) == [small]
    assert ledger.recommendations([]) == []
    assert ledger.get_recommendation("a") == small
    assert ledger.get_recommendation("nope") is None


def test_upsert_updates_in_place(ledger: Ledger) -> None:
    ledger.upsert_recommendations([rec("a", 10.0)])
    resolved = replace(rec("a", 5.0), status=RecommendationStatus.RESOLVED, resolved_at=300.0)
    ledger.upsert_recommendations([resolved])
    assert ledger.recommendations() == [resolved]


def test_dismiss_sticks_through_reevaluation(ledger: Ledger) -> None:
    ledger.upsert_recommendations([rec("a", 10.0)])
    dismissed = ledger.dismiss_recommendation("a", now=500.0, by="alice")
    assert dismissed is not None
    assert dismissed.status is RecommendationStatus.DISMISSED
    assert (dismissed.updated_at, dismissed.resolved_at) == (500.0, 500.0)
    assert dismissed.evidence["dismissed_by"] == "alice"
    ledger.upsert_recommendations([replace(rec("a", 20.0), updated_at=600.0)])
    again = ledger.get_recommendation("a")
    assert again is not None and again.status is RecommendationStatus.DISMISSED
    assert again.savings.money_per_month == 20.0 and again.resolved_at == 500.0
    assert ledger.dismiss_recommendation("nope", now=1.0) is None


def test_restore_undoes_a_dismissal_and_reevaluation_then_updates_it(ledger: Ledger) -> None:
    ledger.upsert_recommendations([rec("a", 10.0), rec("b", 5.0)])
    ledger.dismiss_recommendation("a", now=500.0, by="alice")
    restored = ledger.restore_recommendation("a", now=510.0)
    assert restored is not None and restored.status is RecommendationStatus.OPEN
    assert restored.resolved_at is None and restored.updated_at == 510.0
    assert "dismissed_by" not in restored.evidence
    ledger.upsert_recommendations([replace(rec("a", 20.0), updated_at=600.0)])
    again = ledger.get_recommendation("a")
    assert again is not None and again.status is RecommendationStatus.OPEN
    assert again.savings.money_per_month == 20.0
    untouched = ledger.restore_recommendation("b", now=520.0)  # not dismissed: as it was
    assert untouched == ledger.recommendations([RecommendationStatus.OPEN])[1]
    assert untouched is not None and untouched.updated_at != 520.0
    assert ledger.restore_recommendation("nope", now=1.0) is None


def test_unencodable_evidence_is_a_ledger_error(ledger: Ledger) -> None:
    bad = replace(rec("a", 1.0), evidence={"x": object()})
    with pytest.raises(LedgerError, match="recommendation a"):
        ledger.upsert_recommendations([bad, rec("b", 1.0)])
    assert ledger.recommendations() == []


def test_a_workload_recommendation_reads_back_with_its_team_user_and_owner(
    ledger: Ledger,
) -> None:
    """Who to ask comes from the workloads directory when read: an owner learned after the
    recommendation opened shows on it, and a node or unknown workload stays without one."""
    node_rec = replace(rec("scale_down:n1", 1.0), workload_key="", namespace="")
    ledger.upsert_recommendations([rec("a", 10.0), node_rec])
    assert ledger.get_recommendation("a") == rec("a", 10.0)  # nobody said yet
    ref = WorkloadRef(
        key="pod:ml/notebook-7",
        kind="kubernetes_pod",
        name="notebook-7",
        namespace="ml",
        team="nlp",
        user="alice",
        owner="Notebook/ml/alice-nlp",
    )
    ledger.commit(LedgerWrite(workloads={ref.key: ref}))
    known = replace(rec("a", 10.0), team="nlp", user="alice", owner="Notebook/ml/alice-nlp")
    assert ledger.recommendations() == [known, node_rec]
    assert ledger.get_recommendation("a") == known
    dismissed = ledger.dismiss_recommendation("a", now=500.0, by="bo")
    assert dismissed is not None
    assert (dismissed.team, dismissed.user, dismissed.owner) == ("nlp", "alice", known.owner)
