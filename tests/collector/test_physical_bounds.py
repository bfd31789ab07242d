"""Absurd but well-typed values through the real HTTP app over the real core (issue 17,
defect 7): a power past what the GPU can draw and a temperature no GPU reports are refused
naming the field, the value, the GPU and the bound; an energy counter that jumps 1e15 J is
not taken as measured, is counted and logged, and the ledger's energy stays within the
accuracy tolerance of the simulator's truth.
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest

from agent.model import SCHEMA_VERSION, Batch
from agent.sources.simulated.source import SimulatedNode
from tests.collector.edge_rig import H100, Clock, batch, edge_rig, ledger_energy, post
from tests.collector.test_core import T0
from tests.e2e.truth import relative_error

UNKNOWN = msgspec.structs.replace(H100, uuid="GPU-acme", name="Acme X1")

#: (GPU, sample fields, the field refused, words its message must hold)
REFUSED = [
    pytest.param(H100, {"power_watts": 2101.0}, "power_watts", "2100 W", id="3x-tdp"),
    pytest.param(H100, {"power_watts": 1e12}, "power_watts", "15000 W", id="1e12-w"),
    pytest.param(H100, {"power_watts": 1e308}, "power_watts", "15000 W", id="1e308-w"),
    pytest.param(UNKNOWN, {"power_watts": 5001.0}, "power_watts", "5000 W", id="unrated"),
    pytest.param(
        H100, {"temperature_celsius": 1e300}, "temperature_celsius", "150 degC", id="1e300-degc"
    ),
    pytest.param(H100, {"temperature_celsius": -60.0}, "temperature_celsius", "-50", id="cold"),
    pytest.param(
        H100,
        {"memory_temperature_celsius": 151.0},
        "memory_temperature_celsius",
        "150 degC",
        id="hbm",
    ),
]


@pytest.mark.parametrize(("gpu", "fields", "field", "words"), REFUSED)
def test_a_value_no_gpu_can_produce_is_refused_naming_field_value_gpu_and_bound(
    tmp_path: Path, gpu: object, fields: dict[str, float], field: str, words: str
) -> None:
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (core, http):
        refused = post(http, batch(1, range(0, 60, 10), gpu=gpu, **fields))  # type: ignore[arg-type]
        assert refused.status_code == 422, refused.text
        error = refused.json()
        assert error["field"] == f"$.samples[0].{field}"
        value = next(iter(fields.values()))
        assert f"= {value!r}" in error["error"] and words in error["error"]
        assert f"GPU {gpu.uuid}" in error["error"]  # type: ignore[attr-defined]
        assert ledger_energy(core) == 0.0


def test_power_within_three_times_the_larger_of_tdp_and_power_limit_is_accepted(
    tmp_path: Path,
) -> None:
    limited = msgspec.structs.replace(H100, power_limit_watts=1000.0)  # 3,000 W bound
    with edge_rig(tmp_path / "ledger.db", Clock(T0 + 60)) as (_, http):
        assert post(http, batch(1, range(0, 60, 10), power_watts=2100.0)).status_code == 200
        accepted = post(http, batch(2, range(60, 120, 10), gpu=limited, power_watts=2999.0))
        assert accepted.status_code == 200, accepted.text
        assert post(http, batch(3, range(120, 180, 10), gpu=UNKNOWN, power_watts=5000.0))


STEP_SECONDS = 10
RUN_SECONDS = 1800
JUMP_AT = 600  # from this sample on, the counter reads 1e15 J more
JUMP_JOULES = 1e15


def simulated_batches(node: SimulatedNode) -> list[Batch]:
    """The node read every STEP_SECONDS for RUN_SECONDS, one batch a minute; its energy
    counter jumps JUMP_JOULES at JUMP_AT and stays there (a counter glitch)."""
    batches, samples = [], []
    for t in range(0, RUN_SECONDS + 1, STEP_SECONDS):
        for s in node.read(T0 + t):
            jumped = t >= JUMP_AT and s.energy_joules is not None
            bump = JUMP_JOULES if jumped else 0.0
            samples.append(msgspec.structs.replace(s, energy_joules=(s.energy_joules or 0) + bump))
        if len(samples) == 6 or t == RUN_SECONDS:
            batches.append(
                Batch(
                    schema_version=SCHEMA_VERSION,
                    node=node.name,
                    agent_boot_id="boot",
                    seq=len(batches) + 1,
                    sent_at=T0 + t,
                    gpus=tuple(node.discover()),
                    samples=tuple(samples),
                )
            )
            samples = []
    return batches


def test_an_energy_counter_jumping_1e15_joules_is_not_measured_and_energy_stays_true(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = SimulatedNode.build("sim-node", ["H100"], start_time=T0)
    (uuid,) = [info.uuid for info in node.discover()]
    clock = Clock(T0)
    with edge_rig(tmp_path / "ledger.db", clock) as (core, http):
        for b in simulated_batches(node):
            clock.now = b.sent_at
            assert post(http, b).status_code == 200
        core.applier.tick(flush=True)
        truth = node.true_energy_joules(uuid, T0, T0 + RUN_SECONDS)
        assert truth > 0
        assert relative_error(ledger_energy(core), truth) <= 0.005
        assert core.service.fleet_totals().ingest.implausible_samples == {"energy_joules": 1}
        scraped = http.get("/metrics").text
        assert 'gpufleet_collector_implausible_samples_total{field="energy_joules"} 1.0' in scraped
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and uuid in r.message]
    assert len(warned) == 1 and "energy counter" in warned[0].message
