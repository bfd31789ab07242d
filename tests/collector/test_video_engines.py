"""Encoder and decoder utilisation through the real HTTP app over the real core: ratios
0..1 are accepted (and reach the InfluxDB points as they are), anything else is a 422
naming the field, and the ledger keeps committing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.model import encode_batch
from collector.influx.points import batch_lines
from tests.collector.edge_rig import WATTS, Clock, batch, edge_rig, ledger_energy, post, raw
from tests.collector.test_core import T0

VIDEO_FIELDS = ("encoder_activity", "decoder_activity")


def test_video_engine_ratios_are_accepted_and_kept(tmp_path: Path) -> None:
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (core, http):
        sent = batch(1, range(0, 60, 10), encoder_activity=0.25, decoder_activity=1.0)
        accepted = post(http, sent)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["samples_accepted"] == 6
        core.applier.tick(flush=True)
        assert ledger_energy(core) == WATTS * 50
    lines = batch_lines(encode_batch(sent))
    assert len(lines) == 6
    assert all("decoder_activity=1," in line and "encoder_activity=0.25," in line for line in lines)


@pytest.mark.parametrize("field", VIDEO_FIELDS)
def test_a_ratio_above_one_is_422_naming_the_field(tmp_path: Path, field: str) -> None:
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (core, http):
        body = raw(batch(1, range(0, 60, 10)))
        body["samples"][2][field] = 1.5
        refused = post(http, body)
        assert refused.status_code == 422, refused.text
        error = refused.json()
        assert error["field"] == f"$.samples[2].{field}"
        assert error["reason"] == "invalid_value"
        assert error["error"].startswith(f"$.samples[2].{field}") and "1.5" in error["error"]

        good = post(http, batch(1, range(0, 60, 10), **{field: 0.5}))
        assert good.status_code == 200 and good.json()["samples_accepted"] == 6
        core.applier.tick(flush=True)
        assert ledger_energy(core) == WATTS * 50
