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
from collections.abc import Iterable, Sequence

from agent.model import GpuSample, Workload, WorkloadHostSample
from collector.analysis.energy import workload_ref
from collector.analysis.work_window import GpuWindow, HostWindow, WorkloadWindow
from collector.fleet.minutes import (
    BUSY,
    CLOCK,
    CLOCK_N,
    DRAM,
    DRAM_N,
    LOST,
    NV,
    NV_N,
    REMAP,
    RX,
    RX_N,
    SM,
    SM2,
    SM_N,
    TENSOR,
    TENSOR_N,
    THROTTLED,
    USED,
    XID,
    Minute,
    N,
)
from collector.records import WorkloadRef

MINUTE_SECONDS = 60.0
#: the most (workload, GPU) pairs followed; past it new pairs are not (counted)
MAX_TRACKS = 200_000


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
        self.minutes: dict[int, Minute] = {}


class WorkloadWindows:
    """Rolling per-minute summaries of every holder's GPUs and host, ``window_seconds`` long."""

    def __init__(self, window_seconds: float = 1800.0, max_tracks: int = MAX_TRACKS) -> None:
        self.window_seconds = window_seconds
        self._max_tracks = max_tracks
        self._tracks: dict[str, dict[str, _Track]] = {}  # workload key -> uuid -> track
        self._refs: dict[str, WorkloadRef] = {}
        self._hosts: dict[str, dict[int, _HostMinute]] = {}
        self._count = 0
        #: GPU uuid -> (holders, node, model, their tracks): ``_tracks_for``'s memory
        self._holding: dict[str, tuple[tuple[Workload, ...], str, str, list[_Track]]] = {}
        #: (workload, GPU) pairs not followed because ``max_tracks`` was reached
        self.dropped = 0

    def observe(
        self, node: str, model: str, samples: Iterable[GpuSample], after: float = -math.inf
    ) -> None:
        """Fold one GPU's samples newer than ``after`` (of ``model`` on ``node``) into its
        holders' minutes, a run at a time: consecutive samples with the same holders in
        the same minute (a batch is mostly one), so the holders' tracks are looked up and
        a minute stored once per run, not once per sample (bench/collector_instructions)."""
        run: list[GpuSample] = []
        minute, begin, end = 0, 0.0, 0.0  # the run's minute, and its bounds in seconds
        holders: tuple[Workload, ...] = ()
        for sample in samples:
            ts = sample.timestamp
            if begin <= ts < end and after < ts and sample.workloads == holders:
                run.append(sample)
            elif after < ts:
                if run and holders:
                    self._fold_run(minute, run, node, model)
                minute = int(ts // MINUTE_SECONDS)
                begin, end = minute * MINUTE_SECONDS, (minute + 1) * MINUTE_SECONDS
                run, holders = [sample], sample.workloads
        if run and holders:  # nobody holds a GPU without holders: no window to fold into
            self._fold_run(minute, run, node, model)

    def _fold_run(self, minute: int, run: list[GpuSample], node: str, model: str) -> None:
        tracks = self._tracks_for(run[0].workloads, run[0].gpu_uuid, node, model)
        if not tracks:
            return
        for track in tracks:  # each holder of a shared GPU folds the run into its own minute
            acc = track.minutes.get(minute)
            if acc is None:
                acc = track.minutes[minute] = Minute()
            acc.fold(run)

    def _tracks_for(
        self, holders: tuple[Workload, ...], uuid: str, node: str, model: str
    ) -> list[_Track]:
        """The tracks of ``holders`` on GPU ``uuid``, remembered per GPU until its holders,
        node or model change, or ``windows`` prunes (each ``Workload.key`` is a format)."""
        held = self._holding.get(uuid)
        if held is not None and held[0] == holders and held[1] == node and held[2] == model:
            return held[3]
        tracks = self._tracks_of(holders, uuid, node, model)
        self._holding[uuid] = (holders, node, model, tracks)
        return tracks

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
        self._holding.clear()  # tracks pruned below must not be folded into again
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


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None  # statistics.fmean's way


def _gpu(uuid: str, track: _Track) -> GpuWindow:
    rows = [m.sums for m in track.minutes.values()]
    t = list(map(sum, zip(*rows, strict=True)))  # the window's column sums
    n, busy = t[N], t[BUSY]
    wobbles = [
        math.sqrt(max(0.0, s[SM2] / s[SM_N] - (s[SM] / s[SM_N]) ** 2)) for s in rows if s[SM_N] > 1
    ]
    ms = track.minutes.values()
    lows = [m.ecc_low for m in ms if m.ecc_low is not None]
    highs = [m.ecc_high for m in ms if m.ecc_high is not None]
    return GpuWindow(
        uuid=uuid,
        node=track.node,
        model=track.model,
        samples=n,
        unhealthy_samples=t[LOST],
        sm_mean=t[SM] / t[SM_N] if t[SM_N] else None,
        sm_wobble=_mean(wobbles),
        dram_mean=t[DRAM] / t[DRAM_N] if t[DRAM_N] else None,
        tensor_mean=t[TENSOR] / t[TENSOR_N] if t[TENSOR_N] else None,
        used_share=t[USED] / n if n else 0.0,
        pcie_rx_share_mean=t[RX] / t[RX_N] if t[RX_N] else None,
        pcie_rx_share_burst=_mean([m.rx_max for m in ms if m.sums[RX_N]]),
        nvlink_bytes_per_second=t[NV] / t[NV_N] if t[NV_N] else None,
        throttled_share=t[THROTTLED] / busy if busy else 0.0,
        clock_ratio=t[CLOCK] / t[CLOCK_N] if t[CLOCK_N] else None,
        fault_xid_samples=t[XID],
        fault_xids=tuple(sorted(frozenset().union(*(m.xids for m in ms)))),
        remap_pending_samples=t[REMAP],
        ecc_uncorrected_increase=max(highs) - min(lows) if lows else 0,
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
