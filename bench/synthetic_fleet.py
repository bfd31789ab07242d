"""A large synthetic GPU fleet: realistic GpuSamples at 1 Hz without running the simulator.

The simulator models hardware and workloads exactly but is too slow to produce 10,000
GPUs x 60 s for a throughput benchmark. This fleet copies the simulator's GPU identities
(H100, A100, L4 nodes of 8 GPUs) and draws every field from one seeded RNG, so the
collector benchmark and the Prometheus exporter it is compared with see the same values
when they generate the seconds in the same order.

GPU i of a node runs: 0-3 a 4-GPU training pod, 4 an inference pod (bursty), 5 a notebook
(mostly idle, memory held), 6 a stuck job (allocated, 0 % activity), 7 nothing (free).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, ProcessSample, Workload
from agent.model import WorkloadKind as Kind
from agent.sources.simulated.source import SimulatedNode
from agent.spool import gzip_batch

GPUS_PER_NODE = 8
#: seconds of samples per batch, as the agent ships by default (batch_interval_seconds)
BATCH_SECONDS = 5
MODELS = ("H100", "A100", "L4")
#: (board power limit, idle power) in watts, from collector/data/gpu_models.yaml
POWER_WATTS = {"H100": (700.0, 70.0), "A100": (400.0, 55.0), "L4": (72.0, 14.0)}
ROLES = ("training",) * 4 + ("inference", "notebook", "stuck", "free")


@dataclass(frozen=True)
class FleetGpu:
    node: str
    info: GpuInfo
    model: str
    role: str
    workloads: tuple[Workload, ...]


def build_gpus(gpus: int) -> list[FleetGpu]:
    """``gpus`` GPUs (a multiple of 8 is best) on nodes ``bench-00000``, ``bench-00001``..."""
    templates = {m: SimulatedNode.build("template", [m]).discover()[0] for m in MODELS}
    out = []
    for n in range(gpus):
        node_index, slot = divmod(n, GPUS_PER_NODE)
        node, model, role = f"bench-{node_index:05d}", MODELS[node_index % 3], ROLES[slot]
        info = msgspec.structs.replace(
            templates[model],
            uuid=f"GPU-bench-{n:08d}",
            index=slot,
            pci_bus_id=f"00000000:{0x18 + slot * 0x10:02X}:00.0",
        )
        out.append(FleetGpu(node, info, model, role, _workloads(node, role)))
    return out


def _workloads(node: str, role: str) -> tuple[Workload, ...]:
    if role == "free":
        return ()
    name = f"{role}-{node}"
    namespace = {"training": "ml-train", "inference": "serving"}.get(role, "research")
    return (
        Workload(
            kind=Kind.KUBERNETES_POD,
            id=f"uid-{name}",
            name=name,
            namespace=namespace,
            container="main",
            team=namespace,
        ),
    )


class SampleStream:
    """Each GPU's samples second after second; call ``samples_at`` with rising seconds."""

    def __init__(self, gpus: list[FleetGpu], start_unix: float, seed: int = 0) -> None:
        self.gpus = gpus
        self.start_unix = start_unix
        self._rng = random.Random(seed)
        self._energy_joules = [1.0e9 + 1.0e6 * i for i in range(len(gpus))]

    def samples_at(self, second: int) -> list[GpuSample]:
        ts = self.start_unix + second
        return [self._sample(i, gpu, ts) for i, gpu in enumerate(self.gpus)]

    def _sample(self, i: int, gpu: FleetGpu, ts: float) -> GpuSample:
        r = self._rng.random()
        sm, dram = _activity(gpu.role, r)
        limit, idle = POWER_WATTS[gpu.model]
        watts = idle + (limit - idle) * sm * (0.8 + 0.2 * r) + (40.0 if gpu.role == "stuck" else 0)
        self._energy_joules[i] += watts
        total = gpu.info.memory_total_bytes or 0
        used = int(total * _MEMORY_SHARE[gpu.role] * (0.95 + 0.05 * r))
        gpm = gpu.model == "H100"
        return GpuSample(
            timestamp=ts,
            gpu_uuid=gpu.info.uuid,
            sm_activity=sm,
            dram_activity=dram,
            sm_occupancy=sm * 0.5 if gpm else None,
            tensor_activity=sm * 0.7 if gpm else None,
            activity_coarse=not gpm,
            power_watts=round(watts, 3),
            energy_joules=round(self._energy_joules[i], 3),
            temperature_celsius=round(30.0 + 50.0 * watts / limit, 1),
            memory_temperature_celsius=round(28.0 + 55.0 * watts / limit, 1),
            memory_used_bytes=used,
            memory_total_bytes=total,
            sm_clock_hertz=1.98e9 if sm > 0.01 else 3.45e8,
            memory_clock_hertz=2.619e9,
            throttle_reasons=0x1 if sm < 0.01 else 0x0,
            ecc_corrected_total=0,
            ecc_uncorrected_total=0,
            processes=_processes(gpu, used, sm),
            workloads=gpu.workloads,
        )


_MEMORY_SHARE = {"training": 0.8, "inference": 0.45, "notebook": 0.3, "stuck": 0.5, "free": 0.0}


def _activity(role: str, r: float) -> tuple[float, float]:
    """(SM activity, DRAM activity) for a role and a uniform random number."""
    if role == "training":
        return round(0.85 + 0.13 * r, 4), round(0.45 + 0.3 * r, 4)
    if role == "inference":
        return (round(0.2 + 0.6 * r, 4), round(0.1 + 0.3 * r, 4)) if r < 0.6 else (0.0, 0.0)
    if role == "notebook":
        return (0.35, 0.1) if r < 0.05 else (0.002, 0.001)
    return 0.0, 0.0


def _processes(gpu: FleetGpu, used: int, sm: float) -> tuple[ProcessSample, ...]:
    if not gpu.workloads:
        return ()
    pid = 10_000 + gpu.info.index
    return (
        ProcessSample(
            pid=pid, used_memory_bytes=used, sm_share=sm, name="python", workload=gpu.workloads[0]
        ),
    )


def gzipped_batches(
    stream: SampleStream, seconds: int, batch_seconds: int = BATCH_SECONDS
) -> Iterator[tuple[int, bytes, int]]:
    """(arrival second, gzipped body as the agent sends it, samples) in arrival order.

    Node k ships every ``batch_seconds``, staggered by k so arrivals spread evenly;
    whatever is left is shipped at the last second.
    """
    nodes: dict[str, list[FleetGpu]] = {}
    for gpu in stream.gpus:
        nodes.setdefault(gpu.node, []).append(gpu)
    node_names = list(nodes)
    buffers: dict[str, list[GpuSample]] = {name: [] for name in node_names}
    seqs = dict.fromkeys(node_names, 0)
    for second in range(seconds):
        for sample, gpu in zip(stream.samples_at(second), stream.gpus, strict=True):
            buffers[gpu.node].append(sample)
        last = second == seconds - 1
        for k, name in enumerate(node_names):
            due = (second + k) % batch_seconds == batch_seconds - 1
            if buffers[name] and (due or last):
                seqs[name] += 1
                body = _body(stream, name, nodes[name], seqs[name], buffers[name], second)
                yield second, body, len(buffers[name])
                buffers[name] = []


def _body(
    stream: SampleStream,
    node: str,
    gpus: list[FleetGpu],
    seq: int,
    samples: list[GpuSample],
    second: int,
) -> bytes:
    batch = Batch(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_boot_id=f"boot-{node}",
        seq=seq,
        sent_at=stream.start_unix + second + 0.5,
        gpus=tuple(g.info for g in gpus),
        samples=tuple(samples),
        agent_version="bench",
        node_labels={"region": "DEU"},
    )
    return gzip_batch(batch)
