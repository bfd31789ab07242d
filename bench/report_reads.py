"""bench/collector_reads.py's figures: medians per endpoint and tree, the side-by-side
table, and issue 23's targets judged on the "after" tree."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.read_requests import Measured


@dataclass(frozen=True)
class Stats:
    """One endpoint on one tree: medians over ``requests`` requests (``tick_cpu_ms`` is
    the mean of utime + stime, whose 10 ms ticks only add up over many)."""

    requests: int
    statuses: dict[int, int]
    latency_ms: float
    sent_bytes: int
    body_bytes: int
    cpu_ms: float
    tick_cpu_ms: float

    @classmethod
    def of(cls, runs: Sequence[Measured]) -> Stats:
        statuses: dict[int, int] = {}
        for run in runs:
            statuses[run.status] = statuses.get(run.status, 0) + 1
        return cls(
            requests=len(runs),
            statuses=statuses,
            latency_ms=statistics.median(r.latency_seconds for r in runs) * 1e3,
            sent_bytes=round(statistics.median(r.sent_bytes for r in runs)),
            body_bytes=round(statistics.median(r.body_bytes for r in runs)),
            cpu_ms=statistics.median(r.cpu_seconds for r in runs) * 1e3,
            tick_cpu_ms=sum(r.tick_cpu_seconds for r in runs) / len(runs) * 1e3,
        )


Table = Mapping[str, Mapping[str, Stats | None]]
CONSOLE = "console fleet page ready"


def size_rows(
    stats: Table, console: Mapping[str, Sequence[float]], labels: Sequence[str]
) -> list[dict[str, object]]:
    """One row per endpoint (and the console): per tree median ms, body, CPU ms; then
    the ratios of the last tree to the first."""
    rows = []
    for name, by_tree in stats.items():
        row: dict[str, object] = {"endpoint": name}
        for label in labels:
            s = by_tree.get(label)
            row[f"{label} ms"] = _ms(s.latency_ms) if s else "n/a"
            row[f"{label} body"] = body_text(s) if s else "n/a"
            row[f"{label} CPU ms"] = _ms(s.cpu_ms) if s else "n/a"
        first, last = by_tree.get(labels[0]), by_tree.get(labels[-1])
        row["ratio ms"] = _ratio(last.latency_ms, first.latency_ms) if first and last else "n/a"
        row["ratio CPU"] = _ratio(last.cpu_ms, first.cpu_ms) if first and last else "n/a"
        rows.append(row)
    if console:
        medians = {label: statistics.median(v) * 1e3 for label, v in console.items()}
        row = {"endpoint": CONSOLE}
        for label in labels:
            row[f"{label} ms"] = _ms(medians[label]) if label in medians else "n/a"
            row[f"{label} body"] = row[f"{label} CPU ms"] = ""
        both = labels[0] in medians and labels[-1] in medians
        row["ratio ms"] = _ratio(medians[labels[-1]], medians[labels[0]]) if both else "n/a"
        row["ratio CPU"] = ""
        rows.append(row)
    return rows


def body_text(s: Stats) -> str:
    """The body as sent, and uncompressed where that differs: ``95 kB (730 kB)``."""
    sent = size_text(s.sent_bytes)
    return sent if s.sent_bytes == s.body_bytes else f"{sent} ({size_text(s.body_bytes)})"


def size_text(n: int) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}" if n < 100 * scale else f"{n / scale:,.0f} {unit}"
    return f"{n} B"


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _ratio(after: float, before: float) -> str:
    return f"{after / before:.3g}x" if before > 0 else "n/a"


@dataclass(frozen=True)
class Target:
    endpoint: str
    figure: str  # "cpu_ms" or "latency_ms"
    limit_ms: float
    what: str


TARGETS = (
    Target("GET /metrics", "cpu_ms", 100.0, "/metrics: collector CPU per scrape <= 100 ms"),
    Target("GET /metrics (gzip)", "cpu_ms", 100.0, "/metrics (gzip): CPU per scrape <= 100 ms"),
    Target("GET /v1/fleet/summary", "latency_ms", 20.0, "/v1/fleet summary < 20 ms"),
    Target("GET /v1/fleet?limit=200", "latency_ms", 20.0, "/v1/fleet 200-GPU page < 20 ms"),
    Target("GET /v1/fleet (If-None-Match)", "latency_ms", 2.0, "a 304 < 2 ms"),
)
CONSOLE_TARGET_MS = 1000.0


def target_lines(
    stats: Table | None, console: Mapping[str, Sequence[float]] | None, label: str = "after"
) -> list[str]:
    """One line per target: met / not met with the figure, or why it was not judged."""
    lines = []
    for t in TARGETS:
        s = stats.get(t.endpoint, {}).get(label) if stats is not None else None
        if stats is None or t.endpoint not in stats:
            lines.append(f"{t.what}: not measured")
        elif s is None:
            lines.append(f"{t.what}: not met (not served)")
        else:
            value = getattr(s, t.figure)
            ok = value <= t.limit_ms if t.figure == "cpu_ms" else value < t.limit_ms
            if t.endpoint.endswith("(If-None-Match)") and set(s.statuses) != {304}:
                ok = False
            lines.append(f"{t.what}: {'met' if ok else 'not met'} ({_ms(value)} ms)")
    what = "console fleet page ready <= 1 s"
    if not console or label not in console:
        lines.append(f"{what}: not measured")
    else:
        ready_ms = statistics.median(console[label]) * 1e3
        verdict = "met" if ready_ms <= CONSOLE_TARGET_MS else "not met"
        lines.append(f"{what}: {verdict} ({_ms(ready_ms)} ms)")
    return lines
