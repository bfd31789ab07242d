"""``gpufleet replay TRACE``: run a recorded trace through the collector's pipeline.

The trace's samples go, in batches of one node, through the same ingest, ordering,
idle-episode and accounting code as live samples (an in-memory ledger), as fast as they
can. The samples are the source's timeline, the rule the live replay source reads by:
each recorded field holds for 1.5 trace steps on its own (the last point too), so a memory
point never cuts the activity's hold short; past it a field is unknown, never idle, so a
longer gap ends an idle episode and counts as neither idle nor active time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.model import SCHEMA_VERSION, Batch, GpuInfo, GpuSample, encode_batch
from agent.sources.interface import SourceError
from agent.sources.replay.source import HOLD_STEPS, ReplaySource
from collector.config import AnalysisSettings, CollectorSettings, LedgerSettings
from gpufleet.cli.collector import build_collector

BATCH_SAMPLES = 2000


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "replay", help="run a recorded trace through the pipeline", description=__doc__
    )
    p.add_argument("trace", type=Path, help="trace: CSV, JSONL, .tar.gz or a directory")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--idle-threshold", type=float, default=0.01, help="0..1 (default 0.01)")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class WorkloadFigures:
    workload: str
    samples: int
    zero_fraction: float
    longest_idle_episode_seconds: float
    idle_gpu_seconds: float
    active_gpu_seconds: float
    unknown_gpu_seconds: float


def run(args: argparse.Namespace) -> int:
    try:
        source = ReplaySource(args.trace)
    except SourceError as err:
        print(f"gpufleet replay: {err}", file=sys.stderr)
        return 1
    figures = replay(source, args.idle_threshold)
    if args.format == "json":
        json.dump([dataclasses.asdict(f) for f in figures], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(figures, source.step_seconds)
    return 0


def replay(source: ReplaySource, idle_threshold: float) -> list[WorkloadFigures]:
    """Push every recorded sample through a collector, the way agents' batches go in
    (``submit``, the body as an agent POSTs it); per-workload figures."""
    settings = CollectorSettings(
        ledger=LedgerSettings(url=":memory:"),
        analysis=AnalysisSettings(
            idle_threshold=idle_threshold,
            stale_after_seconds=HOLD_STEPS * source.step_seconds * 1.001,
        ),
    )
    end = source.until + source.step_seconds  # every hold has run out
    collector = build_collector(settings, clock=lambda: end, tokens=frozenset())
    core = collector.core
    gpus = source.discover()
    counts: dict[str, list[int]] = {}  # workload key -> [samples, zero samples]
    _count(source.recorded_samples(), counts)
    try:
        for seq, chunk in enumerate(_chunks(source.iter_samples(), BATCH_SAMPLES), start=1):
            batch = _batch(source.node or "replay", gpus, chunk, seq, end)
            core.service.submit(encode_batch(batch), None, end).result()
            core.applier.tick()
        core.applier.tick(flush=True)
        reports = {r.key: r for r in core.service.workloads(source.start - 3600, end + 3600)}
    finally:
        collector.stop()
    figures = []
    for key, (samples, zeros) in sorted(counts.items()):
        report = reports.get(key)
        usage = report.usage if report is not None else None
        figures.append(
            WorkloadFigures(
                workload=key,
                samples=samples,
                zero_fraction=zeros / samples if samples else 0.0,
                longest_idle_episode_seconds=report.longest_idle_seconds if report else 0.0,
                idle_gpu_seconds=usage.idle_seconds if usage else 0.0,
                active_gpu_seconds=usage.active_seconds if usage else 0.0,
                unknown_gpu_seconds=usage.unknown_seconds if usage else 0.0,
            )
        )
    collector.ledger.close()
    return figures


def _count(samples: Iterable[GpuSample], counts: dict[str, list[int]]) -> None:
    """Recorded utilisation samples (not the held copies) and how many read exactly zero,
    per workload."""
    for sample in samples:
        if sample.sm_activity is None:
            continue
        for workload in sample.workloads:
            entry = counts.setdefault(workload.key, [0, 0])
            entry[0] += 1
            entry[1] += sample.sm_activity == 0.0


def _chunks(samples: Iterator[GpuSample], size: int) -> Iterator[list[GpuSample]]:
    chunk: list[GpuSample] = []
    for sample in samples:
        chunk.append(sample)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _batch(node: str, gpus: list[GpuInfo], samples: list[GpuSample], seq: int, at: float) -> Batch:
    return Batch(
        schema_version=SCHEMA_VERSION,
        node=node,
        agent_boot_id="replay",
        seq=seq,
        sent_at=at,
        gpus=tuple(gpus),
        samples=tuple(samples),
    )


def print_table(
    figures: list[WorkloadFigures], step_seconds: float, console: Console | None = None
) -> None:
    """The figures as a table; on a narrow terminal a workload name folds onto more lines
    rather than being cut (cut names of one trace all read "pod:alibaba-g...")."""
    table = Table(title=f"replay: {len(figures)} workloads, step {step_seconds:.0f} s")
    table.add_column("workload", overflow="fold", ratio=1)
    for column in ("samples", "zero", "longest idle", "idle GPU-h", "unknown GPU-h"):
        table.add_column(column, justify="right", no_wrap=True)
    for f in figures:
        table.add_row(
            f.workload,
            str(f.samples),
            f"{f.zero_fraction:.1%}",
            f"{f.longest_idle_episode_seconds / 60:.0f} min",
            f"{f.idle_gpu_seconds / 3600:.2f}",
            f"{f.unknown_gpu_seconds / 3600:.2f}",
        )
    if console is None:
        console = Console()  # wide enough for workload names in a file or a pipe
        console = console if console.is_terminal else Console(width=160)
    console.print(table)
