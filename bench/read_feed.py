"""The same synthetic history into several collectors at once, then waiting until each
has applied it, committed it to its ledger and evaluated recommendations over it.

Each arrival second's gzipped batches (bench/synthetic_fleet.py, encoded once) go to every
collector's queue, drained by that collector's own keep-alive posters, so the collectors
are fed in lockstep and hold the same data. The history ends a reorder window before the
feed starts, so nothing waits in the window and the apply job takes every sample.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.harness import BATCH_HEADERS
from bench.read_trees import RunningCollector
from bench.synthetic_fleet import BATCH_SECONDS, SampleStream, build_gpus, gzipped_batches

#: the default reorder window (ingest.reorder_window_seconds) and a second of margin
HISTORY_ENDS_BEFORE_SECONDS = 31.0
#: the history arrives as agents drain their spools, 30 s of samples to a batch: a sixth of
#: the requests of the agent's 5 s (the HTTP edge was a third of ingest's CPU), the same samples
FEED_BATCH_SECONDS = 30
#: how often the collector checks whether recommendations are due (gpufleet.cli.collector)
EVALUATE_CHECK_SECONDS = 5.0
#: --quick: apply, commit and evaluate every second (the defaults are 15, 60 and 60 s), and
#: a reorder window of 1 s (the node clocks' estimate can put the history's end at "now")
QUICK_INTERVALS = {
    "GPUFLEET_INGEST__REORDER_WINDOW_SECONDS": "1",
    "GPUFLEET_INGEST__APPLY_INTERVAL_SECONDS": "1",
    "GPUFLEET_INGEST__COMMIT_INTERVAL_SECONDS": "1",
    "GPUFLEET_ANALYSIS__EVALUATION_INTERVAL_SECONDS": "1",
}


@dataclass(frozen=True)
class History:
    gpus: int
    seconds: int
    start_unix: float
    samples: int = 0
    batches: int = 0
    feed_wall_seconds: float = 0.0


def history_seconds(gpus: int, seconds: int, max_samples: int) -> int:
    """``seconds`` of 1 Hz history, shortened so ``gpus`` x seconds stays within
    ``max_samples``; at least two of the agent's batches per node."""
    return max(2 * BATCH_SECONDS, min(seconds, max_samples // gpus))


def settings_env(gpus: int, seconds: int, quick: bool = False) -> dict[str, str]:
    """What every compared collector runs with beyond its defaults.

    ``analysis.stale_after_seconds`` 3,600: the fleet stays live while it is read (the feed
    stopped first), not ``unknown`` a minute after the last sample. Recommendations need a
    GPU idle for ``analysis.idle_window_seconds`` (default 30 min): half the history here,
    so the release, scale-down and consolidation advice a real fleet carries exists. The
    history lies in the past of the collector's clock, so an evaluation during the feed
    sees a GPU idle at that moment as idle since long ago; ``analysis.resolve_after_seconds``
    1 resolves such advice at the next evaluation, so what is open is what the evaluation
    over the whole history wants. ``ingest.commit_interval_seconds`` 15 (default 60)
    shortens the wait for the last commit. The fleet bounds are raised for 100,000 GPUs.
    ``quick`` shortens the apply, commit and evaluation intervals (QUICK_INTERVALS)."""
    return {
        "GPUFLEET_INGEST__COMMIT_INTERVAL_SECONDS": "15",
        "GPUFLEET_ANALYSIS__STALE_AFTER_SECONDS": "3600",
        "GPUFLEET_ANALYSIS__RESOLVE_AFTER_SECONDS": "1",
        "GPUFLEET_ANALYSIS__IDLE_WINDOW_SECONDS": str(max(1, seconds // 2)),
        "GPUFLEET_INGEST__MAX_GPUS": str(max(50_000, 2 * gpus)),
        "GPUFLEET_INGEST__MAX_WORKLOADS": str(max(100_000, 2 * gpus)),
        **(QUICK_INTERVALS if quick else {}),
    }


def feed(
    collectors: Sequence[RunningCollector], gpus: int, seconds: int, posters: int,
    batch_seconds: int = FEED_BATCH_SECONDS,
) -> History:  # fmt: skip
    """Post ``seconds`` of history of ``gpus`` GPUs to every collector, each node's samples
    ``batch_seconds`` to a batch; every answer 200."""
    start_unix = time.time() - seconds - HISTORY_ENDS_BEFORE_SECONDS
    stream = SampleStream(build_gpus(gpus), start_unix)
    feeders = [_Feeder(c, posters) for c in collectors]
    samples = batches = shown = 0
    step = max(1, seconds // 5)
    wall = time.perf_counter()
    for second, body, n in gzipped_batches(stream, seconds, batch_seconds):
        for feeder in feeders:
            feeder.work.put(body)
        samples, batches = samples + n, batches + 1
        if second >= shown + step:
            shown = second
            print(f"  fed {second} of {seconds} s ({samples:,} GPU-samples)", file=sys.stderr)
    for feeder in feeders:
        feeder.close()
    return History(gpus, seconds, start_unix, samples, batches, time.perf_counter() - wall)


class _Feeder:
    """One collector's bounded queue of bodies and its posters."""

    def __init__(self, collector: RunningCollector, posters: int) -> None:
        self.url = f"{collector.base_url}/v1/batches"
        self.work: queue.Queue[bytes | None] = queue.Queue(maxsize=64)
        self.failed: list[str] = []
        self.threads = [threading.Thread(target=self._post, daemon=True) for _ in range(posters)]
        for thread in self.threads:
            thread.start()

    def _post(self) -> None:
        with httpx.Client(headers=BATCH_HEADERS, timeout=120) as client:
            while (body := self.work.get()) is not None:
                response = client.post(self.url, content=body)
                while response.status_code == 429:  # the collector asks for a pause
                    time.sleep(min(2.0, float(response.headers.get("retry-after", "1"))))
                    response = client.post(self.url, content=body)
                if response.status_code != 200:
                    self.failed.append(f"HTTP {response.status_code}: {response.text[:300]}")

    def close(self) -> None:
        for _ in self.threads:
            self.work.put(None)
        for thread in self.threads:
            thread.join()
        if self.failed:
            raise RuntimeError(f"{self.url} refused a synthetic batch: {self.failed[0]}")


def wait_settled(
    collectors: Sequence[RunningCollector], evaluation_seconds: float, timeout_seconds: float
) -> None:
    """Until every collector has applied and committed every batch (no pending samples, no
    batch in the intake log's backlog) and had one recommendation evaluation over it
    (``evaluation_seconds``, the collectors' ``analysis.evaluation_interval_seconds``, and
    a check interval have passed since)."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if all(_settled(_health(c)) for c in collectors):
            time.sleep(evaluation_seconds + EVALUATE_CHECK_SECONDS)
            return
        time.sleep(1.0)
    raise TimeoutError(f"collectors not settled within {timeout_seconds:g} s")


def _settled(health: Mapping[str, Any]) -> bool:
    backlog = (health.get("write_path") or {}).get("backlog_batches", 0)
    return bool(health["pending_samples"] == 0 and backlog == 0)


def _health(collector: RunningCollector) -> Mapping[str, Any]:
    answer: Mapping[str, Any] = httpx.get(f"{collector.base_url}/healthz", timeout=60).json()
    return answer
