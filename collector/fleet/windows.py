"""Per-workload rolling windows of what the bottleneck verdicts need (issue 24).

The fleet's readings keep only what accounting needs; the verdicts need more (tensor pipes,
PCIe and NVLink, clocks and throttle reasons, XIDs, the host's CPU). So, as ingest buffers
a batch, each sample is folded into a per-minute summary of its (holder, GPU) and each host
reading into its workload's; ``windows`` turns the last ``window_seconds`` of minutes into
the plain summaries of collector/analysis/work_window.py. A minute is a handful of sums, so
a GPU costs ~30 of them whatever its sampling rate. Samples are folded in arrival order:
a minute's sums do not care, and a batch that arrives twice is refused before it gets here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

from agent.model import GpuSample, Workload, WorkloadHostSample
from collector.analysis.energy import workload_ref
from collector.analysis.verdicts import HARDWARE_XIDS, THROTTLE_MASK
from collector.analysis.work_window import GpuWindow, HostWindow, WorkloadWindow
from collector.records import WorkloadRef

MINUTE_SECONDS = 60.0
#: a GPU counts as busy (its clocks and throttle reasons matter) at this SM activity
_BUSY_SM = 0.05
#: PCIe bytes per second per lane and direction, by generation (after line encoding)
PCIE_LANE_BYTES_PER_SECOND = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}
#: the most (workload, GPU) pairs followed; past it new pairs are not (counted)
MAX_TRACKS = 200_000


class _Minute:
    """One minute of one holder's GPU: sums and counts."""

    __slots__ = (
        "busy",
        "clock",
        "clock_n",
        "dram",
        "dram_n",
        "ecc_high",
        "ecc_low",
        "lost",
        "n",
        "nv",
        "nv_n",
        "remap",
        "rx",
        "rx_max",
        "rx_n",
        "sm",
        "sm2",
        "sm_n",
        "tensor",
        "tensor_n",
        "throttled",
        "used",
        "xid",
        "xids",
    )  # fmt: skip

    def __init__(self) -> None:
        self.n = self.lost = self.sm_n = self.dram_n = self.tensor_n = 0
        self.busy = self.throttled = self.clock_n = self.rx_n = self.nv_n = self.xid = 0
        self.remap = 0
        self.sm = self.sm2 = self.dram = self.tensor = self.used = 0.0
        self.clock = self.rx = self.rx_max = self.nv = 0.0
        self.ecc_low: int | None = None
        self.ecc_high: int | None = None
        #: the hardware XID codes seen (rare: only faulted GPUs pay for the set)
        self.xids: frozenset[int] = frozenset()

    def add(self, s: GpuSample) -> None:
        self.n += 1
        if s.xid_errors and not HARDWARE_XIDS.isdisjoint(s.xid_errors):
            self.xid += 1
            self.xids |= HARDWARE_XIDS.intersection(s.xid_errors)
        sm = s.sm_activity
        if sm is None or not s.healthy:
            self.lost += 1
            return
        self.sm_n += 1
        self.sm += sm
        self.sm2 += sm * sm
        if (dram := s.dram_activity) is not None:
            self.dram_n += 1
            self.dram += dram
        if (tensor := s.tensor_activity) is not None:
            self.tensor_n += 1
            self.tensor += tensor
        clock, default = s.sm_clock_hertz, s.sm_clock_default_hertz
        if clock and default:
            ratio = clock / default if clock < default else 1.0
            self.used += sm * ratio
            if sm >= _BUSY_SM:
                self.clock_n += 1
                self.clock += ratio
        else:
            self.used += sm
        if sm >= _BUSY_SM:
            self.busy += 1
            if (reasons := s.throttle_reasons) and reasons & THROTTLE_MASK:
                self.throttled += 1
        if (
            s.pcie_rx_bytes_per_second is not None
            or s.nvlink_tx_bytes_per_second is not None
            or s.nvlink_rx_bytes_per_second is not None
        ):
            self._links(s)
        if s.remapped_rows_pending:
            self.remap += 1
        if (ecc := s.ecc_uncorrected_total) is not None:
            self._ecc(ecc)

    def _ecc(self, ecc: int) -> None:
        self.ecc_low = ecc if self.ecc_low is None else min(self.ecc_low, ecc)
        self.ecc_high = ecc if self.ecc_high is None else max(self.ecc_high, ecc)

    def _links(self, s: GpuSample) -> None:
        rx, gen, width = s.pcie_rx_bytes_per_second, s.pcie_link_generation_max, s.pcie_link_width
        lane = PCIE_LANE_BYTES_PER_SECOND.get(gen or 0)
        width = s.pcie_link_width_max or width
        if rx is not None and lane and width:
            share = rx / (lane * width)
            self.rx_n += 1
            self.rx += share
            self.rx_max = max(self.rx_max, share)
        tx, rx_nv = s.nvlink_tx_bytes_per_second, s.nvlink_rx_bytes_per_second
        if tx is not None or rx_nv is not None:
            self.nv_n += 1
            self.nv += (tx or 0.0) + (rx_nv or 0.0)


class _HostMinute:
    __slots__ = ("cpu", "limit", "n", "psi", "psi_n", "thr", "thr_n")

    def __init__(self) -> None:
        self.n = self.thr_n = self.psi_n = 0
        self.cpu = self.thr = self.psi = 0.0
        self.limit: float | None = None

    def add(self, h: WorkloadHostSample) -> None:
        if h.cpu_used_cores is None:
            return
        self.n += 1
        self.cpu += h.cpu_used_cores
        self.limit = h.cpu_limit_cores
        if h.cpu_throttled_ratio is not None:
            self.thr_n += 1
            self.thr += h.cpu_throttled_ratio
        if h.memory_pressure_ratio is not None:
            self.psi_n += 1
            self.psi += h.memory_pressure_ratio


class _Track:
    __slots__ = ("minutes", "model", "node")

    def __init__(self, node: str, model: str) -> None:
        self.node, self.model = node, model
        self.minutes: dict[int, _Minute] = {}


class WorkloadWindows:
    """Rolling per-minute summaries of every holder's GPUs and host, ``window_seconds`` long."""

    def __init__(self, window_seconds: float = 1800.0, max_tracks: int = MAX_TRACKS) -> None:
        self.window_seconds = window_seconds
        self._max_tracks = max_tracks
        self._tracks: dict[str, dict[str, _Track]] = {}  # workload key -> uuid -> track
        self._refs: dict[str, WorkloadRef] = {}
        self._hosts: dict[str, dict[int, _HostMinute]] = {}
        self._count = 0
        #: (workload, GPU) pairs not followed because ``max_tracks`` was reached
        self.dropped = 0

    def observe(self, node: str, model: str, samples: Iterable[GpuSample]) -> None:
        """Fold one GPU's samples (of ``model`` on ``node``) into its holders' minutes.

        A GPU's consecutive samples mostly have the same holders: their tracks are looked
        up once per change of holders, not once per sample (bench/collector_instructions)."""
        holders: tuple[Workload, ...] | None = None
        tracks: list[_Track] = []
        for sample in samples:
            if sample.workloads != holders:
                holders = sample.workloads
                tracks = self._tracks_of(holders, sample.gpu_uuid, node, model)
            if not tracks:
                continue
            minute = int(sample.timestamp // MINUTE_SECONDS)
            for track in tracks:
                acc = track.minutes.get(minute)
                if acc is None:
                    acc = track.minutes[minute] = _Minute()
                acc.add(sample)

    def _tracks_of(
        self, holders: Sequence[Workload], uuid: str, node: str, model: str
    ) -> list[_Track]:
        found = (self._track(h.key, uuid, node, model, h) for h in holders)
        return [track for track in found if track is not None]

    def observe_hosts(self, hosts: Iterable[WorkloadHostSample]) -> None:
        for host in hosts:
            minutes = self._hosts.get(host.workload_key)
            if minutes is None:
                if host.workload_key not in self._tracks:
                    continue  # a workload that holds no GPU we follow
                minutes = self._hosts[host.workload_key] = {}
            minute = math.floor(host.timestamp / MINUTE_SECONDS)
            acc = minutes.get(minute)
            if acc is None:
                acc = minutes[minute] = _HostMinute()
            acc.add(host)

    def _track(self, key: str, uuid: str, node: str, model: str, holder: Workload) -> _Track | None:
        gpus = self._tracks.get(key)
        track = gpus.get(uuid) if gpus is not None else None
        if track is not None:
            track.node, track.model = node, model
            return track
        if self._count >= self._max_tracks:
            self.dropped += 1
            return None
        if gpus is None:
            gpus = self._tracks[key] = {}
            self._refs[key] = workload_ref(holder)
        track = gpus[uuid] = _Track(node, model)
        self._count += 1
        return track

    def windows(self, now: float) -> list[WorkloadWindow]:
        """Each workload seen within the window before ``now`` (event time), its GPUs in
        uuid order; older minutes, and workloads gone quiet, are dropped here."""
        first = math.floor((now - self.window_seconds) / MINUTE_SECONDS)
        out = []
        for key in sorted(self._tracks):
            gpus = self._prune(key, first)
            if not gpus:
                continue
            host = self._host_window(key, first)
            out.append(_window(self._refs[key], gpus, host))
        return out

    def _prune(self, key: str, first: int) -> list[tuple[str, _Track]]:
        tracks = self._tracks[key]
        for uuid in list(tracks):
            minutes = tracks[uuid].minutes
            for minute in [m for m in minutes if m < first]:
                del minutes[minute]
            if not minutes:
                del tracks[uuid]
                self._count -= 1
        if not tracks:
            del self._tracks[key], self._refs[key]
            self._hosts.pop(key, None)
        return sorted(tracks.items())

    def _host_window(self, key: str, first: int) -> HostWindow | None:
        minutes = self._hosts.get(key)
        if not minutes:
            return None
        for minute in [m for m in minutes if m < first]:
            del minutes[minute]
        return _host([minutes[m] for m in sorted(minutes)])


def _window(
    ref: WorkloadRef, gpus: Sequence[tuple[str, _Track]], host: HostWindow | None
) -> WorkloadWindow:
    spans = [m for _, t in gpus for m in t.minutes]
    start, end = min(spans) * MINUTE_SECONDS, (max(spans) + 1) * MINUTE_SECONDS
    return WorkloadWindow(ref, start, end, tuple(_gpu(u, t) for u, t in gpus), host)


def _ratio(num: float, den: int) -> float | None:
    return num / den if den else None


def _gpu(uuid: str, track: _Track) -> GpuWindow:
    ms = list(track.minutes.values())
    n, sm_n = sum(m.n for m in ms), sum(m.sm_n for m in ms)
    busy = sum(m.busy for m in ms)
    wobbles = [math.sqrt(max(0.0, m.sm2 / m.sm_n - (m.sm / m.sm_n) ** 2)) for m in ms if m.sm_n > 1]
    bursts = [m.rx_max for m in ms if m.rx_n]
    ecc = [(m.ecc_low, m.ecc_high) for m in ms if m.ecc_low is not None]
    return GpuWindow(
        uuid=uuid,
        node=track.node,
        model=track.model,
        samples=n,
        unhealthy_samples=n - sm_n,
        sm_mean=_ratio(sum(m.sm for m in ms), sm_n),
        sm_wobble=statistics.fmean(wobbles) if wobbles else None,
        dram_mean=_ratio(sum(m.dram for m in ms), sum(m.dram_n for m in ms)),
        tensor_mean=_ratio(sum(m.tensor for m in ms), sum(m.tensor_n for m in ms)),
        used_share=sum(m.used for m in ms) / n if n else 0.0,
        pcie_rx_share_mean=_ratio(sum(m.rx for m in ms), sum(m.rx_n for m in ms)),
        pcie_rx_share_burst=statistics.fmean(bursts) if bursts else None,
        nvlink_bytes_per_second=_ratio(sum(m.nv for m in ms), sum(m.nv_n for m in ms)),
        throttled_share=sum(m.throttled for m in ms) / busy if busy else 0.0,
        clock_ratio=_ratio(sum(m.clock for m in ms), sum(m.clock_n for m in ms)),
        fault_xid_samples=sum(m.xid for m in ms),
        fault_xids=tuple(sorted(frozenset().union(*(m.xids for m in ms)))),
        remap_pending_samples=sum(m.remap for m in ms),
        ecc_uncorrected_increase=(
            max(h for _, h in ecc if h is not None) - min(lo for lo, _ in ecc if lo is not None)
            if ecc
            else 0
        ),
    )


def _host(ms: list[_HostMinute]) -> HostWindow | None:
    n = sum(m.n for m in ms)
    if not n:
        return None
    limits = [m.limit for m in ms if m.n]
    return HostWindow(
        samples=n,
        cpu_used_cores=sum(m.cpu for m in ms) / n,
        cpu_limit_cores=limits[-1] if limits else None,
        cpu_throttled_ratio=_ratio(sum(m.thr for m in ms), sum(m.thr_n for m in ms)),
        memory_pressure_ratio=_ratio(sum(m.psi for m in ms), sum(m.psi_n for m in ms)),
    )
