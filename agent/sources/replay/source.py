"""A GPU source that replays a recorded trace (formats.py beside it describes the formats).

Gaps are missing data, never zeros. A recorded point holds for 1.5 trace steps (the step is
the most common spacing between a GPU's consecutive points, unless given), each measured
field on its own (timeline.py: the one rule, for ``read`` and ``iter_samples`` alike).
Within a GPU's recorded life, ``read(now)`` always yields one sample for it; when ``now``
falls in a gap, that sample has every measured field ``None`` (sm_activity, dram_activity,
power, energy, memory, ...) and keeps the last recorded workloads, so the collector sees
"unknown", never "idle". A field a point did not record (the Alibaba utilisation series has
holes the memory series has not) carries its last value while that holds, then is
``None``. Before a GPU's first point and from 1.5 steps after its last, the GPU yields no
sample: it did not exist then.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from agent.config import SourceSettings
from agent.model import GpuInfo, GpuSample
from agent.sources.interface import SourceError
from agent.sources.replay.formats import (
    TraceRows,
    gpu_info_from_meta,
    open_trace_files,
    parse_stream,
)
from agent.sources.replay.timeline import Timeline, build_timeline
from gpufleet.settings import ConfigError

log = logging.getLogger(__name__)

#: a point stands for this many steps; past it the series is in a gap
HOLD_STEPS = 1.5
#: used when no GPU has two points to measure the step from
FALLBACK_STEP_SECONDS = 1.0


class ReplaySource:
    """GpuSource over a recorded trace: a file, a directory of trace files, or a .tar.gz.

    ``node``: when the trace has a ``node`` column, only that node's rows are replayed
    (SourceError if it has none); when it has none, every row is replayed as that node.
    ``start_at``: shift the trace so its first point falls at this Unix time (the agent
    replays a 2022 trace "now"); samples and ``start``/``end`` carry shifted times.
    """

    def __init__(
        self,
        path: Path,
        node: str | None = None,
        *,
        step_seconds: float | None = None,
        start_at: float | None = None,
    ) -> None:
        rows = _load(Path(path), node)
        self.path = Path(path)
        self.node_names = sorted(rows.nodes)
        #: the node replayed: as given, else the trace's only node, else None
        self.node: str | None = node
        if node is None and len(self.node_names) == 1:
            self.node = self.node_names[0]
        self._samples = _build_samples(rows, path)
        self._times = {g: [s.timestamp for s in ss] for g, ss in self._samples.items()}
        self._gpus = _build_infos(rows, self._samples)
        self.step_seconds = step_seconds or _infer_step(self._times.values())
        hold = HOLD_STEPS * self.step_seconds
        self._timelines = {g: build_timeline(ss, hold) for g, ss in self._samples.items()}
        first = min((t[0] for t in self._times.values()), default=0.0)
        self.time_shift_seconds = 0.0 if start_at is None else start_at - first

    @classmethod
    def from_settings(
        cls, node_name: str, settings: SourceSettings, now: float | None = None
    ) -> ReplaySource:
        """The agent CLI's source: ``replay_path`` replayed as ``node_name`` from ``now``."""
        if settings.replay_path is None:
            raise ConfigError("source.replay_path: required when source.kind is 'replay'")
        start = time.time() if now is None else now
        return cls(settings.replay_path, node_name, start_at=start)

    @property
    def start(self) -> float:
        """Time of the trace's first point (shifted), Unix seconds."""
        return min(t[0] for t in self._times.values()) + self.time_shift_seconds

    @property
    def end(self) -> float:
        """Time of the trace's last point (shifted), Unix seconds."""
        return max(t[-1] for t in self._times.values()) + self.time_shift_seconds

    @property
    def sample_count(self) -> int:
        return sum(len(t) for t in self._times.values())

    def discover(self) -> list[GpuInfo]:
        return list(self._gpus)

    @property
    def until(self) -> float:
        """When the last GPU stops reading (shifted): the last point plus its hold."""
        return self.end + HOLD_STEPS * self.step_seconds

    def read(self, now: float) -> list[GpuSample]:
        """The recorded state at ``now``; see the module docstring for gaps and lifetimes."""
        at = now - self.time_shift_seconds
        out = []
        for info in self._gpus:
            timeline = self._timelines[info.uuid]
            i = bisect.bisect_right(timeline.times, at) - 1
            if 0 <= i < len(timeline.times) - 1:  # the last state is the end of its life
                out.append(msgspec.structs.replace(timeline.states[i], timestamp=now))
        return out

    def iter_samples(self, mark_gaps: bool = True) -> Iterator[GpuSample]:
        """Every GPU's timeline in time order (ties in GPU index order), shifted: the state
        at each recorded point and, with ``mark_gaps``, at each instant a hold runs out
        (a field turns unknown, a gap begins, the GPU's life ends), so a pipeline fed from
        this iterator sees what one polling ``read`` sees."""
        streams = [
            self._gpu_stream(self._timelines[info.uuid], order, mark_gaps)
            for order, info in enumerate(self._gpus)
        ]
        for _, _, sample in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
            yield sample

    def recorded_samples(self) -> Iterator[GpuSample]:
        """Every point as the trace recorded it (nothing held), in time order, shifted:
        for figures about the recording itself (how many utilisation samples, how many 0)."""
        shift = self.time_shift_seconds
        streams = [
            ((s.timestamp + shift, order, s) for s in self._samples[info.uuid])
            for order, info in enumerate(self._gpus)
        ]
        for at, _, sample in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
            yield msgspec.structs.replace(sample, timestamp=at)

    def _gpu_stream(
        self, timeline: Timeline, order: int, mark_gaps: bool
    ) -> Iterator[tuple[float, int, GpuSample]]:
        shift = self.time_shift_seconds
        events = zip(timeline.times, timeline.states, timeline.points, strict=True)
        for at, state, is_point in events:
            if is_point or mark_gaps:
                yield at + shift, order, msgspec.structs.replace(state, timestamp=at + shift)

    def close(self) -> None:
        """Nothing to release: the trace was read whole at construction."""


def _load(path: Path, node: str | None) -> TraceRows:
    if not path.exists():
        raise SourceError(f"replay trace {path} does not exist")
    rows = TraceRows(node)
    for name, stream in open_trace_files(path):
        parse_stream(name, stream, rows)
    if node is not None and rows.nodes and node not in rows.nodes:
        raise SourceError(f"{path}: no rows for node {node!r}; nodes: {sorted(rows.nodes)}")
    if not rows.records:
        raise SourceError(f"{path}: no trace rows found (.csv, .jsonl or .tar.gz)")
    if rows.unknown_columns:
        log.warning("%s: ignoring unknown columns %s", path, sorted(rows.unknown_columns))
    return rows


def _build_samples(rows: TraceRows, path: Path) -> dict[str, list[GpuSample]]:
    samples: dict[str, list[GpuSample]] = {}
    for gpu_uuid, points in rows.records.items():
        series = samples[gpu_uuid] = []
        for timestamp in sorted(points):
            fields = {**points[timestamp], "timestamp": timestamp, "gpu_uuid": gpu_uuid}
            try:
                series.append(msgspec.convert(fields, GpuSample, strict=False))
            except msgspec.ValidationError as err:
                raise SourceError(f"{path}: GPU {gpu_uuid} at {timestamp}: {err}") from err
    return samples


def _build_infos(rows: TraceRows, samples: dict[str, list[GpuSample]]) -> list[GpuInfo]:
    infos = []
    for ordinal, gpu_uuid in enumerate(sorted(samples)):
        totals = (s.memory_total_bytes for s in samples[gpu_uuid] if s.memory_total_bytes)
        infos.append(
            gpu_info_from_meta(gpu_uuid, ordinal, rows.meta.get(gpu_uuid, {}), next(totals, None))
        )
    return sorted(infos, key=lambda info: (info.index, info.uuid))


def _infer_step(series: Iterable[list[float]]) -> float:
    """The most common spacing between consecutive points of a GPU, in seconds."""
    gaps: Counter[float] = Counter()
    for times in series:
        gaps.update(round(b - a, 3) for a, b in itertools.pairwise(times) if b > a)
    return gaps.most_common(1)[0][0] if gaps else FALLBACK_STEP_SECONDS
