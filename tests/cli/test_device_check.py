"""device-check's logic end to end against the fake NVML library.

The CUDA load generator is replaced at its lowest layer by ``FakeLoad``, which raises the
fake GPU's GPM activity, power and PCIe traffic; ``nvidia-smi`` is a small script first on
PATH that answers from the same fake state (a JSON file the fake load rewrites on every
change; both sides share CLOCK_MONOTONIC). Real time, short phases.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.config import SourceSettings
from agent.sources.nvml.source import NvmlSource
from agent.sources.replay.source import ReplaySource
from gpufleet.cli.device_check import CheckSettings, NvidiaSmi, run_check
from tests.fakes.nvml_lib import FakeNvml, install_fake_nvml, load_scenario

GPU_INDEX = 2  # idle in the H100 scenario
UUID = "GPU-0d1e8a5a-1f0e-4b7c-9d2a-000000000002"
#: low, so the tens of ms nvidia-smi takes to start (at idle) weigh little against the
#: short test phases' energy
IDLE_MILLIWATTS = 5_000

FAKE_SMI = """#!{python}
import json, sys, time
state = json.load(open({state!r}))
query = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--query-gpu=")][0]
now = time.monotonic()
if query == "total_energy_consumption":
    energy = state["energy_mj"] + state["power_mw"] * (now - state["at"])
    print(int(energy * state["energy_scale"]))
elif query == "power.draw":
    print(state["power_mw"] / 1000 + state["polling_watts"] * state["polling"])
"""


class FakeLoad:
    """Drives the fake GPU as CudaLoad drives a real one, and keeps the smi state file."""

    def __init__(
        self, fake: FakeNvml, state: Path, energy_scale: float, polling_watts: float
    ) -> None:
        self._fake, self._state = fake, state
        self._extra = {"energy_scale": energy_scale, "polling_watts": polling_watts, "polling": 0}
        self.closed = False
        self._set(IDLE_MILLIWATTS)

    def compute(self) -> None:
        self._fake.set_gpm(UUID, sm_util_percent=97.0, dram_bw_util_percent=30.0)
        self._set(610_000)

    def copy(self) -> None:
        self._fake.set_gpm(UUID, sm_util_percent=2.0, dram_bw_util_percent=8.0)
        self._fake.set_traffic(
            UUID, pcie_tx_mib_per_second=24_000.0, pcie_rx_mib_per_second=22_000.0
        )
        self._set(160_000)

    def idle(self) -> None:
        self._fake.set_gpm(UUID, sm_util_percent=0.0, dram_bw_util_percent=0.0)
        self._fake.set_traffic(UUID, pcie_tx_mib_per_second=0.0, pcie_rx_mib_per_second=0.0)
        self._extra["polling"] = 1  # the check starts polling with its first idle phase
        self._set(IDLE_MILLIWATTS)

    def close(self) -> None:
        self.closed = True

    def _set(self, milliwatts: int) -> None:
        self._fake.set_power(UUID, milliwatts)
        now = time.monotonic()
        energy = self._fake.gpu(UUID).energy_millijoules(now)
        state = {"energy_mj": energy, "power_mw": milliwatts, "at": now, **self._extra}
        self._state.write_text(json.dumps(state))


@pytest.fixture
def smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "smi-state.json"
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(FAKE_SMI.format(python=sys.executable, state=str(state)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return state


def check(
    state: Path, tmp_path: Path, energy_scale: float = 1.0, polling_watts: float = 0.0
) -> Iterator[object]:
    settings = CheckSettings(
        GPU_INDEX, phase_seconds=1.0, poll_interval_seconds=0.2, power_every_seconds=0.25
    )
    with install_fake_nvml(load_scenario("h100_sxm_8x_gpm")) as fake:
        load = FakeLoad(fake, state, energy_scale, polling_watts)
        source = NvmlSource(SourceSettings())
        try:
            checks, info, samples = run_check(settings, source, load, NvidiaSmi(GPU_INDEX))
        finally:
            source.close()
    assert load.closed
    yield {c.name: c for c in checks}
    yield info
    yield samples


def test_a_healthy_gpu_passes_every_check_and_the_trace_replays(
    smi_on_path: Path, tmp_path: Path
) -> None:
    checks, info, samples = check(smi_on_path, tmp_path)
    assert all(c.passed for c in checks.values()), [c for c in checks.values() if not c.passed]  # type: ignore[attr-defined]
    assert set(checks) == {  # type: ignore[arg-type]
        "energy", "idle detected", "idle again detected", "busy detected", "PCIe moved",
        "polling adds no idle power",
    }  # fmt: skip
    from agent.sources.replay.formats import write_trace

    trace = tmp_path / "trace.jsonl"
    write_trace(trace, samples, node="gpu-box", gpus={info.uuid: info})  # type: ignore[arg-type, attr-defined]
    replayed = ReplaySource(trace).discover()
    assert [i.uuid for i in replayed] == [UUID]


def test_an_energy_counter_off_by_5_percent_fails_only_the_energy_check(
    smi_on_path: Path, tmp_path: Path
) -> None:
    checks, _, _ = check(smi_on_path, tmp_path, energy_scale=1.05)
    failed = {name for name, c in checks.items() if not c.passed}  # type: ignore[attr-defined]
    assert failed == {"energy"}
    assert "off by" in checks["energy"].detail  # type: ignore[index]


def test_polling_that_raises_idle_power_is_caught(smi_on_path: Path, tmp_path: Path) -> None:
    checks, _, _ = check(smi_on_path, tmp_path, polling_watts=8.0)
    assert not checks["polling adds no idle power"].passed  # type: ignore[index]
    assert checks["energy"].passed  # type: ignore[index]
