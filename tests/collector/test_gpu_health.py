"""A GPU's health on /v1/fleet, through the real HTTP app over the real core: the newest
sample's temperatures, throttle reasons and ECC, the XIDs of the recent window, the
problems they make and the ``health`` filter; facts clear with the next sample that says
so, XIDs once they are older than the window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from agent.model import GpuInfo
from collector.fleet.health import HOT_CELSIUS, MEMORY_HOT_CELSIUS, XID_RECENT_SECONDS
from collector.http.views import MAX_AGE_SECONDS
from tests.collector.edge_rig import AUTH, H100, Clock, batch, edge_rig, post
from tests.collector.test_core import T0

CALM = GpuInfo(uuid="GPU-edge-calm", index=0, name="NVIDIA H100 80GB HBM3")
#: SW power cap, HW thermal slowdown, and GPU idle (not a reason that holds it back)
REASONS = 0x4 | 0x40 | 0x1


def fleet(http: httpx.Client, **params: str) -> dict[str, dict[str, Any]]:
    answer = http.get("/v1/fleet", params=params, headers=AUTH)
    assert answer.status_code == 200, answer.text
    return {g["uuid"]: g for g in answer.json()["gpus"]}


def test_health_facts_xids_and_problems_show_and_clear(tmp_path: Path) -> None:
    clock = Clock(T0 + 60)
    with edge_rig(tmp_path / "ledger.db", clock) as (_, http):
        sent = [
            batch(1, range(0, 30, 10), temperature_celsius=70.0, xid_errors=(79, 13)),
            batch(2, range(30, 60, 10), temperature_celsius=HOT_CELSIUS + 3,
                  memory_temperature_celsius=MEMORY_HOT_CELSIUS + 1, throttle_reasons=REASONS,
                  ecc_uncorrected_total=2, remapped_rows_pending=False),
            batch(1, range(0, 60, 10), node="node-b", gpu=CALM, temperature_celsius=60.0),
        ]  # fmt: skip
        for b in sent:
            assert post(http, b).status_code == 200
        gpu = fleet(http)[H100.uuid]
        assert gpu["health"] == {
            "temperature_celsius": HOT_CELSIUS + 3,
            "memory_temperature_celsius": MEMORY_HOT_CELSIUS + 1,
            "throttle_reasons": REASONS,
            "throttled_by": ["sw_power_cap", "hw_thermal_slowdown"],
            "ecc_uncorrected_total": 2,
            "remapped_rows_pending": False,
            "problems": ["ecc", "throttled", "hot", "memory_hot"],
        }
        # the last sample with them was at T0 + 20; 13 is a program's fault, listed only
        assert gpu["recent_xids"] == [
            {"code": 79, "last_seen": T0 + 20},
            {"code": 13, "last_seen": T0 + 20},
        ]
        assert gpu["problems"] == ["fell_off_bus", "ecc", "throttled", "hot", "memory_hot"]
        calm = fleet(http)[CALM.uuid]
        assert calm["problems"] == [] and calm["recent_xids"] == []
        assert calm["health"]["temperature_celsius"] == 60.0
        assert set(fleet(http, health="problem")) == {H100.uuid}
        assert set(fleet(http, health="ok")) == {CALM.uuid}
        assert set(fleet(http, health="memory_hot,xid")) == {H100.uuid}
        assert fleet(http, health="xid") == {}

        cooled = batch(3, range(60, 90, 10), temperature_celsius=60.0, throttle_reasons=0x1,
                       ecc_uncorrected_total=0)  # fmt: skip
        clock.now = T0 + 90
        assert post(http, cooled).status_code == 200
        gpu = fleet(http)[H100.uuid]
        assert gpu["health"]["throttled_by"] == [] and gpu["health"]["problems"] == []
        assert gpu["problems"] == ["fell_off_bus"]

        # a fleet view is served again while younger than MAX_AGE_SECONDS: step past it
        clock.now = T0 + 20 + XID_RECENT_SECONDS - 2 * MAX_AGE_SECONDS
        assert [x["code"] for x in fleet(http)[H100.uuid]["recent_xids"]] == [79, 13]
        clock.now = T0 + 20 + XID_RECENT_SECONDS + 2 * MAX_AGE_SECONDS
        gpu = fleet(http)[H100.uuid]
        assert gpu["recent_xids"] == [] and gpu["problems"] == []
        assert set(fleet(http, health="problem")) == set()


def test_an_unknown_health_filter_is_422_naming_it(tmp_path: Path) -> None:
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (_, http):
        answer = http.get("/v1/fleet", params={"health": "sick"}, headers=AUTH)
        assert answer.status_code == 422
        assert answer.json()["field"] == "health" and "'sick'" in answer.json()["error"]
