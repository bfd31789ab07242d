"""kill -9 a writer at random points: every acked batch is pending or applied exactly once.

The writer subprocess plays the collector: it acknowledges batch ``seq`` (printing the seq
once ``record_batch`` returns, the moment the HTTP layer would answer 2xx; or a group of
up to ``group_max`` seqs, with a resend of its first inside, through one ``record_batches``
call, as the pipeline's group commit does), then applies
queued batches in order, committing deterministic deltas (``weight(seq)`` active seconds
into hour ``seq % 5``) with the cursor ``applied_until = seq``. On start it resumes the way
the pipeline does: pending batches at or before the cursor are done, the rest are queued.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.ledger.store import Ledger
from collector.records import HOUR_SECONDS
from tests.paths import REPO

ROOT = REPO

WRITER = r"""
import json, random, sys
from collector.ledger.store import BatchRecord, GpuCursor, GpuRecord, Ledger, LedgerWrite
from collector.records import Usage, WorkloadRef

path, seq, seed, group_max = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
ledger = Ledger.open(path)
ref = WorkloadRef(key="pod:ns/w", kind="kubernetes_pod", name="w", namespace="ns")
gpu = GpuRecord("G", "n", "H100", "NVIDIA H100", 0, 0.0, 0.0)
ledger.commit(LedgerWrite(gpus={"G": gpu}, workloads={ref.key: ref}))
cursor = ledger.cursors().get("G")
applied = int(cursor.applied_until) if cursor else 0
queue, done = [], []
for bid, body in ledger.pending_batches():
    s = json.loads(body)["seq"]
    (done if s <= applied else queue).append((bid, s))
def record(s):
    return BatchRecord("n", "boot", s, float(s), json.dumps({"seq": s}).encode(), 1)
while True:
    if group_max == 1:
        seqs = [seq]
        ids = [ledger.record_batch(*record(seq))]
    else:
        k = rng.randint(1, group_max)
        seqs = list(range(seq, seq + k)) + ([seq] if rng.random() < 0.5 else [])
        ids = ledger.record_batches([record(s) for s in seqs])
        assert all(i is None for i in ids[k:]), ids  # the resend within the group
    for s, bid in zip(seqs, ids):
        if bid is not None:
            queue.append((bid, s))
    for s in sorted(set(seqs)):
        print(s, flush=True)
    seq = max(seqs) + 1
    if len(queue) < rng.randint(1, 4):
        continue
    k = rng.randint(1, len(queue))
    take, queue = queue[:k], queue[k:]
    write = LedgerWrite(batches_done=[b for b, _ in done])
    done = []
    for bid, s in take:
        weight = float(s % 7 + 1)
        delta = Usage(active_seconds=weight, energy_joules=2 * weight)
        write.gpu_usage.setdefault((s % 5 * 3600.0, "G"), Usage()).add(delta)
        write.workload_usage.setdefault((s % 5 * 3600.0, ref.key), Usage()).add(delta)
        write.batches_done.append(bid)
        applied = s
    write.cursors["G"] = GpuCursor("G", float(applied), b"{}")
    ledger.commit(write)
"""


def weight(seq: int) -> float:
    return float(seq % 7 + 1)


def run_and_kill(db: Path, start_seq: int, seed: int, group_max: int) -> set[int]:
    """Run the writer until it has acked a random number of batches, SIGKILL it, and
    return every seq it reported as acknowledged."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(start_seq), str(seed), str(group_max)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    acked: set[int] = set()
    rng = random.Random(seed)
    target = rng.randint(5, 100)
    while len(acked) < target:
        line = proc.stdout.readline()
        assert line, f"writer died early (rc={proc.poll()})"
        acked.add(int(line))
    time.sleep(rng.uniform(0.0, 0.004))  # land anywhere in a write, not just after a print
    os.kill(proc.pid, signal.SIGKILL)
    acked.update(int(line) for line in proc.stdout.read().split())
    proc.stdout.close()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    return acked


def check_ledger(db: Path, acked: set[int], group_max: int) -> int:
    """Assert nothing lost, nothing counted twice; returns the highest seq acked."""
    with Ledger.open(str(db)) as ledger:
        cursor = ledger.cursors().get("G")
        applied = int(cursor.applied_until) if cursor else 0
        pending = [int(json.loads(body)["seq"]) for _, body in ledger.pending_batches()]
        by_hour = {r.uuid: u for r, u in ledger.usage_by_gpu(0.0, 5 * HOUR_SECONDS)}
        hours = {
            hour: sum(u.active_seconds for _, u in ledger.usage_by_gpu(hour, hour + HOUR_SECONDS))
            for hour in (h * HOUR_SECONDS for h in range(5))
        }
        [(_, gpu_total)] = ledger.usage_totals_by_gpu()
        [(_, workload_total)] = ledger.usage_totals_by_workload()
    highest = max([applied, *pending])
    # every batch acked so far is applied (seq <= cursor) or pending, never both
    assert pending == list(range(applied + 1, highest + 1))
    assert acked <= set(range(1, highest + 1))
    assert highest <= max(acked) + group_max  # at most one group committed, not yet reported
    expected = sum(weight(s) for s in range(1, applied + 1))
    assert sum(u.active_seconds for u in by_hour.values()) == expected
    assert gpu_total.active_seconds == workload_total.active_seconds == expected
    assert gpu_total.energy_joules == 2 * expected
    for hour, seconds in hours.items():
        assert seconds == sum(weight(s) for s in range(1, applied + 1) if s % 5 * 3600 == hour)
    return highest


@pytest.mark.parametrize("group_max", [1, 3])
def test_kill_minus_nine_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path, group_max: int
) -> None:
    db = tmp_path / "ledger.db"
    acked: set[int] = set()
    next_seq = 1
    for seed in range(10):
        # a restarted agent resends from its last unacked batch: duplicates are expected
        acked |= run_and_kill(db, max(1, next_seq - 1), seed, group_max)
        next_seq = check_ledger(db, acked, group_max) + 1
    assert next_seq > 20
