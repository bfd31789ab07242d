"""Collector throughput: ingest + analytics in GPU-samples per second on one core, memory per
tracked GPU, and the same samples through a real Prometheus, side by side.

Run from the repository root::

    .venv/bin/python -m bench.collector_throughput             # 1,000 and 10,000 GPUs
    .venv/bin/python -m bench.collector_throughput --quick     # seconds, for the smoke test
    .venv/bin/python -m bench.collector_throughput --profile   # + the hot spots (cProfile)

The fleet (bench/synthetic_fleet.py) is nodes of 8 GPUs sampled at 1 Hz; each node ships
a gzipped batch every 5 s, as the agent does. Batches are built and encoded before the
clock starts. Timed over ``--seconds`` simulated seconds: what the HTTP edge does per
batch (``submit``: gunzip + decode, validate, make the batch durable in the batch log,
buffer it) and what the scheduler does every ``ingest.apply_interval_seconds``
(``--apply-every``; ``Applier.tick``: apply, account, commit;
``Recommender.evaluate_if_due``: recommendations), ticking on after the last batch
until the reorder window has passed on the collector's clock, then a final flush (nothing
left by then). ``evaluate_if_due`` evaluates the recommendations once per 60 s of simulated
time: the first on an empty fleet, the next (the drain makes every run long enough) on the
whole fleet. ``--arrivals serial``: one caller, batch after batch, each awaited before
the next, so each batch is stored (and, at FULL, synced) alone. ``--arrivals concurrent``:
each second's batches in flight at once, as the app's event loop has them from many
agents: one thread hands each body to ``submit`` and the ingest thread stores whatever is
queued with one write (and one sync). Either way the ingest thread decodes, validates,
stores and buffers (all charged to the ingest stage), and the figure is GPU-samples per
CPU second of the whole process. The ledger is a real SQLite file in a temporary directory,
synchronous=FULL (the default) and, for comparison, NORMAL (``--synchronous``).

Targets (issue 3): at least 50,000 GPU-samples/s, under 20 KB per tracked GPU.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bench.collector_feed import (
    SOLO,
    Lockstep,
    SimClock,
    Timed,
    feed_concurrent,
    feed_one_caller,
    ingest_thread_seconds,
)
from bench.harness import memory_bytes_of, print_table
from bench.prometheus_baseline import PrometheusRun
from bench.synthetic_fleet import BATCH_SECONDS, SampleStream, build_gpus, gzipped_batches
from collector.config import IngestSettings

if TYPE_CHECKING:
    from collector.cluster.settings import ClusterSettings
    from gpufleet.cli.collector import Collector

TARGET_SAMPLES_PER_SECOND = 50_000.0
TARGET_BYTES_PER_GPU = 20_000.0
T = TypeVar("T")
STAGES = ("ingest", "tick", "evaluate")
#: the collector's default ingest.apply_interval_seconds
DEFAULT_APPLY_EVERY = IngestSettings().apply_interval_seconds


def encode_fleet(
    gpus: int, seconds: int, start_unix: float, batch_seconds: int = BATCH_SECONDS
) -> list[list[tuple[bytes, int]]]:
    """Gzipped batches per arrival second (built before any timing)."""
    arrivals: list[list[tuple[bytes, int]]] = [[] for _ in range(seconds)]
    stream = SampleStream(build_gpus(gpus), start_unix)
    for second, body, samples in gzipped_batches(stream, seconds, batch_seconds):
        arrivals[second].append((body, samples))
    return arrivals


def run_collector(
    arrivals: list[list[tuple[bytes, int]]],
    start_unix: float,
    work_dir: Path,
    trace_memory: bool = False,
    synchronous: str = "FULL",
    arrivals_mode: str = "serial",
    apply_every: float | None = None,
    ledger_url: str | None = None,
    cluster: ClusterSettings | None = None,
    prepare: Callable[[Collector], Lockstep] | None = None,
) -> Timed:
    """Feed every batch through the real pipeline second by second; CPU charged per stage.
    ``apply_every``: the collector's ``ingest.apply_interval_seconds`` (None: default);
    ``ledger_url``: another ledger than a SQLite file in ``work_dir`` (a PostgreSQL URL);
    ``cluster``: a replica's settings (with a PostgreSQL ``ledger_url``); ``prepare``,
    called once the collector is built and before the clock starts, paces the concurrent
    feed beside other replicas (bench/collector_replicas.py); its ``wait`` also runs once
    after the final flush, before the lease keeper gives its shards back."""
    from collector.config import CollectorSettings, LedgerSettings
    from gpufleet.cli.collector import build_collector, tune_gc

    clock = SimClock(start_unix)
    url = ledger_url or str(work_dir / "ledger.db")
    ledger = LedgerSettings(url=url, synchronous=synchronous)
    ingest = (
        IngestSettings()
        if apply_every is None
        else IngestSettings(apply_interval_seconds=apply_every)
    )
    settings = (
        CollectorSettings(ledger=ledger, ingest=ingest)
        if cluster is None
        else CollectorSettings(ledger=ledger, ingest=ingest, cluster=cluster)
    )
    thresholds = tune_gc()  # as `gpufleet collector` does at startup
    gc.collect()
    rss_before, _ = memory_bytes_of()
    if trace_memory:
        tracemalloc.start()
    collector = build_collector(settings, clock=clock, tokens=frozenset({"bench"}),
                                series_charts=False)  # fmt: skip
    core, timed = collector.core, Timed()
    step = SOLO if prepare is None else prepare(collector)

    def measure_memory() -> None:
        if trace_memory:
            timed.traced_bytes = tracemalloc.get_traced_memory()[0]
        timed.rss_growth_bytes = memory_bytes_of()[0] - rss_before

    timed.at_last_arrival = measure_memory
    cpu = time.process_time()
    if arrivals_mode == "serial":
        feed_one_caller(core, settings.ingest, timed, arrivals, clock)
    else:
        feed_concurrent(core, settings.ingest, timed, arrivals, clock, step)
    timed.cpu_seconds = time.process_time() - cpu
    ingest_thread = ingest_thread_seconds()  # its own CPU, charged to the ingest stage
    timed.stages["ingest"] = timed.stages.get("ingest", 0.0) + ingest_thread
    core.close()
    if trace_memory:
        tracemalloc.stop()
    cpu = time.process_time()
    timed.applied += timed.charge("tick", partial(core.applier.tick, flush=True))
    timed.cpu_seconds += time.process_time() - cpu
    timed.ack_groups = core.queue.recorder.groups
    step.wait()
    if collector.keeper is not None:
        collector.keeper.stop()
    collector.ledger.close()
    if collector.guard is not None:
        collector.guard.close()
    gc.set_threshold(*thresholds)
    return timed


@dataclass(frozen=True)
class SizeResult:
    gpus: int
    timed: Timed
    wall_seconds: float
    synchronous: str = "FULL"
    arrivals: str = "serial"
    apply_every: float = DEFAULT_APPLY_EVERY

    @property
    def samples_per_second(self) -> float:
        return self.timed.samples / self.timed.cpu_seconds

    @property
    def cpu_seconds_per_million(self) -> float:
        return self.timed.cpu_seconds * 1e6 / self.timed.samples


def measure_size(
    gpus: int,
    seconds: int,
    trace_memory: bool,
    profile: bool,
    synchronous: str = "FULL",
    arrivals_mode: str = "serial",
    apply_every: float = 15.0,
) -> SizeResult:
    start_unix = time.time() - seconds - 10
    arrivals = encode_fleet(gpus, seconds, start_unix)
    run = partial(run_collector, arrivals, start_unix, synchronous=synchronous,
                  arrivals_mode=arrivals_mode, apply_every=apply_every)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-collector-") as tmp:
        wall = time.perf_counter()
        timed = profiled(lambda: run(Path(tmp))) if profile else run(Path(tmp))
        wall = time.perf_counter() - wall
    if trace_memory:  # a second pass: tracemalloc slows Python ~3x, so it is never timed
        with tempfile.TemporaryDirectory(prefix="bench-collector-mem-") as tmp:
            traced = run(Path(tmp), trace_memory=True)
        timed.traced_bytes = traced.traced_bytes
    return SizeResult(gpus, timed, wall, synchronous, arrivals_mode, apply_every)


def profiled(work: Callable[[], T]) -> T:
    """Run ``work`` under cProfile (CPU time) and print the top functions."""
    import cProfile
    import pstats

    profile = cProfile.Profile(time.process_time)
    result = profile.runcall(work)
    stats = pstats.Stats(profile)
    print("\nHot spots by own CPU time (cProfile inflates Python-heavy code):")
    stats.sort_stats("tottime").print_stats(20)
    print("By cumulative CPU time:")
    stats.sort_stats("cumulative").print_stats(30)
    return result


def collector_row(r: SizeResult) -> dict[str, object]:
    t = r.timed
    traced = "-" if t.traced_bytes is None else f"{t.traced_bytes / r.gpus / 1000:.1f}"
    return {
        "GPUs": r.gpus,
        "GPU-samples": t.samples,
        "batches": t.batches,
        "CPU s": round(t.cpu_seconds, 2),
        "wall s": round(r.wall_seconds, 2),
        "GPU-samples/s": round(r.samples_per_second),
        "vs target": f"{r.samples_per_second / TARGET_SAMPLES_PER_SECOND:.2f}x",
        "CPU s per 1M": round(r.cpu_seconds_per_million, 1),
        "KB/GPU traced": traced,
        "KB/GPU RSS": f"{t.rss_growth_bytes / r.gpus / 1000:.1f}",
        "CPU by stage": stage_shares(t),
        "ledger synchronous": r.synchronous,
        "arrivals": r.arrivals,
        "apply every s": f"{r.apply_every:g}",
        "acks per transaction": f"{t.batches / max(t.ack_groups, 1):.1f}",
    }


def stage_shares(t: Timed) -> str:
    """Each stage's share of the process CPU; ``other`` is what no stage was charged
    (threads handing work over, the driver's loop)."""
    shares = [f"{k} {t.stages.get(k, 0.0) / t.cpu_seconds:.0%}" for k in STAGES]
    other = max(0.0, t.cpu_seconds - t.staged_seconds) / t.cpu_seconds
    return " ".join([*shares, f"other {other:.0%}"])


def report_collector(results: list[SizeResult]) -> None:
    print(
        "\nCollector ingest + analytics, CPU of the whole process (target >= "
        f"{TARGET_SAMPLES_PER_SECOND:,.0f} GPU-samples/s, < {TARGET_BYTES_PER_GPU / 1000:g} KB/GPU)"
    )
    print_table([collector_row(r) for r in results])
    for r in results:
        if r.timed.applied != r.timed.samples:
            print(f"WARNING: {r.gpus} GPUs: {r.timed.applied} samples applied of {r.timed.samples}")


def _ratio(ours: float, theirs: float) -> str:
    """``ours / theirs``; a tiny run can leave Prometheus under the CPU clock's 10 ms tick."""
    return f"{ours / theirs:.1f}x" if theirs > 0 else "n/a (Prometheus CPU below clock tick)"


def side_by_side_row(ours: SizeResult, run: PrometheusRun, series: int) -> dict[str, object]:
    prom = run.cpu_seconds_per_million
    return {
        "GPUs": run.gpus,
        "collector CPU s/1M": round(ours.cpu_seconds_per_million, 1),
        "Prometheus CPU s/1M": round(prom, 2),
        "ratio": _ratio(ours.cpu_seconds_per_million, prom),
        f"Prometheus CPU s per 1M GPU-samples ({series} series)": round(prom * series, 2),
        "ratio per GPU-sample": _ratio(ours.cpu_seconds_per_million, prom * series),
        "Prometheus samples": run.samples,
        "Prometheus CPU s": round(run.cpu_seconds, 2),
        "wall s": round(run.wall_seconds, 1),
        "scrapes": run.scrapes,
        "mean scrape s": round(run.mean_scrape_seconds, 3),
        "Prometheus RSS KB/GPU": f"{run.rss_bytes / run.gpus / 1000:.1f}",
    }


def report_side_by_side(results: list[SizeResult], runs: list[PrometheusRun]) -> None:
    from bench.prometheus_baseline import SERIES

    print(
        "\nSide by side: CPU seconds per million samples (collector: GPU-samples, all fields, "
        f"ingest + analytics + ledger; Prometheus: TSDB samples, {len(SERIES)} series per GPU, "
        "scrape + parse + append)"
    )
    by_gpus = {r.gpus: r for r in results}
    print_table([side_by_side_row(by_gpus[run.gpus], run, len(SERIES)) for run in runs])


def run_benchmark(
    sizes: list[int],
    seconds: int,
    prometheus_seconds: float,
    trace_sizes: set[int],
    profile: bool,
    prometheus_sizes: list[int] | None = None,
    synchronous: tuple[str, ...] = ("FULL",),
    arrivals: tuple[str, ...] = ("serial", "concurrent"),
    apply_every: tuple[float, ...] = (DEFAULT_APPLY_EVERY,),
) -> None:
    from bench.prometheus_baseline import prometheus_binary, run_prometheus

    print(
        f"Collector throughput: {seconds} simulated seconds at 1 Hz, nodes of 8 GPUs, "
        f"one batch per node every 5 s; sizes {sizes}; arrivals {list(arrivals)}; "
        f"applied every {list(apply_every)} s"
    )
    first = (synchronous[0], arrivals[0], apply_every[0])
    results = [
        measure_size(
            n,
            seconds,
            n in trace_sizes and (sync, k, a) == first,
            profile and k == "serial",
            sync,
            k,
            a,
        )
        for n in sizes
        for a in apply_every
        for sync in synchronous
        for k in arrivals
    ]
    report_collector(results)
    results = [r for r in results if (r.synchronous, r.arrivals, r.apply_every) == first]
    binary = prometheus_binary()
    if prometheus_seconds <= 0:
        print("\nPrometheus: skipped (--prometheus-seconds 0)")
        return
    if binary is None:
        print("\nPrometheus: skipped (no `prometheus` binary; apt-get install -y prometheus)")
        return
    runs = [
        run_prometheus(binary, n, prometheus_seconds, time.time())
        for n in (sizes if prometheus_sizes is None else prometheus_sizes)
    ]
    report_side_by_side(results, runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000], metavar="GPUS")
    parser.add_argument(
        "--seconds",
        type=int,
        default=45,
        help="simulated seconds of batches per size (then ticks until all is applied)",
    )
    parser.add_argument(
        "--prometheus-seconds",
        type=float,
        default=20.0,
        help="wall seconds Prometheus scrapes each size (0: skip Prometheus)",
    )
    parser.add_argument(
        "--trace-memory",
        type=int,
        nargs="*",
        default=[1000],
        metavar="GPUS",
        help="sizes that get a second, tracemalloc pass (3x slower)",
    )
    parser.add_argument(
        "--synchronous",
        nargs="+",
        choices=["FULL", "NORMAL"],
        default=["FULL", "NORMAL"],
        help="ledger durability settings to run (the first is compared with Prometheus)",
    )
    parser.add_argument(
        "--arrivals",
        nargs="+",
        choices=["serial", "concurrent"],
        default=["serial", "concurrent"],
        help="serial: one caller, each batch awaited before the next; concurrent: each second's "
        "batches in flight at once, stored by the ingest thread (the app's way)",
    )
    parser.add_argument(
        "--apply-every",
        type=float,
        nargs="+",
        default=[DEFAULT_APPLY_EVERY],
        metavar="SECONDS",
        help="the collector's ingest.apply_interval_seconds to run (default: its default)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="print cProfile hot spots (serial runs)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--serve-target", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--gpus", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--start-unix", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_target is not None:
        from bench.prometheus_baseline import serve_target

        serve_target(args.serve_target, args.gpus, args.start_unix)
    elif args.quick:
        run_benchmark([16, 48], 35, 2.0, {16}, args.profile, prometheus_sizes=[48])
    else:
        run_benchmark(
            args.sizes,
            args.seconds,
            args.prometheus_seconds,
            set(args.trace_memory),
            args.profile,
            synchronous=tuple(args.synchronous),
            arrivals=tuple(args.arrivals),
            apply_every=tuple(args.apply_every),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
