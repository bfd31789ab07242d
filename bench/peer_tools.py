"""The three read paths bench/agent_peers.py compares, each as a ``poll()`` over the fake NVML.

- **gpufleet**: ``Sampler.tick()`` over ``NvmlSource`` with the ``Attributor`` (read and
  attribution; no shipper, no exporter), its GPM sample gap on the fake clock.
- **nvitop getters**: per ``Device`` in ``oneshot()``: utilisation, memory, power,
  temperature, SM and memory clocks, processes with their SM share, and the energy
  counter through ``libnvml.nvmlQuery`` (nvitop has no getter for it).
- **nvitop as_snapshot**: ``Device.as_snapshot()`` (its 41 SNAPSHOT_KEYS) plus ``processes()``.
- **gpustat**: ``gpustat.new_query()``, which initialises and shuts NVML down each call.
  Its 0.1 s wall-clock sleep per GPU with processes (for psutil's cpu_percent) is skipped:
  it costs no CPU, only wall time.

``fields()`` names what the last poll answered, in one vocabulary (FIELD_NAMES), so the
tools' coverage can be compared: a field the tool asks for but the fake GPU cannot answer
(fan speed on an SXM board) does not count.
"""

from __future__ import annotations

import contextlib
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

GPUS = 8
#: the common vocabulary of fields (nvidia-smi --query-gpu names where there is one)
FIELD_NAMES = (
    "GPU busy (utilization.gpu or GPM SM activity)",
    "memory busy (utilization.memory or GPM DRAM bandwidth)",
    "sm_occupancy (GPM)",
    "tensor_activity (GPM)",
    "memory.used",
    "memory.total",
    "memory.reserved",
    "power.draw",
    "energy",
    "temperature.gpu",
    "temperature.memory",
    "clocks.sm",
    "clocks.mem",
    "clocks_event_reasons",
    "ecc.errors",
    "remapped_rows",
    "xid events",
    "processes (pid, memory)",
    "process SM share",
    "process workload (pod/job)",
    "power.limit",
    "fan.speed",
    "utilization.encoder/decoder",
)

BUSY, MEMORY_BUSY = FIELD_NAMES[0], FIELD_NAMES[1]


class PeerTool(Protocol):
    name: str

    def poll(self) -> None: ...

    def fields(self) -> set[str]: ...


def _answered(values: dict[str, object]) -> set[str]:
    """The names whose value is known (not None, not nvitop's NA, not empty)."""
    return {name for name, value in values.items() if value not in (None, "N/A", (), [], {})}


class GpufleetTool:
    name = "gpufleet"

    def __init__(self, fake_clock: Any, work_dir: Path, pids: list[int]) -> None:
        from agent.attribution.attributor import Attributor
        from agent.config import AttributionSettings, SourceSettings
        from agent.sampler import Sampler
        from agent.sources.nvml.source import NvmlSource
        from agent.stats import AgentStats

        self._clock = fake_clock
        stats = AgentStats()
        settings = AttributionSettings(
            kubelet_socket=work_dir / "kubelet.sock",
            proc_root=_fake_proc(work_dir / "proc", pids),
            gpustat_dir=work_dir / "gpustat",
        )
        self._source = NvmlSource(SourceSettings(), stats, fake_clock, fake_clock.sleep)
        self._attributor = Attributor(settings, stats, monotonic=fake_clock)
        self._sampler = Sampler(
            self._source, stats, 1.0, self._attributor, clock=self._unix, monotonic=fake_clock
        )
        self._last: list[Any] = []

    def _unix(self) -> float:
        return 1.7e9 + float(self._clock())

    def poll(self) -> None:
        self._last = self._sampler.tick()

    def fields(self) -> set[str]:
        gpus, _ = self._sampler.snapshot()
        found: set[str] = set()
        for sample in self._last:
            p = sample.processes
            found |= _answered(
                {
                    BUSY: sample.sm_activity,
                    MEMORY_BUSY: sample.dram_activity,
                    "sm_occupancy (GPM)": sample.sm_occupancy,
                    "tensor_activity (GPM)": sample.tensor_activity,
                    "memory.used": sample.memory_used_bytes,
                    "memory.total": sample.memory_total_bytes,
                    "memory.reserved": sample.memory_reserved_bytes,
                    "power.draw": sample.power_watts,
                    "energy": sample.energy_joules,
                    "temperature.gpu": sample.temperature_celsius,
                    "temperature.memory": sample.memory_temperature_celsius,
                    "clocks.sm": sample.sm_clock_hertz,
                    "clocks.mem": sample.memory_clock_hertz,
                    "clocks_event_reasons": sample.throttle_reasons,
                    "ecc.errors": sample.ecc_corrected_total,
                    "remapped_rows": sample.remapped_rows_correctable,
                    "xid events": sample.xid_errors is not None or None,
                    "processes (pid, memory)": p,
                    "process SM share": [x for x in p if x.sm_share is not None],
                    "process workload (pod/job)": [x for x in p if x.workload is not None],
                    "utilization.encoder/decoder": sample.encoder_activity,
                }
            )
        found |= _answered({"power.limit": [g for g in gpus if g.power_limit_watts]})
        return found

    def close(self) -> None:
        self._attributor.close()
        self._source.close()


class NvitopGetters:
    name = "nvitop getters"

    def __init__(self) -> None:
        from nvitop import Device
        from nvitop.api import libnvml

        self._libnvml = libnvml
        self._devices = Device.all()
        self._last: list[dict[str, object]] = []

    def poll(self) -> None:
        self._last = [self._read(device) for device in self._devices]

    def _read(self, device: Any) -> dict[str, object]:
        with device.oneshot():
            processes = device.processes()
            return {
                BUSY: device.gpu_utilization(),
                MEMORY_BUSY: device.memory_utilization(),
                "memory.used": device.memory_used(),
                "memory.total": device.memory_total(),
                "power.draw": device.power_usage(),
                "energy": self._libnvml.nvmlQuery(
                    "nvmlDeviceGetTotalEnergyConsumption", device.handle
                ),
                "temperature.gpu": device.temperature(),
                "clocks.sm": device.sm_clock(),
                "clocks.mem": device.memory_clock(),
                "processes (pid, memory)": processes,
                "process SM share": [
                    p for p in processes.values() if p.gpu_sm_utilization() != "N/A"
                ],
            }

    def fields(self) -> set[str]:
        return set().union(*(_answered(values) for values in self._last))

    def close(self) -> None:
        pass


class NvitopSnapshot(NvitopGetters):
    name = "nvitop as_snapshot"

    def _read(self, device: Any) -> dict[str, object]:
        snapshot = device.as_snapshot()
        processes = device.processes()
        return {
            BUSY: snapshot.gpu_utilization,
            MEMORY_BUSY: snapshot.memory_utilization,
            "memory.used": snapshot.memory_used,
            "memory.total": snapshot.memory_total,
            "power.draw": snapshot.power_usage,
            "power.limit": snapshot.power_limit,
            "temperature.gpu": snapshot.temperature,
            "clocks.sm": snapshot.sm_clock,
            "clocks.mem": snapshot.memory_clock,
            "fan.speed": snapshot.fan_speed,
            "utilization.encoder/decoder": snapshot.encoder_utilization,
            "ecc.errors": snapshot.total_volatile_uncorrected_ecc_errors,
            "processes (pid, memory)": processes,
            "process SM share": [p for p in processes.values() if p.gpu_sm_utilization() != "N/A"],
        }


class GpustatTool:
    name = "gpustat"

    def __init__(self) -> None:
        import gpustat.core

        self._core = gpustat.core
        # the module's own name for time: sleep skipped (wall time only), the rest as is
        gpustat.core.time = types.SimpleNamespace(
            **{k: getattr(gpustat.core.time, k) for k in dir(gpustat.core.time) if k[0] != "_"},
        )
        gpustat.core.time.sleep = lambda seconds: None
        self._last: Any = None

    def poll(self) -> None:
        self._last = self._core.new_query()

    def fields(self) -> set[str]:
        found: set[str] = set()
        for gpu in self._last.gpus if self._last else ():
            entry = gpu.entry
            found |= _answered(
                {
                    BUSY: entry["utilization.gpu"],
                    "memory.used": entry["memory.used"],
                    "memory.total": entry["memory.total"],
                    "power.draw": entry["power.draw"],
                    "power.limit": entry["enforced.power.limit"],
                    "temperature.gpu": entry["temperature.gpu"],
                    "fan.speed": entry["fan.speed"],
                    "utilization.encoder/decoder": entry["utilization.enc"],
                    "processes (pid, memory)": entry["processes"],
                }
            )
        return found

    def close(self) -> None:
        pass


TOOLS = ("gpufleet", "nvitop getters", "nvitop as_snapshot", "gpustat")


@contextlib.contextmanager
def opened_tool(name: str, fake_clock: Any, pids: list[int]) -> Iterator[Any]:
    """The tool called ``name``, with NVML initialised, closed at the end of the block."""
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        tool: Any
        if name == "gpufleet":
            tool = GpufleetTool(fake_clock, Path(tmp), pids)
        elif name == "nvitop getters":
            tool = NvitopGetters()
        elif name == "nvitop as_snapshot":
            tool = NvitopSnapshot()
        elif name == "gpustat":
            tool = GpustatTool()
        else:
            raise ValueError(f"unknown tool {name!r}; choose from {', '.join(TOOLS)}")
        try:
            yield tool
        finally:
            tool.close()


#: cgroup and environ of the scenario's GPU processes, in scenario order: a Kubernetes pod
#: (GPU 0) and a two-process Slurm job (GPU 1)
_IDENTITIES = (
    (
        "0::/kubepods.slice/kubepods-pod0d1e8a5a_0000_4b7c_9d2a_000000000042.slice/"
        "cri-containerd-" + "ab" * 32 + ".scope\n",
        b"HOSTNAME=trainer-0\0PATH=/usr/bin\0",
    ),
    ("0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0\n", b"SLURM_JOB_ID=77\0"),
    ("0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_1\n", b"SLURM_JOB_ID=77\0"),
)


def with_live_pids(scenario: Any, pids: list[int]) -> Any:
    """The scenario with its GPU processes renumbered to ``pids`` (live processes), so
    gpustat's and nvitop's psutil look-ups find a process, as on a real node."""
    import dataclasses

    live = iter(pids)
    gpus = tuple(
        dataclasses.replace(
            gpu,
            processes=tuple(dataclasses.replace(p, pid=next(live)) for p in gpu.processes),
        )
        for gpu in scenario.gpus
    )
    return dataclasses.replace(scenario, gpus=gpus)


def live_pid_count(scenario: Any) -> int:
    return sum(len(gpu.processes) for gpu in scenario.gpus)


def _fake_proc(root: Path, pids: list[int]) -> Path:
    """A /proc with the GPU processes' cgroups, so attribution does its real work."""
    for pid, (cgroup, environ) in zip(pids, _IDENTITIES, strict=False):
        directory = root / str(pid)
        directory.mkdir(parents=True)
        (directory / "cgroup").write_text(cgroup)
        (directory / "environ").write_bytes(environ)
        (directory / "status").write_text("Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n")
        (directory / "comm").write_text("python\n")
    return root
