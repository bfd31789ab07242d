"""A node clock that jumps, through the real HTTP app over the real core (issue 17, defect 8):
the samples behind event time already applied are still not accounted (the timeline is
another issue's), but never silently: the ack says how many and why, the collector logs
it once per node and streak, and /metrics counts it by reason.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.collector.edge_rig import Clock, batch, edge_rig, post
from tests.collector.test_core import T0

JUMP_SECONDS = 280


def test_samples_behind_a_clock_jump_are_told_to_the_sender_logged_once_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0 + 60)
    with edge_rig(tmp_path / "ledger.db", clock) as (core, http):
        assert post(http, batch(1, range(0, 60, 10))).json()["samples_late"] == 0
        # one sample stamped JUMP_SECONDS ahead, and applied
        assert post(http, batch(2, range(60 + JUMP_SECONDS, 61 + JUMP_SECONDS))).status_code == 200
        core.applier.tick(flush=True)

        caplog.clear()
        late = [post(http, batch(seq, range(t, t + 60, 10))).json() for seq, t in
                ((3, 70), (4, 130), (5, 190))]  # fmt: skip
        for ack in late:
            assert ack["status"] == "accepted"
            assert (ack["samples_accepted"], ack["samples_late"]) == (0, 6)
            (warning,) = ack["warnings"]
            assert "6 of 6 samples" in warning and "check the node's clock (chrony/NTP)" in warning
        assert f"up to {JUMP_SECONDS - 10} s behind" in late[0]["warnings"][0]
        assert f"up to {JUMP_SECONDS - 130} s behind" in late[2]["warnings"][0]
        assert warnings_about("node-a", caplog) == 1  # one streak, one line

        on_time = post(http, batch(6, range(350, 410, 10))).json()
        assert (on_time["samples_late"], on_time["warnings"]) == (0, [])
        core.applier.tick(flush=True)
        assert post(http, batch(7, range(250, 310, 10))).json()["samples_late"] == 6
        assert warnings_about("node-a", caplog) == 2  # a new streak

        counters = core.service.fleet_totals().ingest
        assert counters.late_samples_by_reason == {"behind_applied": 24}
        scraped = http.get("/metrics").text
        assert 'gpufleet_collector_late_samples_total{reason="behind_applied"} 24.0' in scraped


def warnings_about(node: str, caplog: pytest.LogCaptureFixture) -> int:
    return sum(
        1
        for r in caplog.records
        if r.levelno == logging.WARNING
        and f"node {node}" in r.getMessage()
        and "late_samples_total" in r.msg
    )
