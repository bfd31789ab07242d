"""The utilisation gap of ``gpufleet report --plans``: what the fleet's utilisation would have
been without the GPUs an open recommendation frees, against hand computations."""

from __future__ import annotations

import dataclasses

from collector.plans_report import utilisation_gap
from collector.records import RecommendationKind, Usage
from tests.collector.http.test_app_fake import make_recommendation

HOUR = 3600.0


def rec(rec_id: str, kind: RecommendationKind, *gpus: str):  # type: ignore[no-untyped-def]
    return dataclasses.replace(make_recommendation(rec_id, kind, 10.0), gpu_uuids=gpus)


#: four GPUs over a 2-hour period: two busy, one held idle, one idle with 0.5 h of activity
USAGE = {
    "A": Usage(active_seconds=2 * HOUR),
    "B": Usage(active_seconds=2 * HOUR),
    "C": Usage(idle_seconds=2 * HOUR, allocated_idle_seconds=2 * HOUR),
    "D": Usage(active_seconds=0.5 * HOUR, idle_seconds=1.5 * HOUR),
}


def test_freeing_a_gpu_takes_out_its_own_hours_not_the_period_s() -> None:
    """active 4.5 h of 8 h known: 56.25 %. Without C: 4.5 / 6 = 75 %. Without D: 4 / 6 =
    66.7 % (its half hour of work goes with it). Without both, counted once although two
    recommendations name D: 4 / 4 = 100 %. A right-sizing advice frees no GPU."""
    recs = [
        rec("release:C", RecommendationKind.RELEASE_IDLE, "C"),
        rec("scale:D", RecommendationKind.SCALE_DOWN, "D"),
        rec("consolidate:CD", RecommendationKind.CONSOLIDATE, "C", "D"),
        rec("rightsize:A", RecommendationKind.RIGHT_SIZE, "A"),
    ]
    out = utilisation_gap(USAGE, 0.7, recs)
    assert out.actual == 4.5 / 8
    assert out.gap == 0.7 - 4.5 / 8
    after = {c.id: c.utilisation_after for c in out.closing}
    assert after == {"consolidate:CD": 1.0, "release:C": 4.5 / 6, "scale:D": 4 / 6}
    assert out.after_all == 1.0


def test_a_gpu_the_ledger_never_saw_changes_nothing() -> None:
    out = utilisation_gap(USAGE, 0.7, [rec("release:X", RecommendationKind.RELEASE_IDLE, "X")])
    assert [c.utilisation_after for c in out.closing] == [4.5 / 8]


def test_no_known_time_has_no_utilisation() -> None:
    out = utilisation_gap({}, 0.7, [])
    assert (out.actual, out.gap, out.after_all) == (None, None, None)
