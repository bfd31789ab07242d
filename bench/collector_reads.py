"""Reads at fleet scale (issue 23): `/metrics`, the API and the console against a real
`gpufleet collector`, the code before and after, side by side in one run.

Run from the repository root::

    .venv/bin/python -m bench.collector_reads                   # 1,000 and 10,000 GPUs, ~10 min
    .venv/bin/python -m bench.collector_reads --before HEAD~5 --json reads.json
    .venv/bin/python -m bench.collector_reads --big 100000      # + /metrics and /v1/fleet at 100k
    .venv/bin/python -m bench.collector_reads --quick           # seconds, for the smoke test

Per size, one collector per code tree (``--before REV``, default the merge-base of ``main``
and HEAD, checked out into a temporary git worktree; "after" is this working tree), each
from its own tree (bench/read_trees.py) with a fresh SQLite ledger, fed the same synthetic
history (bench/read_feed.py), then, the feed stopped, read: every endpoint ``--requests``
times, trees and endpoints interleaved (bench/read_requests.py), and the console's fleet
page loaded ``--page-loads`` times in Chromium (bench/read_console.py). Figures are medians.

Targets at 10,000 GPUs (issue 23): `/metrics` at most 100 ms of collector CPU per scrape,
`/v1/fleet` summary and a 200-GPU page under 20 ms, a 304 under 2 ms, the console's fleet
page ready within 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from bench.harness import print_table
from bench.read_console import browser, fleet_page_ready_seconds, unavailable
from bench.read_feed import (
    FEED_BATCH_SECONDS,
    History,
    feed,
    history_seconds,
    settings_env,
    wait_settled,
)
from bench.read_requests import AUTH, Endpoint, Measured, endpoints, measure, serves
from bench.read_trees import (
    ROOT,
    CodeTree,
    RunningCollector,
    code_trees,
    default_before,
    running_collector,
    verify_tree,
)
from bench.report_reads import Stats, size_rows, target_lines

#: the endpoints the large size reads (issue 23: /metrics and /v1/fleet only)
BIG_ENDPOINTS = ("/metrics", "/v1/fleet", "/v1/fleet/summary")
STARTED = time.monotonic()


@dataclass
class SizeResult:
    gpus: int
    history: History
    big: bool
    stats: dict[str, dict[str, Stats | None]] = field(default_factory=dict)
    console: dict[str, list[float]] = field(default_factory=dict)
    console_skipped: str | None = None


def log(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:5.0f} s] {message}", file=sys.stderr, flush=True)


def read_endpoints(
    collectors: list[RunningCollector], eps: list[Endpoint], requests: int, fleet_gpus: int
) -> dict[str, dict[str, Stats | None]]:
    """Each endpoint ``requests`` times per tree after one uncounted request (which probes
    whether the tree serves it); rounds interleave endpoints and trees, the order of the
    trees alternating."""
    etags: dict[str, str | None] = {c.tree.label: None for c in collectors}
    taken: dict[str, dict[str, list[Measured] | None]] = {ep.name: {} for ep in eps}
    with contextlib.ExitStack() as stack:
        clients = {c.tree.label: stack.enter_context(httpx.Client(timeout=600)) for c in collectors}

        def once(c: RunningCollector, ep: Endpoint) -> Measured:
            got = measure(clients[c.tree.label], c.base_url, c.pid, ep, etags[c.tree.label])
            if got.etag and ep.path == "/v1/fleet":
                etags[c.tree.label] = got.etag
            return got

        for ep in eps:
            for c in collectors:
                first = once(c, ep)
                served = serves(ep, first, fleet_gpus)
                if not served and not ep.optional:
                    raise RuntimeError(f"{c.tree.label}: {ep.name} answered {first.status}")
                taken[ep.name][c.tree.label] = [] if served else None
        for n in range(requests):
            log(f"  round {n + 1} of {requests}")
            order = collectors if n % 2 == 0 else collectors[::-1]
            for ep in eps:
                for c in order:
                    runs = taken[ep.name][c.tree.label]
                    if runs is not None:
                        runs.append(once(c, ep))
    return {name: {label: Stats.of(runs) if runs else None for label, runs in by_tree.items()}
            for name, by_tree in taken.items()}  # fmt: skip


def fleet_size(collector: RunningCollector) -> int:
    answer = httpx.get(f"{collector.base_url}/v1/fleet", headers=AUTH, timeout=600).json()
    return len(answer["gpus"])


def time_console(collectors: list[RunningCollector], loads: int, result: SizeResult) -> None:
    why = unavailable()
    if why is not None:
        result.console_skipped = why
        return
    with browser() as chromium:
        for c in collectors:  # one uncounted load each: Chromium's and the server's first use
            fleet_page_ready_seconds(chromium, c.base_url, 120)
        for n in range(loads):
            for c in collectors if n % 2 == 0 else collectors[::-1]:
                seconds = fleet_page_ready_seconds(chromium, c.base_url, 120)
                result.console.setdefault(c.tree.label, []).append(seconds)


def run_size(trees: list[CodeTree], gpus: int, big: bool, args: argparse.Namespace) -> SizeResult:
    seconds = history_seconds(gpus, args.history_seconds, args.max_samples)
    env = settings_env(gpus, seconds, quick=args.quick)
    log(f"{gpus:,} GPUs: {seconds} s of history into {len(trees)} collectors")
    with contextlib.ExitStack() as stack:
        collectors = []
        for tree in trees:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-reads-")))
            collectors.append(stack.enter_context(running_collector(tree, work, env)))
        history = feed(collectors, gpus, seconds, args.posters, args.batch_seconds)
        log(f"  fed {history.samples:,} GPU-samples in {history.feed_wall_seconds:.0f} s; settling")
        wait_settled(collectors, float(env.get("GPUFLEET_ANALYSIS__EVALUATION_INTERVAL_SECONDS",
                                               60)), timeout_seconds=1800)  # fmt: skip
        result = SizeResult(gpus, history, big)
        eps = [ep for ep in endpoints() if not big or ep.path.split("?")[0] in BIG_ENDPOINTS]
        requests = args.big_requests if big else args.requests
        result.stats = read_endpoints(collectors, eps, requests, fleet_size(collectors[-1]))
        if not big and args.page_loads > 0:
            log("  console fleet page")
            time_console(collectors, args.page_loads, result)
    return result


def print_size(result: SizeResult, trees: list[CodeTree], requests: int) -> None:
    h = result.history
    print(
        f"\n{result.gpus:,} GPUs: {h.seconds} s of history at 1 Hz ({h.samples:,} GPU-samples "
        f"in {h.batches:,} batches per collector), {requests} requests per endpoint and tree"
    )
    print_table(size_rows(result.stats, result.console, [t.label for t in trees]))
    if result.console_skipped:
        print(f"console fleet page: skipped ({result.console_skipped})")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default=None, help="git revision to compare (default: merge-base "
                   "of main and HEAD)")  # fmt: skip
    p.add_argument("--gpus", default="1000,10000", help="sizes, comma-separated")
    p.add_argument("--big", type=int, default=0, help="a large size for /metrics and /v1/fleet")
    p.add_argument("--requests", type=int, default=20, help="per endpoint and tree")
    p.add_argument("--big-requests", type=int, default=5, help="per endpoint at --big")
    p.add_argument("--history-seconds", type=int, default=600, help="1 Hz history per collector")
    p.add_argument("--max-samples", type=int, default=1_200_000,
                   help="caps the history: GPUs x seconds per collector")  # fmt: skip
    p.add_argument("--batch-seconds", type=int, default=FEED_BATCH_SECONDS,
                   help="seconds of samples per fed batch")  # fmt: skip
    p.add_argument("--posters", type=int, default=2, help="keep-alive posters per collector")
    p.add_argument("--page-loads", type=int, default=3, help="console loads per tree")
    p.add_argument("--target-gpus", type=int, default=10_000, help="size the targets apply to")
    p.add_argument("--json", type=Path, help="write every figure to this file")
    p.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.gpus, args.requests, args.history_seconds, args.page_loads = "16", 3, 20, 1
        args.batch_seconds = 5
        args.target_gpus = 16
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [(int(n), False) for n in args.gpus.split(",") if n] + (
        [(args.big, True)] if args.big else []
    )
    before = args.before or default_before()
    results = []
    signal.signal(signal.SIGTERM, _exit_on_term)  # so the collectors and the checkout go too
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-reads-trees-")))
        trees = stack.enter_context(code_trees(before, ROOT, tmp))
        for tree in trees:
            log(f"{tree.label}: {tree.revision}: collector from {verify_tree(tree)}")
        for gpus, big in sizes:
            results.append(run_size(trees, gpus, big, args))
    print(f"Collector reads: {' vs '.join(f'{t.label} = {t.revision}' for t in trees)}")
    for r in results:
        print_size(r, trees, args.big_requests if r.big else args.requests)
    by_size = {r.gpus: r for r in results if not r.big or r.gpus == args.target_gpus}
    target = by_size.get(args.target_gpus)
    print(f"\nTargets at {args.target_gpus:,} GPUs (after):")
    for line in target_lines(target.stats if target else None, target.console if target else None):
        print(f"  {line}")
    if args.json:
        args.json.write_text(json.dumps(to_json(results, trees), indent=1))
    return 0


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def to_json(results: list[SizeResult], trees: list[CodeTree]) -> dict[str, object]:
    return {
        "trees": {t.label: t.revision for t in trees},
        "sizes": [
            {
                "gpus": r.gpus,
                "history": asdict(r.history),
                "endpoints": {
                    name: {label: asdict(s) if s else None for label, s in by.items()}
                    for name, by in r.stats.items()
                },
                "console_ready_seconds": r.console,
                "console_skipped": r.console_skipped,
            }
            for r in results
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
