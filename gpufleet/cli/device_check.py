"""``scripts/device-check``: the agent's NVML source against a real GPU and nvidia-smi.

On a machine with an NVIDIA GPU and only its driver, it drives GPU ``--gpu`` idle ->
compute -> PCIe copies -> idle (gpufleet/cli/cuda_load.py: libcuda through ctypes) while
the agent's NvmlSource polls it, and checks:

- energy: the agent's energy counter delta equals nvidia-smi's
  ``total_energy_consumption`` (mJ) delta over the same span within 1 %;
- idle and busy: idle phases read SM and DRAM activity below 1 %, the compute phase above
  50 %;
- signals move: PCIe traffic during the copies is far above idle, activity during compute;
- polling costs no idle power: idle power (nvidia-smi ``power.draw``) with the agent
  polling at 1 Hz is within 2 W (or 3 %) of idle power with it stopped;

and records the agent's samples as a replay trace (JSONL, agent/sources/replay) under
tests/fixtures/replay/. About 4 minutes with the default phase length; the CUDA context is
destroyed at the end and no GPU setting is changed.

Its logic runs in tests against the fake NVML library: the load driver is an injectable
interface (``LoadDriver``) whose fake raises the fake GPU's activity, power and traffic, and
``nvidia-smi`` is a small script put first on PATH that reads the same fake state. Only
``CudaLoad`` and the real nvidia-smi are left for real hardware.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent.config import SourceSettings
from agent.model import GpuInfo, GpuSample
from agent.sources.nvml.source import NvmlSource
from agent.sources.replay.formats import write_trace

IDLE_BELOW = 0.01
BUSY_ABOVE = 0.5
ENERGY_TOLERANCE = 0.01
IDLE_POWER_TOLERANCE_WATTS = 2.0
IDLE_POWER_TOLERANCE_RATIO = 0.03
#: PCIe during the copies must exceed this and ten times idle
PCIE_MOVED_BYTES_PER_SECOND = 100e6


class LoadDriver(Protocol):
    def compute(self) -> None: ...
    def copy(self) -> None: ...
    def idle(self) -> None: ...
    def close(self) -> None: ...


class NvidiaSmi:
    """``nvidia-smi --query-gpu=...`` for one GPU (by NVML index)."""

    def __init__(self, gpu_index: int, command: str = "nvidia-smi") -> None:
        self._gpu, self._command = gpu_index, command

    def energy_millijoules(self) -> float:
        return float(self._query("total_energy_consumption"))

    def power_watts(self) -> float:
        return float(self._query("power.draw"))

    def _query(self, field_name: str) -> str:
        out = subprocess.run(
            [self._command, f"--id={self._gpu}", f"--query-gpu={field_name}",
             "--format=csv,noheader,nounits"],
            check=True, capture_output=True, text=True, timeout=30,
        ).stdout  # fmt: skip
        return out.strip().splitlines()[0]


@dataclass(frozen=True)
class CheckSettings:
    gpu_index: int = 0
    phase_seconds: float = 45.0
    poll_interval_seconds: float = 1.0
    power_every_seconds: float = 2.0
    trace_path: Path | None = None


@dataclass
class Phase:
    name: str
    samples: list[GpuSample] = field(default_factory=list)
    power_watts: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


class Poller:
    """The agent's NVML source read every ``interval`` on a thread, into the current phase."""

    def __init__(self, source: NvmlSource, uuid: str, interval_seconds: float) -> None:
        self._source, self._uuid, self._interval = source, uuid, interval_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.phase = Phase("none")
        self.all: list[GpuSample] = []

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="device-check", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def read_now(self) -> GpuSample:
        return self._read()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            sample = self._read()
            self.phase.samples.append(sample)

    def _read(self) -> GpuSample:
        sample = next(s for s in self._source.read(time.time()) if s.gpu_uuid == self._uuid)
        self.all.append(sample)
        return sample


def run_check(
    settings: CheckSettings,
    source: NvmlSource,
    load: LoadDriver,
    smi: NvidiaSmi,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[Check], GpuInfo, list[GpuSample]]:
    """Run the phases and the checks; the load is idled and closed whatever happens."""
    info = next(
        i for i in source.discover() if i.index == settings.gpu_index and not i.mig_parent_uuid
    )
    poller = Poller(source, info.uuid, settings.poll_interval_seconds)
    phases: dict[str, Phase] = {}
    try:
        phases["stopped"] = _watch_power(Phase("idle, agent stopped"), settings, smi, sleep)
        energy_start = _energy_pair(poller, smi)
        poller.start()
        for name, action in (("idle", load.idle), ("compute", load.compute),
                             ("copy", load.copy), ("idle again", load.idle)):  # fmt: skip
            action()
            poller.phase = phases[name] = Phase(name)
            _watch_power(phases[name], settings, smi, sleep)
        poller.stop()
        energy_end = _energy_pair(poller, smi)
    finally:
        poller.stop()
        load.close()
    checks = [
        _energy_check(energy_start, energy_end),
        *_activity_checks(phases),
        _pcie_check(phases),
        _idle_power_check(phases["stopped"], phases["idle"]),
    ]
    return checks, info, poller.all


def _watch_power(
    phase: Phase, settings: CheckSettings, smi: NvidiaSmi, sleep: Callable[[float], None]
) -> Phase:
    deadline = time.monotonic() + settings.phase_seconds
    while time.monotonic() < deadline:
        phase.power_watts.append(smi.power_watts())
        sleep(min(settings.power_every_seconds, max(0.0, deadline - time.monotonic())))
    return phase


def _energy_pair(poller: Poller, smi: NvidiaSmi) -> tuple[float | None, float]:
    """The agent's energy (J) and nvidia-smi's (mJ) at one moment, taken at idle: the agent
    reads just before and just after nvidia-smi (which takes tens of ms to start), and the
    mean of its two readings stands for the moment nvidia-smi read."""
    before = poller.read_now().energy_joules
    theirs = smi.energy_millijoules()
    after = poller.read_now().energy_joules
    return (None if before is None or after is None else (before + after) / 2), theirs


def _energy_check(start: tuple[float | None, float], end: tuple[float | None, float]) -> Check:
    ours = (end[0] or 0.0) - (start[0] or 0.0)
    theirs = (end[1] - start[1]) / 1000
    if start[0] is None or end[0] is None or theirs <= 0:
        return Check(
            "energy", False, f"no energy delta to compare (agent {ours} J, smi {theirs} J)"
        )
    error = abs(ours - theirs) / theirs
    detail = f"agent {ours:.1f} J, nvidia-smi {theirs:.1f} J, off by {error:.3%} (limit 1 %)"
    return Check("energy", error <= ENERGY_TOLERANCE, detail)


def _activity_checks(phases: dict[str, Phase]) -> list[Check]:
    checks = []
    for name in ("idle", "idle again"):
        peaks = [max(s.sm_activity or 0.0, s.dram_activity or 0.0) for s in phases[name].samples]
        passed = bool(peaks) and all(a < IDLE_BELOW for a in peaks[1:])  # first read may lag
        checks.append(Check(f"{name} detected", passed, f"activity {peaks}"))
    busy = [s.sm_activity for s in phases["compute"].samples if s.sm_activity is not None]
    passed = bool(busy) and statistics.median(busy) > BUSY_ABOVE
    checks.append(
        Check("busy detected", passed, f"median SM activity {statistics.median(busy or [0])}")
    )
    return checks


def _pcie_check(phases: dict[str, Phase]) -> Check:
    def peak(phase: Phase) -> float:
        rates = [
            max(s.pcie_tx_bytes_per_second or 0.0, s.pcie_rx_bytes_per_second or 0.0)
            for s in phase.samples
        ]
        return max(rates, default=0.0)

    idle, copy = peak(phases["idle"]), peak(phases["copy"])
    passed = copy > PCIE_MOVED_BYTES_PER_SECOND and copy > 10 * idle
    return Check(
        "PCIe moved", passed, f"peak {copy / 1e9:.2f} GB/s copying, {idle / 1e9:.3f} GB/s idle"
    )


def _idle_power_check(stopped: Phase, polling: Phase) -> Check:
    without, with_agent = (
        statistics.median(stopped.power_watts),
        statistics.median(polling.power_watts),
    )
    limit = max(IDLE_POWER_TOLERANCE_WATTS, IDLE_POWER_TOLERANCE_RATIO * without)
    detail = (
        f"idle {without:.1f} W agent stopped, {with_agent:.1f} W polling at 1 Hz"
        f" (limit +{limit:.1f} W)"
    )
    return Check("polling adds no idle power", with_agent - without <= limit, detail)


def default_trace_path(info: GpuInfo) -> Path:
    model = info.name.replace(" ", "-").lower()
    stamp = time.strftime("%Y%m%d", time.gmtime())
    return (
        Path(__file__).resolve().parents[2]
        / "tests"
        / "fixtures"
        / "replay"
        / f"device-check-{model}-{stamp}.jsonl"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU to drive")
    parser.add_argument("--phase-seconds", type=float, default=45.0)
    parser.add_argument("--trace", type=Path, help="where to record the trace (JSONL)")
    args = parser.parse_args(argv)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA's ordinals = NVML's
    from gpufleet.cli.cuda_load import CudaLoad

    settings = CheckSettings(args.gpu, args.phase_seconds, trace_path=args.trace)
    source = NvmlSource(SourceSettings())
    try:
        checks, info, samples = run_check(settings, source, CudaLoad(args.gpu), NvidiaSmi(args.gpu))
    finally:
        source.close()
    path = settings.trace_path or default_trace_path(info)
    write_trace(path, samples, node=socket.gethostname(), gpus={info.uuid: info})
    for check in checks:
        print(f"{'PASS' if check.passed else 'FAIL'}  {check.name}: {check.detail}")
    print(f"trace: {path} ({len(samples)} samples)")
    return 0 if all(check.passed for check in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
